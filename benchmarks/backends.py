"""Side by side: decisions/s of the compiled decision backend (what every env uses) and of the Python one (the
specification the tests hold it to, ``tests/reference.py``) on one world and timing, in interleaved rounds, as a
ratio. It runs from a source checkout, where the tests are.

Usage::

    python benchmarks/backends.py [--scenario geopipe-v0] [--timing exact] [--decisions 2000] [--rounds 3]
    python benchmarks/backends.py --background 0.3     # the scenario with background traffic of that mean share

Each run is a fresh process (no cache carries over from one run to the next): ``env_throughput.py``'s measurement
on a new env on that backend, ``--decisions`` decisions of a random valid policy from the first reset on, resets
included, timed end to end; both backends see the same actions. Before the first round each backend runs once
untimed, so that compiled kernels are on disk. It prints each round's rates, then each backend's median and the median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from geopipe_evaluation.cli import int_at_least

BACKENDS = ("compiled", "python")
ROOT = Path(__file__).resolve().parent.parent  # the checkout: its tests hold the Python backend, the specification
# One run: argv = the checkout, backend, scenario, timing, background share, decisions. Prints decisions/s.
RUNNER = """
import sys

root, backend, scenario, timing, background, decisions = sys.argv[1:7]
sys.path[:0] = [root, root + "/tests"]
import geopipe_env.env as env_module
from benchmarks.env_throughput import decisions_per_second
from geopipe_env.scenario.loader import load_scenario

if backend == "python":
    from reference import PythonBackend  # the specification, with the tests (it does not ship)

    env_module.make_backend = lambda strategies, queue_slots: PythonBackend(strategies)
if float(background) > 0:
    share = float(background)
    scenario = load_scenario({"extends": scenario,
                              "network": {"background": {"mean_fraction": share, "amplitude_fraction": share / 2}}})
print(decisions_per_second("GeoPipe-v0", int(decisions), 0, scenario=scenario, timing=timing)[0])
"""


def run(backend: str, args: argparse.Namespace, decisions: int) -> float:
    """Decisions/s of one fresh process on ``backend``."""
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, str(ROOT), backend, args.scenario, args.timing, str(args.background),
         str(decisions)],
        capture_output=True, text=True, check=False,
    )
    if out.returncode:
        sys.exit(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"a run failed ({out.returncode})")
    return float(out.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="geopipe-v0", help="a built-in scenario or a YAML path")
    parser.add_argument("--timing", choices=("analytic", "exact"), default="exact")
    parser.add_argument("--background", type=float, default=0.0, help="mean share of background traffic (0: none)")
    parser.add_argument("--decisions", type=int_at_least(1), default=2000)
    parser.add_argument("--rounds", type=int_at_least(1), default=3)
    args = parser.parse_args(argv)
    if not 0.0 <= args.background < 1.0:
        parser.error(f"--background: got {args.background}; expected a share in [0, 1)")
    for backend in BACKENDS:
        run(backend, args, 50)
    rates: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for r in range(args.rounds):
        order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
        for backend in order:
            rates[backend].append(run(backend, args, args.decisions))
        print(f"round {r}: " + ", ".join(f"{b} {rates[b][-1]:,.0f}" for b in BACKENDS), flush=True)
    ratios = [c / p for c, p in zip(rates["compiled"], rates["python"])]
    print(f"{args.scenario}, timing {args.timing}, background {args.background}: decisions/s (median of "
          f"{args.rounds} rounds)")
    for backend in BACKENDS:
        print(f"  {backend:>8}: {statistics.median(rates[backend]):,.0f}")
    print(f"  compiled ÷ python: {statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
