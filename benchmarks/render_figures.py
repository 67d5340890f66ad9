"""Draw the pictures of the docs' home, environment and physics pages: the env's own render and a placement's Gantt.

- ``render_geopipe_v0.png`` (docs/index.md): ``GeoPipe-v0`` rendered with ``render_mode="rgb_array"`` after 21
  decisions of ``bace-pipe`` on seed 15, when the pipeline of one Llama-3.1-405B job of 576 GPUs, larger than any
  region, runs across three regions;
- ``render_toy.png`` (docs/environment.md): ``GeoPipe-Toy-v0`` after 2 decisions of ``bace-pipe`` on seed 0, two
  jobs running and one waiting;
- ``placement_gantt.png`` (docs/physics.md): one 1F1B iteration of a Llama-3.1-70B job of 8 stages (t = 8 H100 per
  stage, MFU 0.4, M = 16 micro-batches of one 8,192-token sequence), placed 4 + 4 over two regions, with the
  boundary between stages 3 and 4 on a WAN link of 28.2 Gbit/s (GeoPipe-v0's median) and 40 ms one-way latency;
  above it, the same stages in one region. Timed by the schedule executor (``physics.schedule.executor_model``
  with ``wan_hops``), drawn by ``geopipe_evaluation.plots.schedule_gantt``.

Usage::

    python benchmarks/render_figures.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
from matplotlib.figure import Figure
from matplotlib.image import imsave

import geopipe_env  # noqa: F401  (registers the env ids)
from geopipe_baselines import make_policy
from geopipe_evaluation.plots import schedule_gantt
from geopipe_env.base.catalog import GPU_CATALOG, MODEL_CATALOG
from geopipe_env.physics import pipeline
from geopipe_env.physics import schedule as sch
from geopipe_env.base.units import transfer_time_s

# (file, env id, seed, decisions of the policy before the picture)
RENDERS = (
    ("render_geopipe_v0.png", "GeoPipe-v0", 15, 21),
    ("render_toy.png", "GeoPipe-Toy-v0", 0, 2),
)
RENDER_POLICY = "bace-pipe"

GANTT_FILE, GANTT_DPI = "placement_gantt.png", 100
MODEL, GPU, STAGES, TENSOR, MICROBATCHES, SEQ_LEN, MFU = "llama-3.1-70b", "H100", 8, 8, 16, 8192, 0.4
WAN_HOP = 3  # the boundary between stages 3 and 4: four stages in each region
INTRA_GBPS, INTRA_LATENCY_S = 400.0, 0.05e-3
WAN_GBPS, WAN_LATENCY_S = 28.2, 0.040


def played(env_id: str, seed: int, decisions: int, render_mode: str | None = "rgb_array",
           policy_name: str = RENDER_POLICY) -> gym.Env:
    """The env after ``decisions`` steps of the scripted policy on ``seed`` (the caller closes it)."""
    env = gym.make(env_id, render_mode=render_mode)
    policy = make_policy(policy_name)
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    for _ in range(decisions):
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            env.close()
            raise ValueError(f"{env_id} seed {seed} ended before {decisions} decisions")
    return env


def render_frame(env_id: str, seed: int, decisions: int) -> np.ndarray:
    """The env's ``rgb_array`` render after ``decisions`` steps of ``RENDER_POLICY`` on ``seed``."""
    env = played(env_id, seed, decisions)
    try:
        return env.render()
    finally:
        env.close()


def placement_models() -> dict[str, sch.ExecutorModel]:
    """The 1F1B executor models of the job in one region and across two (``WAN_HOP`` on the WAN)."""
    spec = MODEL_CATALOG[MODEL]
    f = pipeline.forward_time_s(spec.params, STAGES, 1, SEQ_LEN, GPU_CATALOG[GPU].tflops, MFU, TENSOR)
    forward = np.full(STAGES, f)
    backward = pipeline.BACKWARD_TO_FORWARD * forward
    message = pipeline.activation_bytes(1, SEQ_LEN, spec.hidden)
    transfer = np.full(STAGES - 1, transfer_time_s(message, INTRA_GBPS))
    latency = np.full(STAGES - 1, INTRA_LATENCY_S)
    local = sch.executor_model(forward, backward, transfer, latency, MICROBATCHES, sch.ONE_F_ONE_B)
    transfer[WAN_HOP], latency[WAN_HOP] = transfer_time_s(message, WAN_GBPS), WAN_LATENCY_S
    across = sch.executor_model(forward, backward, transfer, latency, MICROBATCHES, sch.ONE_F_ONE_B,
                                wan_hops=np.array([WAN_HOP]))
    return {"one region": local, "two regions": across}


def gantt_figure() -> Figure:
    """The job's iteration in one region and across two, drawn to one time scale."""
    models = placement_models()
    runs = {name: model.execute(record=True) for name, model in models.items()}
    end = max(run.total_s for run in runs.values())
    fig = Figure(figsize=(10.0, 6.4), layout="constrained")
    axes = fig.subplots(len(models), 1, sharex=True)
    titles = {"one region": "one region", "two regions": f"two regions, stages {WAN_HOP} → {WAN_HOP + 1} over the WAN "
              f"({WAN_GBPS:g} Gbit/s, {WAN_LATENCY_S * 1e3:.0f} ms)"}
    for ax, (name, model) in zip(axes, models.items()):
        run = runs[name]
        schedule_gantt(run, model, ax=ax, title=f"{titles[name]}: iteration {run.total_s:.2f} s", xmax=end)
    axes[0].set_xlabel("")
    axes[1].axhline(WAN_HOP + 0.5, color="0.2", linestyle="--", linewidth=1)
    axes[1].annotate("WAN", (1.0, WAN_HOP + 0.5), xycoords=("axes fraction", "data"), xytext=(4, 0),
                     textcoords="offset points", ha="left", va="center", fontsize=8, color="0.2")
    fig.suptitle(f"{MODEL}, 1F1B, S = {STAGES} (t = {TENSOR} {GPU} per stage), M = {MICROBATCHES}; "
                 f"two regions: stages 0-{WAN_HOP} and {WAN_HOP + 1}-{STAGES - 1}", fontsize=10)
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img"), help="folder of the PNGs (default docs/img)")
    folder = parser.parse_args(argv).out
    folder.mkdir(parents=True, exist_ok=True)
    for name, env_id, seed, decisions in RENDERS:
        imsave(folder / name, render_frame(env_id, seed, decisions))
        print(f"wrote {folder / name} ({env_id}, {RENDER_POLICY}, seed {seed}, after {decisions} decisions)")
    for name, model in placement_models().items():
        print(f"{name}: 1F1B iteration {model.total_s():.3f} s")
    gantt_figure().savefig(folder / GANTT_FILE, dpi=GANTT_DPI)
    print(f"wrote {folder / GANTT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
