"""Reporting an evaluation: markdown tables, the CSV and JSON files, what produced them, and where they go.

Each run writes ``results.csv`` and ``results.json`` (and the figures of :mod:`geopipe_evaluation.plots`) into its output
folder; :func:`check_output_folder` checks the folder before any episode runs.
"""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import json
import math
import subprocess
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import geopipe_env
from geopipe_evaluation.specs import EnvSpec, EvaluationInputError
from geopipe_evaluation.stats import CONFIDENCE, Interval
from geopipe_evaluation.summary import ID_COLUMNS, REFERENCE_POLICY, RETURN_KEY, Comparison, metric_keys, pareto_front

RESULTS_FILES = ("results.csv", "results.json")  # an --out folder holding either has an earlier evaluation in it
# Distributions whose versions a results file records, by import name (recorded only when importable).
RECORDED_PACKAGES = {"gymnasium": "gymnasium", "numpy": "numpy", "torch": "torch", "stable_baselines3": "stable-baselines3", "sb3_contrib": "sb3-contrib"}
GIT_TIMEOUT_S = 10.0
# The markdown tables of each env, a few columns each so that a line stays within about 120 characters: (metric
# key, header) per column. The last table also has the return's IQM.
# The first table leads with what the benchmark optimises: time in system (every arrived job, to its finish or the
# horizon) and jobs done, then cost. JCT counts finished jobs only, so a policy that finishes few looks fast by it.
TABLE_GROUPS = (
    (("avg_time_in_system_h", "time in system (h)"), ("jobs_completed", "jobs done"), ("total_cost_usd", "cost ($)")),
    (("avg_jct_h", "avg JCT, finished (h)"), ("p95_jct_h", "p95 JCT, finished (h)"), ("energy_kwh", "energy (kWh)")),
    (("carbon_kg", "carbon (kg)"), ("gpu_utilization", "GPU util."), ("stalled_job_fraction", "stalled frac.")),
    (("avg_comm_slowdown", "comm slowdown"), ("max_link_utilization", "peak link util.")),
    ((RETURN_KEY, "return"),),
)
# Shown before the return for an env whose GPUs fail (some policy's jobs were interrupted).
FAILURE_GROUP = (
    ("goodput", "goodput"), ("gpu_hours_lost_to_failures", "GPU-h lost to failures"),
    ("interruptions_per_job", "interruptions per job"),
)
NOTE_WIDTH = 120  # the notes under the tables are wrapped to this many characters


def check_output_folder(out: Path, force: bool = False) -> None:
    """Make sure the results can be written to ``out`` before any episode runs, without creating anything.

    Raises:
        EvaluationInputError: ``out`` is a file, lies below a file, cannot be written, or already holds the
            results of an earlier evaluation (unless ``force``).
    """
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise EvaluationInputError(f"--out {out}: {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):  # a real write, also where os.access says yes (as root)
            pass
    except OSError as exc:
        raise EvaluationInputError(f"--out {out}: cannot write in {existing} ({exc.strerror or exc})") from exc
    earlier = [name for name in RESULTS_FILES if (out / name).exists()]
    if earlier and not force:
        raise EvaluationInputError(
            f"--out {out} holds an earlier evaluation ({', '.join(earlier)}); pass --force to overwrite it, or choose another folder"
        )


def provenance() -> dict[str, Any]:
    """What produced a results file: the versions of geopipe and the packages it ran on (those importable here),
    and the git commit of the geopipe source (None outside a git checkout) with whether it had local changes."""
    versions: dict[str, str | None] = {"geopipe": geopipe_env.__version__}
    for module, distribution in RECORDED_PACKAGES.items():
        if importlib.util.find_spec(module) is not None:
            try:
                versions[distribution] = importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                versions[distribution] = None
    commit, dirty = _git_state(Path(geopipe_env.__file__).resolve().parent)
    return {"versions": versions, "git_commit": commit, "git_dirty": dirty}


def _git_state(package_dir: Path) -> tuple[str | None, bool | None]:
    """(commit, has local changes) of the checkout that tracks ``package_dir``; (None, None) if there is none
    (an installed copy, no git, or a git repository that merely contains site-packages)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(package_dir), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    if git("ls-files", "--error-unmatch", "__init__.py") is None:
        return None, None
    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return (commit.strip() if commit else None), (bool(status.strip()) if status is not None else None)


def _number(x: float) -> str:
    if not math.isfinite(x):
        return "nan"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


# A CI half-width below this share of the mean's size is rounding in the sum of equal values: printed as 0.
NOISE_FRACTION = 1e-9
# A change vs the reference beyond ±this percentage means a reference near zero: the percentage is left out.
MAX_SHOWN_CHANGE_PCT = 1000.0


def _cell(entry: dict[str, float]) -> str:
    """``mean ± ci95 (+x%)``: the half-width 0 where it is floating-point noise, and no percentage against a
    reference near zero."""
    text = _number(entry["mean"])
    if entry["n"] > 1:
        ci = entry["ci95"]
        if math.isfinite(ci) and abs(ci) <= NOISE_FRACTION * abs(entry["mean"]):
            ci = 0.0
        text += f" ± {_number(ci)}"
    change = entry.get("change_vs_reference_pct", math.nan)
    if math.isfinite(change) and abs(change) < MAX_SHOWN_CHANGE_PCT:
        text += f" ({change:+.1f}%)"
    return text


def _bracket(low: float, high: float, fmt: str = "+.3f") -> str:
    """``[low, high]``, or "" when the interval is undefined (one seed)."""
    return f"[{low:{fmt}}, {high:{fmt}}]" if math.isfinite(low) and math.isfinite(high) else ""


def fails(policies: dict[str, dict[str, Any]]) -> bool:
    """Whether an env's GPUs failed in the evaluation: some policy's jobs were interrupted (``policies`` is one env's
    part of :func:`~geopipe_evaluation.summary.summarize`)."""
    return any(stats.get("interruptions_per_job", {}).get("mean", 0.0) > 0.0 for stats in policies.values())


def markdown_tables(summary: dict[str, Any], seeds: Sequence[int], reference: str = REFERENCE_POLICY) -> str:
    """Markdown tables per env (``TABLE_GROUPS``): mean ± 95% CI per metric, with the % change vs ``reference`` in
    brackets; the last table ends with the return's IQM and its bootstrap interval."""
    blocks = []
    for env, policies in summary.items():
        seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]}"
        change = (f"; (±x%): change of the mean vs {reference}, same seeds (left out beyond ±1000%: a reference near "
                  "zero)") if reference in policies else ""
        lines = [f"### {env}: {len(seeds)} episode(s), {seed_text}", "", f"Mean ± {CONFIDENCE:.0%} CI (t){change}."]
        groups = (*TABLE_GROUPS[:-1], FAILURE_GROUP, TABLE_GROUPS[-1]) if fails(policies) else TABLE_GROUPS
        for i, group in enumerate(groups):
            last = i == len(groups) - 1
            headers = [header for _, header in group] + (["return IQM"] if last else [])
            lines += ["", "| policy | " + " | ".join(headers) + " |", "|---" * (len(headers) + 1) + "|"]
            for policy, stats in policies.items():
                cells = [_cell(stats[key]) for key, _ in group]
                if last:
                    ret = stats[RETURN_KEY]
                    cells.append(f"{_number(ret['iqm'])} {_bracket(ret['iqm_ci_low'], ret['iqm_ci_high'], '.4g')}".rstrip())
                lines.append(f"| {policy} | " + " | ".join(cells) + " |")
        lines += ["", f"return IQM: the interquartile mean over seeds, with its {CONFIDENCE:.0%} bootstrap CI."]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def paired_tables(
    differences: dict[str, dict[str, dict[str, Comparison]]], metric: str = RETURN_KEY, confidence: float = CONFIDENCE
) -> str:
    """Markdown tables of :func:`paired_differences`: one per (env, subject), a row per other policy, and a note on
    how the verdicts were reached."""
    blocks = []
    family = sum(len(others) for subjects in differences.values() for others in subjects.values())
    for env, subjects in differences.items():
        for subject, others in subjects.items():
            lines = [
                f"#### {env}: paired {metric} difference, {subject} − policy, same seeds",
                "",
                f"| policy | mean ± {confidence:.0%} CI (t) | {confidence:.0%} CI | P({subject} > policy) | p (Holm) | verdict |",
                "|---|---|---|---|---|---|",
            ]
            for other, c in others.items():
                spread = f" ± {_number(c.ci95)}" if c.n > 1 else ""
                ci = _bracket(c.mean - c.ci95, c.mean + c.ci95) or "—"
                improvement = f"{c.prob_improvement:.2f} {_bracket(c.prob_improvement_low, c.prob_improvement_high, '.2f')}".rstrip()
                p_holm = f"{c.p_holm:.3g}" if math.isfinite(c.p_holm) else "—"
                lines.append(f"| {other} | {c.mean:+.3f}{spread} | {ci} | {improvement} | {p_holm} | {c.verdict} (n={c.n}) |")
            blocks.append("\n".join(lines))
    if not blocks:
        return ""
    blocks.append(textwrap.fill(
        f"Verdict: better / worse when the paired t-test's p-value, Holm-adjusted over all {family} comparisons above, is at "
        f"most {1 - confidence:.2g} (family-wise error {1 - confidence:.0%}); the CIs are per comparison, unadjusted. "
        f"P(a > policy): the chance that a's {metric} on one seed beats the policy's on another (0.5: neither tends "
        f"higher), with a {confidence:.0%} bootstrap CI over seeds.",
        NOTE_WIDTH,
    ))
    return "\n\n".join(blocks) + "\n"


def improvement_table(improvement: dict[str, dict[str, Interval]], num_envs: int, metric: str = RETURN_KEY) -> str:
    """A markdown table of :func:`improvement_across_envs`: one row per (subject, other policy)."""
    lines = [
        f"#### all {num_envs} envs: P(subject > policy) in {metric}, averaged over envs; {CONFIDENCE:.0%} bootstrap CI stratified by env",
        "",
        "| subject | policy | P(subject > policy) | CI |",
        "|---|---|---|---|",
    ]
    for subject, others in improvement.items():
        for other, est in others.items():
            lines.append(f"| {subject} | {other} | {est.estimate:.2f} | {_bracket(est.low, est.high, '.2f') or '—'} |")
    return "\n".join(lines) + "\n"


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """One line per episode: env, policy, seed, return and every episode metric."""
    columns = [*ID_COLUMNS, *metric_keys(rows)]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_json(rows: Sequence[dict[str, Any]], summary: dict[str, Any], envs: Sequence[EnvSpec], meta: dict[str, Any], path: Path) -> None:
    """The summary per env and policy, the Pareto front (average time in system vs cost), the episodes (without timelines) and
    ``meta`` (command line, seeds, ...). NaN is written as null."""
    by_label = {e.label: e for e in envs}
    out_envs = {}
    for env, policies in summary.items():
        names = list(policies)
        front = pareto_front([(policies[p]["avg_time_in_system_h"]["mean"], policies[p]["total_cost_usd"]["mean"])
                              for p in names])
        out_envs[env] = {
            "env_id": by_label[env].env_id,
            "scenario": by_label[env].scenario,
            "policies": policies,
            "pareto_front_time_cost": [names[i] for i in front],
        }
    episodes = [{k: v for k, v in r.items() if k != "timeline"} for r in rows]
    document = {**meta, "reference_policy": REFERENCE_POLICY, "envs": out_envs, "episodes": episodes}
    with open(path, "w") as f:
        json.dump(json_safe(document), f, indent=1, allow_nan=False)


def json_safe(value: Any) -> Any:
    """``value`` (nested dicts, lists and tuples) with every NaN or infinite float replaced by None, so that
    ``json.dump(..., allow_nan=False)`` writes standard JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
