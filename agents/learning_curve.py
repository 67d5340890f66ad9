"""The learning curve of a training run: held-out evaluation return vs timesteps, with the returns of scripted
policies on the same env and seeds drawn as horizontal lines.

``train.py`` redraws ``<run_dir>/learning_curve.png`` after every evaluation, from ``evaluations.csv`` (written by
:class:`geopipe_agents.callbacks.HeldOutEvalCallback`) and ``reference_returns.csv`` (the scripted policies, evaluated once
when training starts). To redraw it by hand::

    python -m geopipe_agents.learning_curve runs/<run> [--out curve.png] [--references bace-pipe sjf rollout ...]

``--references`` first plays those policies (scripted names, ``rollout`` and ``optimal`` included) on the run's
evaluation env and seeds (from its ``args.yml`` and ``config.yml``) and replaces ``reference_returns.csv`` with
their rows; the line of the best scripted policy among them is marked as such (the slow references, dotted, are
not scripted policies).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
import yaml
from matplotlib.figure import Figure

from geopipe_baselines import SLOW_REFERENCES, make_policy  # SLOW_REFERENCES: the rollouts and the optimum, not scripted
from geopipe_evaluation.plots import policy_styles
from geopipe_baselines.policy import Policy, play_episode
from geopipe_evaluation.stats import mean_ci

EVALUATIONS_FILE = "evaluations.csv"
REFERENCES_FILE = "reference_returns.csv"
SUMMARY_COLUMNS = ("mean_return", "std_return", "mean_avg_jct_h", "mean_total_cost_usd")  # of one evaluation
REFERENCE_COLUMNS = ("policy", *SUMMARY_COLUMNS)
CURVE_FILE = "learning_curve.png"
CLIP_BELOW_FRACTION = 0.25  # the y axis reaches this fraction of |lowest reference| below it
DPI = 120


def _read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_evaluations(run_dir: Path) -> tuple[list[int], list[float]]:
    """(timesteps, mean returns) of a run's evaluations, in the order they were made."""
    rows = _read_rows(run_dir / EVALUATIONS_FILE)
    return [int(r["timesteps"]) for r in rows], [float(r["mean_return"]) for r in rows]


def read_references(run_dir: Path) -> dict[str, float]:
    """Scripted policy name -> mean return on the run's evaluation seeds (empty if none were recorded)."""
    path = run_dir / REFERENCES_FILE
    return {r["policy"]: float(r["mean_return"]) for r in _read_rows(path)} if path.is_file() else {}


def write_references(run_dir: Path, rows: list[dict[str, float | str]]) -> None:
    """Write the scripted policies' evaluation rows (``REFERENCE_COLUMNS``)."""
    with open(run_dir / REFERENCES_FILE, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=REFERENCE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def evaluate_agent(policy: Policy, env: gym.Env, seeds: Sequence[int]) -> list[tuple[float, dict[str, float]]]:
    """(return, episode metrics) of one episode per seed, acting with ``policy`` (masked, as ``evaluate.py`` does)."""
    results = []
    for seed in seeds:
        episode_return, info = play_episode(env, policy, seed)
        results.append((episode_return, info["episode_metrics"]))
    return results


def summarize_episodes(results: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """Mean and std of the returns, and the mean of two episode metrics, of :func:`evaluate_agent`'s results."""
    returns = [r for r, _ in results]
    return {
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "mean_avg_jct_h": mean_ci(m["avg_jct_h"] for _, m in results).mean,  # NaN values (no job done) skipped
        "mean_total_cost_usd": mean_ci(m["total_cost_usd"] for _, m in results).mean,
    }


def evaluate_run_references(run_dir: Path, names: list[str]) -> None:
    """Play ``names`` on the run's evaluation env and seeds and write them to ``reference_returns.csv``."""
    args = yaml.safe_load((run_dir / "args.yml").read_text())
    env_kwargs = yaml.safe_load((run_dir / "config.yml").read_text()).get("env_kwargs", {})
    seeds = range(args["eval_seed_start"], args["eval_seed_start"] + args["eval_episodes"])
    rows = []
    for name in names:
        policy = make_policy(name)
        env = gym.make(args["env"], **env_kwargs, **policy.env_kwargs)  # some need extra candidate strategies
        rows.append({"policy": name, **summarize_episodes(evaluate_agent(policy, env, seeds))})
    write_references(run_dir, rows)


def plot_learning_curve(run_dir: Path, out: Path | None = None, title: str | None = None) -> Path:
    """Draw the run's learning curve (mean evaluation return; the seeds' spread is left out, since every point
    plays the same seeds) with the reference lines."""
    timesteps, means = read_evaluations(run_dir)
    if not timesteps:
        raise ValueError(f"{run_dir / EVALUATIONS_FILE} has no evaluations yet")
    fig = Figure(figsize=(7.5, 4.5), dpi=DPI)
    ax = fig.add_subplot()
    ax.plot(timesteps, means, marker="o", markersize=3, color="black", label="agent (deterministic, masked)")
    references = read_references(run_dir)
    styles = policy_styles(list(references))  # a colour per reference, none repeated up to 20
    scripted = {n: v for n, v in references.items() if n not in SLOW_REFERENCES}
    best = max(scripted, key=scripted.get) if len(scripted) > 1 else None
    for name, value in references.items():
        label = f"{name}{' (best scripted)' if name == best else ''} ({value:.2f})"
        ax.axhline(value, color=styles[name].color, linestyle=":" if name in SLOW_REFERENCES else "--", linewidth=1.4, label=label)
    if references:
        # Zoom on the scripted policies' level: the first evaluations of a fresh policy can lie far below it.
        low_ref = min(references.values())
        top = max(*means, *references.values())
        bottom = low_ref - max(CLIP_BELOW_FRACTION * abs(low_ref), top - low_ref)
        clipped = [t for t, m in zip(timesteps, means) if m < bottom]
        ax.set_ylim(bottom, top + 0.1 * (top - bottom))
        if clipped:
            ax.text(0.01, 0.02, f"{len(clipped)} early evaluation(s) below the axis (up to {max(clipped):,} steps)",
                    transform=ax.transAxes, fontsize=8, color="gray")
    ax.set_xlabel("training timesteps")
    ax.set_ylabel("mean episode return on the evaluation seeds")
    ax.set_title(title or f"learning curve: {run_dir.name}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = out or run_dir / CURVE_FILE
    fig.savefig(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Redraw a training run's learning curve.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, help=f"output PNG (default <run_dir>/{CURVE_FILE})")
    parser.add_argument("--title")
    parser.add_argument("--references", nargs="+", metavar="POLICY",
                        help="play these policies on the run's evaluation seeds first and draw them as the lines")
    args = parser.parse_args(argv)
    if not (args.run_dir / EVALUATIONS_FILE).is_file():
        parser.error(f"{args.run_dir} has no {EVALUATIONS_FILE}; is it a train.py run folder with evaluations?")
    try:
        if args.references:
            evaluate_run_references(args.run_dir, args.references)
        print(plot_learning_curve(args.run_dir, args.out, args.title))
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
