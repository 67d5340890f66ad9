"""One job alone against published training runs: GeoPipe's step time for each run's stated configuration.

Each run below is a published pre-training measurement with its tensor (TP), pipeline (PP), context (CP) and data
(DP) parallel degrees, virtual stages (VP), micro-batch, global batch, sequence length and schedule, as its source
states them (or, marked ``assumed``, as the source implies). For each, GeoPipe builds a one-region world holding
exactly the run's GPUs, with the run's intra-node network, launches the one job and reads its iteration time from
the simulator (``ClusterSim.estimate``: the code path every episode takes). No ``mfu`` is set, so compute is
calibrated: each GPU type's kernel efficiency (``geopipe_env.base.catalog``), attention FLOPs counted, the bubble and
the messages timed by the schedule and the all-reduce added (not overlapped).

Runs have a role:

* ``sets``: the runs whose implied kernel efficiency sets a GPU type's constant: its geometric mean over them,
  rounded to three digits (``--fit`` prints it; ``tests/test_calibration.py`` holds the catalog to it). H100: three
  of the four NVIDIA DGX Cloud BF16 recipes of release v24.11.1 at their smallest GPU count (Llama 3.1 70B and
  405B, GPT-3 175B). A100: BLOOM-176B.
* ``tests``: held back. Nothing was tuned to them; they check the constants. The fourth v24.11.1 recipe at its
  smallest count, Nemotron-4 340B on 128 GPUs, is one (as a setting run it would make the H100 constant 0.572).

The efficiency a run implies is the one at which GeoPipe's step time equals the published one (solved by secant
on ``T(η)``, which is close to ``a/η + b``).

Usage::

    python benchmarks/calibration.py            # the table: published, GeoPipe, ratio, implied efficiency
    python benchmarks/calibration.py --fit      # each GPU type's constant from its ``sets`` runs
    python benchmarks/calibration.py --markdown docs/calibration-table.md
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import NamedTuple

import numpy as np

from geopipe_env.base.catalog import GPU_CATALOG
from geopipe_env.simulation.generator import sample_world
from geopipe_env.scenario.loader import ScenarioError, load_scenario
from geopipe_env.simulation.simulator import ClusterSim
from geopipe_env.simulation.core_types import Placement

INTRA_H100_GBPS = 400.0  # DGX H100: eight ConnectX-7 NDR InfiniBand ports of 400 Gbit/s, one per GPU (NVIDIA datasheet)
INTRA_A100_GBPS = 200.0  # DGX A100: eight ConnectX-6 HDR ports of 200 Gbit/s, one per GPU (NVIDIA datasheet)
INTRA_LATENCY_MS = 0.005  # an InfiniBand hop, a few microseconds (assumed)
DGXC = "NVIDIA/dgxc-benchmarking"


class Model(NamedTuple):
    name: str
    params_b: float
    layers: int
    hidden: int


# Model shapes from their configurations (params include embeddings).
LLAMA_70B = Model("llama-3.1-70b", 70.6, 80, 8192)  # Meta Llama-3.1-70B config.json
LLAMA_405B = Model("llama-3.1-405b", 405.0, 126, 16384)  # Meta Llama-3.1-405B config.json
GPT3_175B = Model("gpt3-175b", 175.0, 96, 12288)  # Brown et al. 2020, Table 2.1
NEMOTRON_340B = Model("nemotron-4-340b", 340.0, 96, 18432)  # NeMo Nemotron4Config340B
BLOOM_176B = Model("bloom-176b", 176.2, 70, 14336)  # bigscience tr11-176B-ml
PTDP_175B = Model("ptdp-174.6b", 174.6, 96, 12288)  # Narayanan et al. 2021, Table 2 (GPT-3's shape)
PTDP_530B = Model("ptdp-529.6b", 529.6, 105, 20480)  # Narayanan et al. 2021, Tables 1 and 2


class Run(NamedTuple):
    """A published run: where, what, how, and its step time (s per iteration)."""

    label: str
    source: str
    gpu: str
    model: Model
    tp: int
    pp: int
    cp: int
    dp: int
    vp: int  # virtual stages (1: none)
    mbs: int
    gbs: int  # sequences
    seq: int
    schedule: str
    recompute: bool
    step_s: float
    role: str  # "sets" or "tests"
    note: str = ""
    optimizer_state: str = "fp32"  # the scenario key: "bf16" where the run's optimizer keeps its state in bf16

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp


def _ptdp_step_s(model: Model, batch: int, gpus: int, tflops_per_gpu: float) -> float:
    """PTD-P's Table 2 gives TFLOP/s per GPU by its Eq. 3, ``F = 96·B·s·l·h²·(1 + s/6h + V/16lh)`` per iteration
    (recompute included), with ``s = 2048`` and ``V = 51,200``: the step time is F ÷ (GPUs × TFLOP/s)."""
    s, v, l, h = 2048, 51200, model.layers, model.hidden
    flops = 96.0 * batch * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h))
    return flops / (gpus * tflops_per_gpu * 1e12)


_DGXC_NOTE = "schedule: interleaved 1F1B inferred from VP > 1 (the recipe does not name it); no recompute (assumed)"
# The Nemotron-4 340B recipe's configuration (nemotron/nemotron4-340b-synth.yaml, release v24.11.1) sets its
# distributed Adam's state dtype to bf16 (`optim.dtype: bf16`), which NeMo 2.0, the recipe's container, honours with
# no master copy of the weights (`store_params` false where the state's dtype is the model's).
_NEMOTRON_NOTE = _DGXC_NOTE + "; optimizer state in bf16 (the recipe's optim.dtype)"
_PTDP_NOTE = ("TP 8 × PP 12 (175B) or × 35 (530B) assumed (Table 2 gives the model-parallel size only, Table 1 uses "
              "TP 8); schedule assumed 1F1B; recompute as in the paper's experiments")

RUNS: tuple[Run, ...] = (
    # NVIDIA DGX Cloud benchmarking recipes, H100 BF16, release v24.11.1 (commit 35a9aec): the README results tables.
    Run("Llama 3.1 70B, 64 GPUs", f"{DGXC} v24.11.1, llama3.1 README", "H100", LLAMA_70B, 4, 4, 2, 2, 5, 1, 128,
        8192, "interleaved-1f1b", False, 14.72, "sets", _DGXC_NOTE),
    Run("Llama 3.1 405B, 576 GPUs", f"{DGXC} v24.11.1, llama3.1 README", "H100", LLAMA_405B, 8, 9, 2, 4, 7, 1, 252,
        8192, "interleaved-1f1b", False, 17.20, "sets", _DGXC_NOTE),
    Run("GPT-3 175B, 128 GPUs", f"{DGXC} v24.11.1, nemo_megatron README", "H100", GPT3_175B, 4, 8, 1, 4, 12, 1, 256,
        2048, "interleaved-1f1b", False, 8.91, "sets", _DGXC_NOTE),
    Run("Nemotron-4 340B, 128 GPUs", f"{DGXC} v24.11.1, nemotron README", "H100", NEMOTRON_340B, 8, 8, 1, 2, 12, 1,
        32, 4096, "interleaved-1f1b", False, 4.61, "tests", _NEMOTRON_NOTE, "bf16"),
    # The same recipes at larger scale (more data-parallel replicas): held back.
    Run("Llama 3.1 70B, 2,048 GPUs", f"{DGXC} v24.11.1, llama3.1 README", "H100", LLAMA_70B, 4, 4, 2, 64, 5, 1,
        4096, 8192, "interleaved-1f1b", False, 14.98, "tests", _DGXC_NOTE),
    Run("Llama 3.1 405B, 2,304 GPUs", f"{DGXC} v24.11.1, llama3.1 README", "H100", LLAMA_405B, 8, 9, 2, 16, 7, 1,
        1008, 8192, "interleaved-1f1b", False, 17.62, "tests", _DGXC_NOTE),
    Run("GPT-3 175B, 2,048 GPUs", f"{DGXC} v24.11.1, nemo_megatron README", "H100", GPT3_175B, 4, 8, 1, 64, 12, 1,
        4096, 2048, "interleaved-1f1b", False, 9.02, "tests", _DGXC_NOTE),
    Run("Nemotron-4 340B, 2,048 GPUs", f"{DGXC} v24.11.1, nemotron README", "H100", NEMOTRON_340B, 8, 8, 1, 32, 12,
        1, 512, 4096, "interleaved-1f1b", False, 4.84, "tests", _NEMOTRON_NOTE, "bf16"),
    # A later release of the same recipes (v25.04, NeMo 25.02): newer software on the same hardware, held back.
    Run("Llama 3.1 70B, 64 GPUs (v25.04)", f"{DGXC} v25.04, llama3.1 README", "H100", LLAMA_70B, 4, 4, 2, 2, 5, 1,
        128, 8192, "interleaved-1f1b", False, 14.66, "tests", _DGXC_NOTE),
    Run("Llama 3.1 405B, 512 GPUs (v25.04)", f"{DGXC} v25.04, llama3.1 README", "H100", LLAMA_405B, 8, 8, 2, 4, 8,
        1, 256, 8192, "interleaved-1f1b", False, 19.78, "tests", _DGXC_NOTE),
    # BLOOM-176B (bigscience-workshop/bigscience, train/tr11-176B-ml): 384 A100 80 GB, README iteration 85376.
    Run("BLOOM-176B, 384 GPUs", "bigscience tr11-176B-ml README and slurm script", "A100", BLOOM_176B, 4, 12, 1, 8, 1,
        2, 2048, 2048, "1f1b", True, 104.70, "sets",
        "DeepSpeed's pipeline engine (1F1B, not interleaved; assumed, the README does not name it); "
        "--checkpoint-activations"),
    # Megatron-LM PTD-P (Narayanan et al., SC'21, arXiv 2104.04473), Table 2: A100 80 GB, micro-batch 1.
    *(
        Run(f"PTD-P {m.params_b:g}B, {g:,} GPUs", "Narayanan et al. 2021, Table 2", "A100", m, 8, pp, 1, g // (8 * pp),
            1, 1, batch, 2048, "1f1b", True, _ptdp_step_s(m, batch, g, tflops), "tests", _PTDP_NOTE)
        for m, pp, batch, g, tflops in (
            (PTDP_175B, 12, 1536, 384, 153.0), (PTDP_175B, 12, 1536, 768, 149.0), (PTDP_175B, 12, 1536, 1536, 141.0),
            (PTDP_530B, 35, 2240, 560, 171.0), (PTDP_530B, 35, 2240, 1120, 167.0), (PTDP_530B, 35, 2240, 2240, 159.0),
        )
    ),
)


def scenario_for(run: Run, efficiency: float | None = None) -> dict:
    """A one-region world holding exactly the run's GPUs, with the run as its one job (a dict for ``load_scenario``).
    ``efficiency`` overrides the GPU type's kernel efficiency."""
    gpus = {} if efficiency is None else {run.gpu: {"kernel_efficiency": efficiency}}
    intra = INTRA_H100_GBPS if run.gpu == "H100" else INTRA_A100_GBPS
    m = run.model
    return {
        "version": 1, "name": "calibration", "horizon_h": 24 * 365, "start_utc": "2023-01-01T00:00Z",
        "pipeline_schedule": run.schedule, "virtual_stages": run.vp, "gpus": gpus,
        "regions": [{"id": "one", "gpu": run.gpu, "num_gpus": run.gpus, "price_usd_per_kwh": 0.1}],
        "network": {"rule": "matrix", "intra_region": {"bandwidth_gbps": intra, "latency_ms": INTRA_LATENCY_MS},
                    "matrix": {}},
        "workload": {
            "num_jobs": 1, "arrival": {"process": "batch"}, "epochs": 1,
            "models": [{"name": m.name, "params_b": m.params_b, "layers": m.layers, "hidden": m.hidden}],
            "datasets": [{"name": "tokens", "tokens": 1e9}],
            "gpus_per_stage": run.tp, "pipeline_stages": run.pp, "context_parallel": run.cp,
            "data_parallel": run.dp, "micro_batch_size": run.mbs, "global_batch_size": run.gbs,
            "seq_len": run.seq, "recompute": run.recompute, "optimizer_state": run.optimizer_state,
        },
    }


def step_time_s(run: Run, efficiency: float | None = None) -> float:
    """GeoPipe's iteration time for the run: its one job launched alone on its region."""
    world = sample_world(load_scenario(scenario_for(run, efficiency)), np.random.default_rng(0))
    sim = ClusterSim(world)
    (job,) = world.jobs
    return sim.estimate(job, Placement((0,), (job.num_stages,))).iteration_s


def implied_efficiency(run: Run, tolerance: float = 1e-6) -> float:
    """The kernel efficiency at which GeoPipe's step time equals the published one (secant on T(η))."""
    a, b = 0.4, 0.8
    fa, fb = step_time_s(run, a) - run.step_s, step_time_s(run, b) - run.step_s
    for _ in range(30):
        if fb == fa:
            break
        a, b, fa = b, b - fb * (b - a) / (fb - fa), fb
        b = min(max(b, 0.05), 1.0)
        fb = step_time_s(run, b) - run.step_s
        if abs(fb) <= tolerance * run.step_s:
            break
    return b


def fits(run: Run) -> str | None:
    """None if GeoPipe's memory model fits the run's configuration, else why not (the loader's message)."""
    try:
        load_scenario(scenario_for(run, efficiency=0.5))  # memory does not depend on the efficiency
    except ScenarioError as error:
        return str(error)
    return None


def fitted(runs: tuple[Run, ...] = RUNS) -> dict[str, float]:
    """Per GPU type: the geometric mean of the efficiencies its ``sets`` runs imply (those GeoPipe's memory model
    fits), rounded to three digits."""
    by_gpu: dict[str, list[float]] = {}
    for run in runs:
        if run.role == "sets" and fits(run) is None:
            by_gpu.setdefault(run.gpu, []).append(implied_efficiency(run))
    return {gpu: round(math.exp(float(np.mean(np.log(values)))), 3) for gpu, values in by_gpu.items()}


def table(runs: tuple[Run, ...] = RUNS) -> list[dict]:
    """Per run: published and GeoPipe step times, their ratio (GeoPipe's throughput ÷ the published one) and the
    efficiency the run implies; a run GeoPipe's memory model does not fit has ``geopipe_s`` NaN and says why."""
    rows = []
    for run in runs:
        row = {"run": run.label, "role": run.role, "gpu": run.gpu, "shape": _shape(run), "schedule": run.schedule,
               "published_s": run.step_s, "source": run.source, "note": run.note}
        why = fits(run)
        if why is None:
            ours = step_time_s(run)
            row.update(geopipe_s=ours, throughput_ratio=run.step_s / ours, implied_efficiency=implied_efficiency(run),
                       does_not_fit="")
        else:
            row.update(geopipe_s=math.nan, throughput_ratio=math.nan, implied_efficiency=math.nan, does_not_fit=why)
        rows.append(row)
    return rows


def _shape(run: Run) -> str:
    parts = [f"TP{run.tp}", f"PP{run.pp}"] + ([f"CP{run.cp}"] if run.cp > 1 else []) + [f"DP{run.dp}"]
    parts += [f"VP{run.vp}"] if run.vp > 1 else []
    extras = (", recompute" if run.recompute else "") + (f", {run.optimizer_state} optimizer state"
                                                        if run.optimizer_state != "fp32" else "")
    return " ".join(parts) + f", b={run.mbs}, B={run.gbs}, s={run.seq}" + extras


def summary(rows: list[dict]) -> list[str]:
    """Geometric mean and range of the throughput ratios, for all runs and for the held-back ones."""
    lines = []
    timed = [r for r in rows if not r["does_not_fit"]]
    for label, chosen in (("all timed runs", timed), ("held back (tests)", [r for r in timed if r["role"] == "tests"]),
                          ("setting (sets)", [r for r in timed if r["role"] == "sets"])):
        ratios = np.array([r["throughput_ratio"] for r in chosen])
        geo = math.exp(float(np.log(ratios).mean()))
        inside = int(((ratios >= 0.85) & (ratios <= 1.15)).sum())
        lines.append(f"{label}: {len(chosen)} runs, geometric mean {geo:.3f}, range {ratios.min():.2f}–"
                     f"{ratios.max():.2f}, {inside} of {len(chosen)} within ±15%")
    for r in rows:
        if r["does_not_fit"]:
            lines.append(f"{r['run']}: not timed, GeoPipe's memory model does not fit it ({r['does_not_fit']})")
    return lines


def markdown(rows: list[dict]) -> str:
    head = ("| run | role | GPU | shape | published s | GeoPipe s | throughput ratio | implied η |\n"
            "|---|---|---|---|---:|---:|---:|---:|\n")
    body = "".join(
        f"| {r['run']} | {r['role']} | {r['gpu']} | {r['shape']} | {r['published_s']:.2f} | "
        + ("does not fit | – | – |\n" if r["does_not_fit"] else
           f"{r['geopipe_s']:.2f} | {r['throughput_ratio']:.3f} | {r['implied_efficiency']:.3f} |\n")
        for r in rows
    )
    return head + body + "\n" + "\n".join(f"- {line}" for line in summary(rows)) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="print each GPU type's constant from its `sets` runs")
    parser.add_argument("--markdown", help="also write the table as Markdown to this file")
    args = parser.parse_args(argv)
    if args.fit:
        for gpu, value in fitted().items():
            now = GPU_CATALOG[gpu].kernel_efficiency
            print(f"{gpu}: {value:.3f} (catalog: {now})")
        return 0
    rows = table()
    width = max(len(r["run"]) for r in rows)
    print(f"{'run':<{width}}  role   GPU   published_s  geopipe_s  ratio  implied_eta")
    for r in rows:
        print(f"{r['run']:<{width}}  {r['role']:<5}  {r['gpu']:<4}  {r['published_s']:>11.2f}  {r['geopipe_s']:>9.2f}  "
              f"{r['throughput_ratio']:>5.3f}  {r['implied_efficiency']:>11.3f}" + ("  (does not fit)" if r["does_not_fit"] else ""))
    for line in summary(rows):
        print(line)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
