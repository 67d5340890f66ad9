"""The bundled Philly extract beside the published per-cluster summaries of Philly, Helios and the Acme LLM clusters.

Usage: ``python benchmarks/trace_stats.py``. One row per statistic, one column per trace: the bundled extract
(``geopipe_env.scenario.bundled.job_trace("philly")``, as GeoPipe-Trace-v0 replays it), AcmeTrace's summary row of the full
Philly trace, Helios's four SenseTime clusters together (2020) and the two Shanghai AI Lab LLM clusters of AcmeTrace,
Seren and Kalos (2023). The summaries give job counts, GPUs per job and run times of GPU jobs; only the extract has
submission times, so its arrival statistics stand alone.
"""

from __future__ import annotations

from geopipe_env.scenario import bundled

ROWS = (
    ("gpu_job_num", "GPU jobs", "{:,.0f}"),
    ("avg_gpu_num", "GPUs per job, mean", "{:.2f}"),
    ("med_gpu_num", "GPUs per job, median", "{:.0f}"),
    ("max_gpu", "GPUs per job, max", "{:,.0f}"),
    ("avg_run_time_gpu", "run time, mean (h)", "{:.2f}"),
    ("med_run_time_gpu", "run time, median (h)", "{:.3f}"),
    ("max_run_time_gpu", "run time, max (days)", "{:.1f}"),
    ("span_days", "submissions span (days)", "{:.1f}"),
    ("mean_gap_s", "gap between submissions, mean (s)", "{:.1f}"),
    ("gap_cv", "gap, coefficient of variation", "{:.1f}"),
    ("zero_gap_share", "gaps of zero (same second)", "{:.1%}"),
)
SCALE = {"avg_run_time_gpu": 1 / 3600, "med_run_time_gpu": 1 / 3600, "max_run_time_gpu": 1 / 86400}


def table() -> str:
    """The comparison as a markdown table."""
    acme, helios = bundled.trace_summary("acme"), bundled.trace_summary("helios")
    columns = {
        "Philly, bundled extract": bundled.trace_statistics(bundled.job_trace("philly")),
        "Philly (AcmeTrace)": acme["Philly"],
        "Helios, 4 clusters": helios["total"],
        "Seren (LLM)": acme["Seren"],
        "Kalos (LLM)": acme["Kalos"],
    }
    lines = ["| statistic | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for key, label, fmt in ROWS:
        cells = []
        for values in columns.values():
            value = values.get(key)
            cells.append("—" if value is None else fmt.format(value * SCALE.get(key, 1.0)))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
