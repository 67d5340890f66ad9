"""Evaluate scheduling policies on GeoPipe: episodes over fixed seeds, a markdown table, CSV/JSON and plots.

Examples::

    python evaluate.py                                      # every scripted policy (+ agents/pretrained/*.zip) on GeoPipe-v0
    python evaluate.py --env GeoPipe-Paper-v0 my-world.yaml --policies cr-ldf lcf runs/ppo/model.zip --seeds 20

A policy argument ending in .zip (SB3) or naming a folder (an RLlib checkpoint) is a saved agent; an env argument ending in .yaml/.yml is a scenario file run on
GeoPipe-v0. Seeds are seed_start .. seed_start + N - 1 (default 1000..1009): seeds >= 1000 are held out for
evaluation. The logic lives in ``baselines.evaluation`` and ``baselines.plots``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from baselines import policy_names
from baselines.evaluation import (
    DEFAULT_ENV_ID,
    DEFAULT_SEED_START,
    REFERENCE_POLICY,
    EvaluationInputError,
    check_inputs,
    default_policy_specs,
    is_agent_spec,
    markdown_tables,
    paired_differences,
    paired_tables,
    parse_env,
    run_episodes,
    summarize,
    write_csv,
    write_json,
)
from baselines.cli import int_at_least

_POSITIVE_INT = int_at_least(1)

DEFAULT_EPISODES = 10


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=f"scripted policies: {', '.join(policy_names())}"
    )
    parser.add_argument(
        "--env", nargs="+", action="extend", metavar="ENV",
        help=f"env ids or scenario .yaml files, repeatable (default {DEFAULT_ENV_ID})",
    )
    parser.add_argument(
        "--policies", nargs="+", metavar="POLICY",
        help="scripted policy names or saved agents (.zip) (default: every scripted policy and agents/pretrained/*.zip)",
    )
    parser.add_argument(
        "--seeds", "--episodes", dest="episodes", type=_POSITIVE_INT, default=DEFAULT_EPISODES, metavar="N",
        help=f"episodes per policy and env, one per seed (default {DEFAULT_EPISODES})",
    )
    parser.add_argument("--seed-start", type=int, default=DEFAULT_SEED_START, help=f"first seed (default {DEFAULT_SEED_START}, held out)")
    parser.add_argument("--workers", type=_POSITIVE_INT, default=os.cpu_count() or 1, help="processes; 1 runs in-process (default: CPU count)")
    parser.add_argument("--out", type=Path, default=Path("results"), help="output folder (default results/)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    parser.add_argument("--cost-weight", type=float, default=None, help="the env's reward cost weight (default: the scenario's)")
    parser.add_argument("--backend", choices=("process", "ray"), default="process", help="process pool, or Ray tasks (the 'ray' extra) (default process)")
    parser.add_argument("--ray-address", metavar="ADDR", help="with --backend ray: join the Ray cluster at ADDR (default: start a local one with --workers CPUs)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    envs = [parse_env(e) for e in dict.fromkeys(args.env or [DEFAULT_ENV_ID])]
    policy_specs = list(dict.fromkeys(args.policies or default_policy_specs()))
    seeds = list(range(args.seed_start, args.seed_start + args.episodes))
    if args.ray_address is not None and args.backend != "ray":
        parser.error("--ray-address needs --backend ray")
    if args.backend == "ray":  # before anything imports ray: Ray reads its settings at import
        from baselines.ray_backend import MissingExtraError, import_ray

        try:
            import_ray("ray", args.ray_address)
        except MissingExtraError as exc:
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
    try:
        names = check_inputs(envs, policy_specs, args.cost_weight)
    except EvaluationInputError as exc:
        parser.error(str(exc))

    started = time.perf_counter()
    rows = run_episodes(envs, policy_specs, seeds, args.cost_weight, args.workers, backend=args.backend, ray_address=args.ray_address)
    summary = summarize(rows)
    print(markdown_tables(summary, seeds))
    # Paired return differences: each saved agent against every other policy, else bace-pipe against the rest.
    agent_names = [name for name, spec in zip(names, policy_specs) if is_agent_spec(spec)]
    differences = paired_differences(rows, agent_names or [REFERENCE_POLICY])
    print(paired_tables(differences))

    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, args.out / "results.csv")
    meta = {
        "command": shlex.join(["python", "evaluate.py", *argv]),
        "seeds": seeds,
        "cost_weight": args.cost_weight,
        "workers": args.workers,
        "paired_return_differences": {
            env: {subject: {other: est._asdict() for other, est in others.items()} for subject, others in subjects.items()}
            for env, subjects in differences.items()
        },
    }
    write_json(rows, summary, envs, meta, args.out / "results.json")
    if not args.no_plots:
        from baselines.plots import plot_env

        for env in envs:
            env_rows = [r for r in rows if r["env"] == env.label]
            plot_env(env_rows, summary[env.label], env.label, env.slug, args.out)
    print(f"{len(rows)} episodes in {time.perf_counter() - started:.1f} s; results in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
