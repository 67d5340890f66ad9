"""Side by side: an env's decisions/s at several git revisions of this repository, in interleaved rounds, as ratios.

Usage::

    python benchmarks/revisions.py REV[=ENV] [REV[=ENV] ...] [--env GeoPipe-v0] [--rounds 5] [--decisions 3000]

Each revision (a commit, tag or branch; ``WORKTREE`` stands for the files as they are on disk) is exported with
``git archive`` into a temporary folder. ``REV=ENV`` measures env id ``ENV`` at that revision instead of ``--env``:
a world that revisions register under different ids (``06d15ac=GeoPipe-v0 WORKTREE=GeoPipe-Abundant-v0``), or
two worlds at one revision (``WORKTREE=GeoPipe-v0 WORKTREE=GeoPipe-Abundant-v0``). Each round then runs every revision once, in a fresh process whose
``geopipe_env`` is that revision's, in an order that rotates from round to round. A run is
``benchmarks/env_throughput.py``'s measurement (this checkout's, for every revision): a new env, ``--decisions``
decisions of a random valid policy from the first reset on, resets included (episodes restart with the next seed),
timed end to end. Before the first round every
revision runs once untimed, so that compiled kernels are on disk (a revision's first run compiles them).

It prints each round's rates, then per revision the median and its median ratio to the first revision named. The
machine's speed drifts from minute to minute, so a ratio taken within a round says more than a rate. Only the
revisions' own code differs between runs: the interpreter and the installed packages are this one's, so a
revision that needs other package versions cannot be measured here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from geopipe_evaluation.cli import int_at_least

REPO = Path(__file__).resolve().parent.parent
WORKTREE = "WORKTREE"

# Prints one line: decisions per second end to end, and in the env's own time (env_throughput.py's measurement,
# with this checkout's env_throughput.py and the revision's geopipe_env).
RUNNER = """
import sys
from pathlib import Path

import geopipe_env

if not Path(geopipe_env.__file__).resolve().is_relative_to(Path.cwd().resolve()):
    sys.exit(f"geopipe_env was imported from {geopipe_env.__file__}, not from the revision's files in {Path.cwd()}")
sys.path.append(sys.argv[4])
from env_throughput import decisions_per_second

rate, env_rate, _ = decisions_per_second(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
print(rate, env_rate)
"""


def export(rev: str, into: Path) -> Path:
    """The files of ``rev`` (or of the worktree, for ``WORKTREE``) under ``into``; raises ``SystemExit`` with git's
    message if ``rev`` is not a revision."""
    if rev == WORKTREE:
        return REPO
    tree = into / rev.replace("/", "_")
    tree.mkdir()
    archive = tree / "rev.tar"
    done = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive), rev],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"revisions.py: cannot export {rev!r}: {done.stderr.strip()}")
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


def run(tree: Path, env_id: str, decisions: int, seed: int) -> tuple[float, float]:
    """(decisions/s end to end, in the env's own time) of one fresh process importing ``tree``'s geopipe_env."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", RUNNER, env_id, str(decisions), str(seed), str(Path(__file__).resolve().parent)]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"revisions.py: the run in {tree} failed:\n{done.stderr[-3000:]}")
    rate, env_rate = map(float, done.stdout.split()[-2:])
    return rate, env_rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="+", metavar="REV[=ENV]",
                        help=f"git revisions, or {WORKTREE} for the files on disk; =ENV names the env id to run there")
    parser.add_argument("--env", default="GeoPipe-v0")
    parser.add_argument("--rounds", type=int_at_least(1), default=5)
    parser.add_argument("--decisions", type=int_at_least(1), default=3000)
    args = parser.parse_args(argv)
    if len(set(args.revs)) != len(args.revs):
        parser.error("name each revision (with its env) once")
    env_of = {}
    for label in args.revs:
        rev, _, env_id = label.partition("=")
        if not rev or (_ and not env_id):
            parser.error(f"{label!r}: expected REV or REV=ENV")
        env_of[label] = (rev, env_id or args.env)
    with tempfile.TemporaryDirectory(prefix="geopipe-revisions-") as tmp:
        exported = {rev: export(rev, Path(tmp)) for rev in dict.fromkeys(rev for rev, _ in env_of.values())}
        trees = {label: exported[rev] for label, (rev, _) in env_of.items()}
        for label, tree in trees.items():
            print(f"{label}: first run (untimed, compiles what the revision compiles)", flush=True)
            run(tree, env_of[label][1], 300, seed=1)
        rates: dict[str, list[float]] = {rev: [] for rev in args.revs}
        env_rates: dict[str, list[float]] = {rev: [] for rev in args.revs}
        for round_ in range(args.rounds):
            order = args.revs[round_ % len(args.revs):] + args.revs[: round_ % len(args.revs)]
            for rev in order:
                rate, env_rate = run(trees[rev], env_of[rev][1], args.decisions, seed=round_ * 10_000)
                rates[rev].append(rate)
                env_rates[rev].append(env_rate)
            print(f"round {round_}: " + ", ".join(f"{rev} {rates[rev][-1]:,.0f}" for rev in args.revs), flush=True)
    base = args.revs[0]
    print(f"{', '.join(dict.fromkeys(env for _, env in env_of.values()))}, decisions/s (median of {args.rounds} rounds; the env's own time in brackets), and the median "
          f"of each round's ratio to {base}:")
    width = max(12, *map(len, args.revs))
    for rev in args.revs:
        ratios = [a / b for a, b in zip(rates[rev], rates[base])]
        print(f"  {rev:>{width}}: {statistics.median(rates[rev]):8,.0f} ({statistics.median(env_rates[rev]):,.0f})   "
              f"{statistics.median(ratios):5.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
