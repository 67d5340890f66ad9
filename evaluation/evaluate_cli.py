"""Evaluate scheduling policies on GeoPipe: episodes over fixed seeds, a markdown table, CSV/JSON and plots.

Examples::

    geopipe-evaluate                                        # every scripted policy and the shipped agent on GeoPipe-v0
    geopipe-evaluate --env GeoPipe-Paper-v0 my-world.yaml --policies cr-ldf lcf runs/ppo/model.zip --seeds 20

A policy is a scripted policy's name, a saved agent (an SB3 .zip or an RLlib checkpoint folder), ``module:Class`` or
``file.py:Class`` (your own class with the policy protocol), each optionally labelled ``label=POLICY``
(``geopipe_evaluation.specs``); an env argument ending in .yaml/.yml is a scenario file run on GeoPipe-v0. The slow rollout
references (``rollout``, ``rollout-sjf``) run only when named in ``--policies``. Results go to ``results/``,
replacing the files of an earlier evaluation there (a note says so); a folder named with ``--out`` that holds an
earlier evaluation is refused unless ``--force``. Seeds are seed_start .. seed_start + N - 1 (default 1000..1009):
seeds >= 1000 are held out for evaluation. ``python evaluate.py`` in a source checkout runs the same :func:`main`.
The logic lives in ``geopipe_evaluation.specs`` (what to run), ``geopipe_evaluation.episodes`` (running it), ``geopipe_evaluation.summary``
(statistics), ``geopipe_evaluation.report`` and ``geopipe_evaluation.plots`` (output).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from geopipe_baselines import SLOW_REFERENCES, policy_names
from geopipe_evaluation.cli import OneLineErrorParser, command_line, int_at_least
from geopipe_evaluation.episodes import run_episodes
from geopipe_baselines.policy import DEFAULT_SEED_START
from geopipe_evaluation.report import (
    RESULTS_FILES, check_output_folder, fails, improvement_table, markdown_tables, paired_tables, provenance, write_csv,
    write_json,
)
from geopipe_evaluation.specs import (
    DEFAULT_ENV_ID, EvaluationInputError, check_at_once, check_inputs, default_policy_specs, held_out_warning,
    is_scripted, parse_env, source_loaded,
)
from geopipe_evaluation.summary import REFERENCE_POLICY, improvement_across_envs, paired_differences, summarize

PROG = "geopipe-evaluate"
DEFAULT_EPISODES = 10
DEFAULT_OUT = Path("results")  # replaced by each run that names no --out

_POSITIVE_INT = int_at_least(1)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=prog, description=__doc__.splitlines()[0],
        epilog=f"scripted policies: {', '.join(policy_names())}; slow references, run only when named "
        f"(each decision plays the episode out on copies of the env): {', '.join(SLOW_REFERENCES)}",
    )
    parser.add_argument(
        "--env", nargs="+", action="extend", metavar="ENV",
        help=f"env ids or scenario .yaml files, repeatable (default {DEFAULT_ENV_ID})",
    )
    parser.add_argument(
        "--policies", nargs="+", metavar="POLICY",
        help="scripted policy names, saved agents (SB3 .zip, or an RLlib checkpoint folder), or module:Class / "
        "file.py:Class of your own; LABEL=POLICY names one in the tables "
        "(default: every scripted policy and the shipped agent, without the slow rollout references)",
    )
    parser.add_argument(
        "--seeds", "--episodes", dest="episodes", type=_POSITIVE_INT, default=DEFAULT_EPISODES, metavar="N",
        help=f"episodes per policy and env, one per seed (default {DEFAULT_EPISODES})",
    )
    parser.add_argument("--seed-start", type=int, default=DEFAULT_SEED_START, help=f"first seed (default {DEFAULT_SEED_START}, held out)")
    parser.add_argument("--workers", type=_POSITIVE_INT, default=os.cpu_count() or 1, help="processes; 1 runs in-process (default: CPU count)")
    parser.add_argument(
        "--out", type=Path,
        help=f"output folder; one that holds an earlier evaluation is refused unless --force (default {DEFAULT_OUT}/, "
        "whose earlier evaluation each run replaces)",
    )
    parser.add_argument("--force", action="store_true", help=f"replace the {' and '.join(RESULTS_FILES)} and figures of an earlier evaluation in --out")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    parser.add_argument("--cost-weight", type=float, default=None, help="the env's reward cost weight (default: the scenario's)")
    parser.add_argument("--backend", choices=("process", "ray"), default="process", help="process pool, or Ray tasks (the 'ray' extra) (default process)")
    parser.add_argument("--ray-address", metavar="ADDR", help="with --backend ray: join the Ray cluster at ADDR (default: start a local one with --workers CPUs)")
    return parser


def earlier_evaluation(out: Path) -> list[Path]:
    """The files an earlier evaluation wrote in ``out``: its results files and figures (``<env>_<figure>.png``)."""
    from geopipe_evaluation.plots import FIGURES

    if not out.is_dir():
        return []
    figures = [p for name in FIGURES for p in out.glob(f"*_{name}.png")]
    return sorted({*(out / name for name in RESULTS_FILES if (out / name).is_file()), *figures})


def _as_dicts(differences: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, dict]]]:
    """:func:`paired_differences`'s comparisons as plain dicts, for the results file."""
    return {env: {subject: {other: c._asdict() for other, c in others.items()} for subject, others in by_subject.items()}
            for env, by_subject in differences.items()}


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Run the evaluation that ``argv`` asks for; 0 on success (bad input exits 2 with a one-line message)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    envs = [parse_env(e) for e in dict.fromkeys(args.env or [DEFAULT_ENV_ID])]
    if args.policies:
        policy_specs = list(dict.fromkeys(args.policies))
    else:
        policy_specs, notes = default_policy_specs()
        for note in notes:
            print(f"{prog}: note: {note}", file=sys.stderr)
    seeds = list(range(args.seed_start, args.seed_start + args.episodes))
    if args.ray_address is not None and args.backend != "ray":
        parser.error("--ray-address needs --backend ray")
    if args.backend == "ray":  # before anything imports ray: Ray reads its settings at import
        from geopipe_evaluation.ray_backend import MissingExtraError, import_ray

        try:
            import_ray("ray", args.ray_address)
        except MissingExtraError as exc:
            parser.exit(2, f"{parser.prog}: error: {exc}\n")
    replace = args.force or args.out is None
    out = DEFAULT_OUT if args.out is None else args.out
    try:  # what needs neither torch nor the compiled kernels first: bad input is refused at once
        check_at_once(envs, policy_specs, args.cost_weight)
        check_output_folder(out, replace)
    except EvaluationInputError as exc:
        parser.error(str(exc))
    slow = source_loaded(policy_specs)
    if slow:  # checking them loads them: several silent seconds otherwise
        print(f"{prog}: loading {', '.join(slow)} (importing torch: several seconds)", file=sys.stderr, flush=True)
    try:
        names = check_inputs(envs, policy_specs, args.cost_weight)  # every policy on every env, built once
    except EvaluationInputError as exc:
        parser.error(str(exc))
    warning = held_out_warning(seeds)
    if warning:
        print(f"{prog}: warning: {warning}", file=sys.stderr)

    started = time.perf_counter()
    rows = run_episodes(
        envs, policy_specs, seeds, args.cost_weight, args.workers, backend=args.backend, ray_address=args.ray_address
    )
    summary = summarize(rows)
    print(markdown_tables(summary, seeds))
    # Paired return differences: each learned or own policy against every other, else bace-pipe against the rest.
    learned = [name for name, spec in zip(names, policy_specs) if not is_scripted(spec)]
    subjects = learned or [REFERENCE_POLICY]
    differences = paired_differences(rows, subjects)
    print(paired_tables(differences))
    # In envs whose GPUs fail, goodput too (higher is better), as its own family of comparisons.
    failing = [env for env, policies in summary.items() if fails(policies)]
    goodput = paired_differences([r for r in rows if r["env"] in failing], subjects, "goodput") if failing else {}
    if goodput:
        print(paired_tables(goodput, "goodput"))
    # Probabilities of improvement are free of each env's scale of returns, so they can be pooled over envs.
    across_envs = improvement_across_envs(rows, subjects) if len(envs) > 1 else {}
    if any(across_envs.values()):
        print(improvement_table(across_envs, len(envs)))

    earlier = earlier_evaluation(out)
    if earlier:
        keep = "; name another folder with --out to keep both" if args.out is None else ""
        print(f"{prog}: note: replacing the earlier evaluation in {out}/ ({len(earlier)} files){keep}", file=sys.stderr)
        for path in earlier:
            path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "results.csv")
    meta = {
        "command": command_line(prog, argv),
        "seeds": seeds,
        "cost_weight": args.cost_weight,
        "workers": args.workers,
        **provenance(),
        "paired_return_differences": _as_dicts(differences),
        **({"paired_goodput_differences": _as_dicts(goodput)} if goodput else {}),
        "probability_of_improvement_across_envs": {
            subject: {other: est._asdict() for other, est in others.items()} for subject, others in across_envs.items()
        },
    }
    write_json(rows, summary, envs, meta, out / "results.json")
    if not args.no_plots:
        from geopipe_evaluation.plots import plot_env

        for env in envs:
            env_rows = [r for r in rows if r["env"] == env.label]
            plot_env(env_rows, summary[env.label], env.label, env.slug, out)
    print(f"{len(rows)} episodes in {time.perf_counter() - started:.1f} s; results in {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
