"""Layer 3: read the real data bundled under ``geopipe_env/data/``.

Hourly 2023 electricity prices (23 markets) and grid carbon intensity (16 zones), the joined ``geo10``
matrices of measured inter-region RTT and throughput, and public job traces (the Philly trace's submit times and
GPU-times, with per-cluster summaries of Philly, Helios and the Acme LLM clusters). Provenance and licences are in
``data/LICENSES.md``.

Every loader is cached, and every returned array is read-only, so that scenarios built from the same market
share one array and no caller can change another's data.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np

from geopipe_env.scenario.types import HOURS_PER_YEAR, HourlySeries
from geopipe_env.base.units import usd_per_kwh_from_usd_per_mwh

DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # geopipe_env/data
PRICE_FILE = "electricity_price_hourly_2023_usd.csv"  # USD/MWh, hour-beginning UTC
CARBON_FILE = "carbon_intensity_hourly_2023_lca.csv"  # gCO2eq/kWh, life-cycle, consumption-based
GEO10_FILE = "geo10_regions.json"
TIME_COLUMN = "datetime_utc"


def _read_only(values: np.ndarray) -> np.ndarray:
    values.flags.writeable = False
    return values


@lru_cache(maxsize=None)
def _hourly_table(filename: str) -> tuple[tuple[str, ...], np.ndarray]:
    """The columns (after the time column) of an hourly CSV and its values, (HOURS_PER_YEAR, num_columns)."""
    with open(DATA_DIR / filename, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    if header[0] != TIME_COLUMN or len(body) != HOURS_PER_YEAR:
        raise ValueError(f"{filename}: expected a '{TIME_COLUMN}' column and {HOURS_PER_YEAR} hourly rows")
    values = np.array([[float(cell) for cell in row[1:]] for row in body], dtype=np.float64)
    return tuple(header[1:]), _read_only(values)


def _column(filename: str, name: str) -> np.ndarray:
    columns, values = _hourly_table(filename)
    if name not in columns:
        raise KeyError(f"{name!r} is not a column of {filename}; valid: {', '.join(columns)}")
    return values[:, columns.index(name)]


def price_markets() -> tuple[str, ...]:
    """Names of the bundled electricity markets, e.g. ``US-MIDA-PJM``, ``GB``, ``DE-LU``."""
    return _hourly_table(PRICE_FILE)[0]


def carbon_zones() -> tuple[str, ...]:
    """Names of the bundled carbon-intensity zones, e.g. ``US-MIDA-PJM``, ``GB``, ``DE-LU``."""
    return _hourly_table(CARBON_FILE)[0]


@lru_cache(maxsize=None)
def price_series(market: str) -> HourlySeries:
    """A market's hourly 2023 price in USD/kWh (may be negative: real market outcomes are kept)."""
    values = usd_per_kwh_from_usd_per_mwh(_column(PRICE_FILE, market))
    return HourlySeries(market, _read_only(np.ascontiguousarray(values)))


@lru_cache(maxsize=None)
def carbon_series(zone: str) -> HourlySeries:
    """A zone's hourly 2023 life-cycle carbon intensity in g/kWh."""
    return HourlySeries(zone, _read_only(np.ascontiguousarray(_column(CARBON_FILE, zone))))


@lru_cache(maxsize=None)
def _geo10() -> dict:
    with open(DATA_DIR / GEO10_FILE, encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=None)
def geo10_matrix(name: str) -> tuple[tuple[str, ...], np.ndarray]:
    """A geo10 matrix: the region ids and a (10, 10) array, row = source, column = destination.

    Missing measurements and the diagonal are ``nan``. Units are in the name (``rtt_ms`` is a round trip).
    """
    data = _geo10()
    if name not in data["matrices"]:
        raise KeyError(f"{name!r} is not a geo10 matrix; valid: {', '.join(data['matrices'])}")
    rows = data["matrices"][name]["values"]
    values = np.array([[np.nan if v is None else float(v) for v in row] for row in rows], dtype=np.float64)
    return tuple(data["region_ids"]), _read_only(values)


# Bundled job traces by name: the file and its columns (submission time, run time in seconds, GPUs, GPU-seconds).
JOB_TRACES = {"philly": "philly_jobs_pollux.csv"}
# Per-cluster summaries of public traces, for checking the bundled traces' statistics (benchmarks/trace_stats.py).
TRACE_SUMMARIES = {"acme": "acmetrace_cluster_summary.csv", "helios": "helios_cluster_summary.csv"}


@dataclass(frozen=True, eq=False)
class JobTrace:
    """A job trace, sorted by submission time (stably). Arrays are read-only, one entry per job.

    Attributes:
        name: the trace's name in :data:`JOB_TRACES`.
        submit_s: submission times, seconds after the first.
        duration_s: run times, seconds.
        num_gpus: GPUs per job.
        gpu_seconds: ``duration_s × num_gpus``.
        gpu_time_quantile: each job's mid-rank quantile of GPU-time among all the trace's jobs, in (0, 1): the
            fraction of jobs with less GPU-time plus half of those with as much.
    """

    name: str
    submit_s: np.ndarray
    duration_s: np.ndarray
    num_gpus: np.ndarray
    gpu_seconds: np.ndarray
    gpu_time_quantile: np.ndarray

    def __len__(self) -> int:
        return len(self.submit_s)


def job_traces() -> tuple[str, ...]:
    """Names of the bundled job traces."""
    return tuple(JOB_TRACES)


@lru_cache(maxsize=None)
def job_trace(name: str) -> JobTrace:
    """A bundled job trace by name (:func:`job_traces`)."""
    if name not in JOB_TRACES:
        raise KeyError(f"{name!r} is not a bundled job trace; valid: {', '.join(JOB_TRACES)}")
    with open(DATA_DIR / JOB_TRACES[name], newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    # The timestamps carry no time zone (Philly's are US-Pacific wall-clock times): read as UTC, so that every
    # machine gets the same gaps.
    submit = np.array([datetime.fromisoformat(r["timestamp"]).replace(tzinfo=timezone.utc).timestamp() for r in rows])
    order = np.argsort(submit, kind="stable")
    duration = np.array([float(r["duration"]) for r in rows])[order]
    gpus = np.array([int(r["num_gpus"]) for r in rows], dtype=np.int64)[order]
    gpu_seconds = np.array([float(r["gpu_time"]) for r in rows])[order]
    ranked = np.sort(gpu_seconds)
    below = np.searchsorted(ranked, gpu_seconds, side="left")
    at_most = np.searchsorted(ranked, gpu_seconds, side="right")
    return JobTrace(
        name=name,
        submit_s=_read_only(submit[order] - submit[order][0]),
        duration_s=_read_only(duration),
        num_gpus=_read_only(gpus),
        gpu_seconds=_read_only(gpu_seconds),
        gpu_time_quantile=_read_only((below + at_most) / (2.0 * len(rows))),
    )


@lru_cache(maxsize=None)
def trace_summary(name: str) -> dict[str, dict[str, float]]:
    """A bundled per-cluster summary (:data:`TRACE_SUMMARIES`): cluster → column → value (empty cells left out)."""
    if name not in TRACE_SUMMARIES:
        raise KeyError(f"{name!r} is not a bundled trace summary; valid: {', '.join(TRACE_SUMMARIES)}")
    with open(DATA_DIR / TRACE_SUMMARIES[name], newline="", encoding="utf-8") as f:
        return {row["id"]: {k: float(v) for k, v in row.items() if k != "id" and v} for row in csv.DictReader(f)}


def trace_statistics(trace: JobTrace) -> dict[str, float]:
    """A trace's job statistics under the column names of the bundled summaries (:func:`trace_summary`), so that
    the two compare key by key: GPU jobs, GPUs per job and run times (s), with its arrival statistics beside them
    (``span_days``, ``mean_gap_s``, ``gap_cv``: the coefficient of variation of the gaps, 1 for Poisson arrivals,
    and ``zero_gap_share``)."""
    gaps = np.diff(trace.submit_s)
    return {
        "gpu_job_num": float(len(trace)),
        "avg_gpu_num": float(trace.num_gpus.mean()),
        "med_gpu_num": float(np.median(trace.num_gpus)),
        "max_gpu": float(trace.num_gpus.max()),
        "avg_run_time_gpu": float(trace.duration_s.mean()),
        "med_run_time_gpu": float(np.median(trace.duration_s)),
        "max_run_time_gpu": float(trace.duration_s.max()),
        "span_days": float(trace.submit_s[-1] / 86400.0),
        "mean_gap_s": float(gaps.mean()),
        "gap_cv": float(gaps.std() / gaps.mean()),
        "zero_gap_share": float(np.mean(gaps == 0.0)),
    }
