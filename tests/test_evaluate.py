"""evaluate.py and the evaluation harness (geopipe_evaluation.specs, episodes, summary, report): the episode runner, its
statistics and its outputs."""

import csv
import json
import math
import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from conftest import load_script

import geopipe_env
from geopipe_agents import pretrained_path
from geopipe_baselines import policy_names
from geopipe_evaluation import episodes, evaluate_cli, plots
from geopipe_evaluation.report import _git_state, paired_tables
from geopipe_evaluation.summary import change_vs_reference_pct, improvement_across_envs, paired_differences, pareto_front
from geopipe_evaluation.specs import parse_env
from geopipe_evaluation.episodes import run_episodes, worker_pool
from geopipe_evaluation.stats import holm, mean_ci, t_critical, t_test_p_value

evaluate = load_script("evaluate")

TOY = "GeoPipe-Toy-v0"
POLICIES = ["cr-ldf", "lcf", *(["bace-pipe"] if "bace-pipe" in policy_names() else [])]
PLOTS = ("paired_differences", "jct_cdf", "time_vs_cost", "gpu_timeline")


def test_main_writes_table_csv_json_and_plots(tmp_path, capsys):
    """A toy run writes one CSV row per episode, JSON means equal to the CSV means, and every plot."""
    assert evaluate.main(["--env", TOY, "--policies", *POLICIES, "--seeds", "2", "--workers", "1", "--out", str(tmp_path)]) == 0

    table = capsys.readouterr().out
    for policy in POLICIES:
        assert f"| {policy} |" in table
    if "bace-pipe" in POLICIES:
        assert "%)" in table  # the other policies carry their change vs bace-pipe
    for name in PLOTS:
        assert (tmp_path / f"geopipe-toy-v0_{name}.png").stat().st_size > 0

    with open(tmp_path / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["policy"], int(r["seed"])) for r in rows] == [(p, s) for p in POLICIES for s in (1000, 1001)]
    assert {r["env"] for r in rows} == {TOY}

    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["seeds"] == [1000, 1001] and "--policies" in doc["command"]
    assert len(doc["episodes"]) == len(rows)
    summary = doc["envs"][TOY]["policies"]
    for policy in POLICIES:
        mine = [r for r in rows if r["policy"] == policy]
        for metric in ("return", "avg_jct_h", "p95_jct_h", "total_cost_usd", "energy_kwh", "carbon_kg", "gpu_utilization", "stalled_job_fraction"):
            entry = summary[policy][metric]
            assert entry["mean"] == pytest.approx(np.mean([float(r[metric]) for r in mine]), rel=1e-12, abs=1e-12)
            assert entry["n"] == 2
    assert set(doc["envs"][TOY]["pareto_front_time_cost"]) <= set(POLICIES)
    for policy in POLICIES:
        ret = summary[policy]["return"]
        assert ret["iqm_ci_low"] <= ret["iqm"] <= ret["iqm_ci_high"]
    if "bace-pipe" in POLICIES:  # no agent evaluated: bace-pipe is compared, seed by seed, with the others
        paired = doc["paired_return_differences"][TOY]["bace-pipe"]
        assert set(paired) == set(POLICIES) - {"bace-pipe"} and "paired return difference, bace-pipe − policy" in table
        assert all(c["verdict"] in ("better", "worse", "not significant") and 0 <= c["prob_improvement"] <= 1 for c in paired.values())
        assert "Holm-adjusted over all 2 comparisons" in table
    assert doc["probability_of_improvement_across_envs"] == {}  # one env: nothing to pool


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "no-such-policy"], "cr-ldf"),
        (["--policies", "missing-agent.zip"], "missing-agent.zip"),
        (["--env", "NoSuchEnv-v0"], "NoSuchEnv"),
        (["--env", "missing-scenario.yaml"], "missing-scenario.yaml"),
    ],
)
def test_bad_input_exits_2_with_a_message(args, message, tmp_path, capsys):
    """An unknown policy, agent file, env id or scenario file ends with exit code 2 and a message naming it."""
    defaults = {"--env": [TOY], "--policies": ["lcf"]}
    defaults.update({args[0]: args[1:]})
    argv = [x for flag, values in defaults.items() for x in (flag, *values)]
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([*argv, "--seeds", "1", "--workers", "1", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "results.csv").exists()


def _summary(policies: list[str]) -> dict:
    """A summary of wide values: six-digit means and CIs, three-digit % changes, the shipped agent's long name."""
    entry = {"mean": -123_456.7, "ci95": 234_567.8, "n": 10, "change_vs_reference_pct": -999.9}
    ret = {**entry, "iqm": -123_456.7, "iqm_ci_low": -234_567.8, "iqm_ci_high": -12_345.6}
    from geopipe_evaluation.report import TABLE_GROUPS

    return {"GeoPipe-v0": {p: {key: dict(entry) for group in TABLE_GROUPS for key, _ in group} | {"return": ret} for p in policies}}


def test_the_printed_tables_fit_120_characters():
    """Every line of the tables geopipe-evaluate prints stays within 120 characters, also with 12 policies, six-digit
    values and the shipped agent's name; every metric and every policy is in them."""
    from geopipe_evaluation.report import TABLE_GROUPS, markdown_tables

    policies = [*policy_names(include_aliases=False), "geopipe_v0_maskable_ppo"]
    text = markdown_tables(_summary(policies), list(range(1000, 1010)))
    assert max(len(line) for line in text.splitlines()) <= 120
    headers = [line for line in text.splitlines() if line.startswith("| policy |")]
    assert len(headers) == len(TABLE_GROUPS)
    assert all(f"| {header} |" in text or f"| {header} " in text for group in TABLE_GROUPS for _, header in group)
    for policy in policies:
        assert sum(line.startswith(f"| {policy} |") for line in text.splitlines()) == len(TABLE_GROUPS)
    assert "return IQM" in headers[-1]
    # The first table leads with what the benchmark optimises; JCT, which counts finished jobs only, says so.
    assert headers[0] == "| policy | time in system (h) | jobs done | cost ($) |"
    assert "| avg JCT, finished (h) |" in headers[1]
    from geopipe_evaluation.summary import Comparison

    comparison = Comparison(-20.511, 6.64, 10, 0.01, 0.0195, "not significant", 0.82, 0.73, 0.98)
    paired = paired_tables({"GeoPipe-v0": {policies[-1]: {p: comparison for p in policies[:-1]}}})
    assert max(len(line) for line in paired.splitlines()) <= 120


def test_process_pool_matches_in_process():
    """Episodes run in a spawn process pool give the same rows as in-process (the worker pickles)."""
    envs, seeds = [parse_env(TOY)], [1000, 1001]
    serial = run_episodes(envs, ["fcfs-random"], seeds, None, workers=1, progress=False)
    pooled = run_episodes(envs, ["fcfs-random"], seeds, None, workers=2, progress=False)
    assert pooled == serial
    assert serial[0]["timeline"] is not None and serial[1]["timeline"] is None  # only the first seed's


def test_t_critical_matches_the_t_table():
    """The two-sided 95% t critical values match the textbook table."""
    for df, expected in ((1, 12.7062), (2, 4.3027), (9, 2.2622), (30, 2.0423), (120, 1.9799)):
        assert t_critical(0.95, df) == pytest.approx(expected, abs=5e-5)


def test_mean_ci_is_nan_for_one_value_and_skips_nan():
    """One finite value has no CI; NaNs are left out; identical values have a CI of exactly 0."""
    assert math.isnan(mean_ci([3.0, math.nan]).ci95) and mean_ci([3.0, math.nan]).n == 1
    assert mean_ci([2.0, 2.0, 2.0]).ci95 == 0.0
    est = mean_ci([1.0, 2.0, 3.0])
    assert est.mean == 2.0 and est.ci95 == pytest.approx(t_critical(0.95, 2) * 1.0 / math.sqrt(3))


def test_change_vs_reference_pairs_seeds():
    """The % change compares means over the seeds both policies ran, relative to |reference mean|."""
    rows = [
        {"policy": "a", "seed": 1, "x": 2.0},
        {"policy": "a", "seed": 2, "x": 4.0},
        {"policy": "ref", "seed": 1, "x": -1.0},
        {"policy": "ref", "seed": 2, "x": -3.0},
        {"policy": "ref", "seed": 3, "x": 100.0},  # unpaired: ignored
    ]
    assert change_vs_reference_pct(rows, "a", "ref", "x") == pytest.approx(100.0 * (3.0 - -2.0) / 2.0)


def test_paired_differences_pair_by_seed():
    """subject − other per shared seed; the CI is the t interval of those differences, not of either policy."""
    rows = [{"env": "e", "policy": p, "seed": s, "return": v} for p, s, v in [
        ("agent", 1, -10.0), ("agent", 2, -20.0), ("agent", 3, -31.0),
        ("ref", 1, -11.0), ("ref", 2, -21.0), ("ref", 3, -33.0), ("ref", 4, 50.0),  # seed 4 unpaired
    ]]
    est = paired_differences(rows, ["agent"])["e"]["agent"]["ref"]
    diffs = [1.0, 1.0, 2.0]
    assert est.n == 3 and est.mean == pytest.approx(np.mean(diffs))
    assert est.ci95 == pytest.approx(t_critical(0.95, 2) * np.std(diffs, ddof=1) / np.sqrt(3))
    assert est.mean - est.ci95 < 0  # wide with 3 seeds although every difference is positive
    assert est.p_value == pytest.approx(t_test_p_value(diffs)) and est.verdict == "not significant"
    # Seeds 1-3: the agent beats ref on its own seed, and on another seed in 6 of the 9 (seed, seed) pairs.
    assert est.prob_improvement == pytest.approx(6 / 9)
    table = paired_tables(paired_differences(rows, ["agent"]))
    assert "| ref | +1.333" in table and "not significant (n=3)" in table
    assert paired_differences(rows, ["absent"]) == {"e": {}}


def test_verdicts_hold_the_family_wise_error_with_holm():
    """Three comparisons each significant alone (p ≈ 0.04) are not significant together; a strong one stays."""
    base = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    weak = np.array([1.0, 0.2, 1.5, 0.4, 1.2, -0.1])  # the subject's lead per seed: p ≈ 0.04 on its own
    rows = [{"env": "e", "policy": "s", "seed": i, "return": v} for i, v in enumerate(base)]
    for name, shift in (("a", weak), ("b", weak + 0.05), ("c", weak - 0.03), ("far", 10.0 + weak * 0.1)):
        rows += [{"env": "e", "policy": name, "seed": i, "return": v} for i, v in enumerate(base - shift)]
    found = paired_differences(rows, ["s"])["e"]["s"]
    assert all(found[k].p_value < 0.05 for k in "abc")
    assert [found[k].p_holm for k in (*"abc", "far")] == pytest.approx(holm([found[k].p_value for k in (*"abc", "far")]))
    assert [found[k].verdict for k in "abc"] == ["not significant"] * 3 and found["far"].verdict == "better"
    one_seed = [r for r in rows if r["seed"] == 0]
    assert paired_differences(one_seed, ["s"])["e"]["s"]["a"].verdict == "n/a"


def test_improvement_across_envs_averages_envs_of_any_scale():
    """P(subject > other) pooled over envs is the mean of the per-env probabilities, whatever each env's scale."""
    rows = []
    for env, scale, subject_wins in (("small", 1.0, True), ("large", 1000.0, False)):
        for seed in range(4):
            rows.append({"env": env, "policy": "s", "seed": seed, "return": scale * (seed + (0.5 if subject_wins else -10))})
            rows.append({"env": env, "policy": "o", "seed": seed, "return": scale * seed})
    est = improvement_across_envs(rows, ["s"])["s"]["o"]
    per_env = [paired_differences([r for r in rows if r["env"] == env], ["s"])[env]["s"]["o"].prob_improvement for env in ("small", "large")]
    assert est.estimate == pytest.approx(np.mean(per_env)) and est.n == 4
    assert est.low <= est.estimate <= est.high


def test_pareto_front_keeps_only_undominated_points():
    """A point is on the front unless another is no worse in both coordinates and better in one."""
    points = [(1.0, 5.0), (2.0, 2.0), (3.0, 3.0), (4.0, 1.0), (1.0, 6.0), (math.nan, 0.0)]
    assert pareto_front(points) == [0, 1, 3]


TINY = ["--env", TOY, "--policies", "lcf", "--seeds", "1", "--workers", "1", "--no-plots"]


def _no_episodes(*args, **kwargs):
    raise AssertionError("an episode ran")


@pytest.mark.parametrize("where", ["file", "below-file"])
def test_out_that_cannot_hold_results_exits_2_before_any_episode(where, tmp_path, capsys, monkeypatch):
    """An --out that is a file, or lies below one, stops the run with one line and exit code 2 before any episode."""
    monkeypatch.setattr(evaluate_cli, "run_episodes", _no_episodes)
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    out = blocker if where == "file" else blocker / "sub" / "dir"
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([*TINY, "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and f"--out {out}" in err and "is a file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


def test_the_default_folder_is_replaced_by_each_run(tmp_path, capsys, monkeypatch):
    """Without --out the command runs again: each run replaces the earlier evaluation's results and figures in
    results/ (one note on stderr) and leaves other files there alone."""
    monkeypatch.chdir(tmp_path)
    assert evaluate.main([arg for arg in TINY if arg != "--no-plots"]) == 0
    out = tmp_path / "results"
    assert len(list(out.glob("*.png"))) == len(plots.FIGURES)
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert evaluate.main([*TINY, "--seed-start", "1001"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "replacing" in line]
    assert len(notes) == 1 and "results/" in notes[0] and "--out" in notes[0]
    assert json.loads((out / "results.json").read_text())["seeds"] == [1001]
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "results.csv", "results.json"]  # no figure of the first run


def test_arguments_and_scenarios_are_checked_before_the_output_folder(tmp_path, capsys, monkeypatch):
    """A bad scenario is reported, not the --out that is a file, and no episode runs."""
    monkeypatch.setattr(evaluate_cli, "run_episodes", _no_episodes)
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        evaluate.main([*TINY, "--env", "missing-scenario.yaml", "--out", str(blocker)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "missing-scenario.yaml" in err and "--out" not in err


def test_an_earlier_evaluation_is_kept_unless_forced(tmp_path, capsys, monkeypatch):
    """A folder holding results.csv/results.json is refused (exit 2, one line, files untouched); --force overwrites."""
    out = tmp_path / "res"
    assert evaluate.main([*TINY, "--out", str(out)]) == 0
    before = (out / "results.json").read_text()
    capsys.readouterr()
    with monkeypatch.context() as patch:
        patch.setattr(evaluate_cli, "run_episodes", _no_episodes)
        with pytest.raises(SystemExit) as exit_info:
            evaluate.main([*TINY, "--seed-start", "1001", "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "--force" in err
    assert (out / "results.json").read_text() == before
    assert evaluate.main([*TINY, "--seed-start", "1001", "--out", str(out), "--force"]) == 0
    assert json.loads((out / "results.json").read_text())["seeds"] == [1001]


def test_seeds_below_1000_give_one_warning_line(tmp_path, capsys):
    """Seeds from the training range are allowed with one warning line on stderr; held-out seeds give none."""
    assert evaluate.main([*TINY, "--seeds", "2", "--seed-start", "999", "--out", str(tmp_path / "low")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "999..999" in warnings[0] and "below 1000" in warnings[0]
    assert evaluate.main([*TINY, "--out", str(tmp_path / "held-out")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_results_record_package_versions_and_the_git_commit(tmp_path):
    """results.json names the geopipe, gymnasium, numpy, torch and SB3 versions and the source's git commit."""
    assert evaluate.main([*TINY, "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    versions = doc["versions"]
    assert versions["geopipe"] == geopipe_env.__version__
    assert versions["gymnasium"] == gym.__version__ and versions["numpy"] == np.__version__
    assert versions["torch"].startswith(__import__("torch").__version__.split("+")[0])
    assert {"stable-baselines3", "sb3-contrib"} <= set(versions)
    head = subprocess.run(["git", "-C", os.path.dirname(geopipe_env.__file__), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert doc["git_commit"] == head.stdout.strip() and isinstance(doc["git_dirty"], bool)
    else:
        assert doc["git_commit"] is None
    assert doc["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", doc["git_commit"])


def test_git_state_is_null_outside_a_checkout(tmp_path):
    """A folder no git checkout tracks (an installed copy) records no commit."""
    assert _git_state(tmp_path) == (None, None)


def _torch_threads_in_worker() -> tuple[str | None, int]:
    import torch

    return os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()


def test_pool_workers_run_torch_on_one_thread():
    """Evaluation worker processes start with OMP_NUM_THREADS=1, so torch runs one thread in each."""
    with worker_pool(1) as pool:
        assert pool.submit(_torch_threads_in_worker).result() == ("1", 1)


def _preloaded_in_worker(spec: str) -> tuple[bool, bool]:
    import sys

    return "torch" in sys.modules, spec in episodes._PRELOADED


def test_pool_workers_load_the_agent_when_they_start():
    """A worker of a pool told to preload a saved agent has imported torch and built the agent before its first
    task, so the progress bar does not stall where the agent's episodes begin."""
    pytest.importorskip("torch")
    spec = str(pretrained_path())
    with worker_pool(1, preload=[spec]) as pool:
        assert pool.submit(_preloaded_in_worker, spec).result() == (True, True)
    with worker_pool(1) as pool:
        assert pool.submit(_preloaded_in_worker, spec).result() == (False, False)


def test_a_saved_agent_is_announced_before_it_loads(tmp_path, capsys):
    """While a saved agent loads (torch's import: seconds with no output otherwise) one line says so: in the driver
    before the inputs are checked, and before the progress bar of a pool whose workers load it."""
    pytest.importorskip("torch")
    agent = str(pretrained_path())
    name = pretrained_path().name
    rows = run_episodes([parse_env(TOY)], ["lcf", agent], [1000], None, workers=2, progress=True)
    assert [r["policy"] for r in rows] == ["lcf", pretrained_path().stem]
    err = capsys.readouterr().err
    assert err.startswith(f"episodes: each of the 2 workers loads {name} before its first episode")
    run_episodes([parse_env(TOY)], ["lcf"], [1000], None, workers=2, progress=True)
    assert "loads" not in capsys.readouterr().err  # scripted policies load at once
    assert evaluate_cli.main(["--env", TOY, "--policies", "lcf", agent, "--seeds", "1", "--workers", "1", "--no-plots",
                              "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"geopipe-evaluate: loading {name}")


def test_in_process_agent_episodes_run_torch_on_one_thread(monkeypatch):
    """With --workers 1 a saved agent's episodes run on one torch thread, and the caller's count is restored."""
    torch = pytest.importorskip("torch")
    seen = []
    real = episodes.run_episode

    def spy(*args):
        seen.append(torch.get_num_threads())
        return real(*args)

    monkeypatch.setattr(episodes, "run_episode", spy)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_episodes([parse_env(TOY)], [str(pretrained_path())], [1000], None, workers=1, progress=False)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


OWN_POLICY = '''
import numpy as np


class FirstValid:
    """The first valid launch, else wait."""

    name = "first-valid"
    env_kwargs = {}

    def reset(self, env):
        self.wait = env.unwrapped.wait_action

    def act(self, obs, info):
        valid = np.flatnonzero(info["action_mask"][: self.wait])
        return int(valid[0]) if valid.size else self.wait


class NoAct:
    name = "broken"
    env_kwargs = {}

    def reset(self, env):
        pass
'''


def test_own_policies_by_file_module_and_label(tmp_path, monkeypatch, capsys):
    """``file.py:Class`` and ``module:Class`` evaluate a class of one's own, ``label=`` renames a policy, and the own
    policy is the subject of the paired comparisons."""
    (tmp_path / "own_policies.py").write_text(OWN_POLICY)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    argv = ["--env", TOY, "--policies", "lcf", f"{tmp_path / 'own_policies.py'}:FirstValid", "mine=own_policies:FirstValid",
            "--seeds", "2", "--workers", "1", "--no-plots", "--out", str(out)]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out
    rows = (out / "results.csv").read_text().splitlines()[1:]
    assert sorted({row.split(",")[1] for row in rows}) == ["first-valid", "lcf", "mine"]
    assert "paired return difference, first-valid − policy" in printed and "mine − policy" in printed
    # The same policy under two names plays the same episodes.
    by_policy = {}
    for row in rows:
        env, policy, seed, ret = row.split(",")[:4]
        by_policy.setdefault(policy, []).append(ret)
    assert by_policy["mine"] == by_policy["first-valid"]


def test_a_class_with_act_alone_runs_from_the_current_folder(tmp_path, monkeypatch, capsys):
    """``module:Class`` finds a module in the folder the command runs from, and a class with ``act(obs, info)`` alone
    is a policy: named by its class, with no env arguments and nothing to do at a reset."""
    (tmp_path / "only_act.py").write_text(
        "import numpy as np\n\n\nclass FirstValid:\n    def act(self, obs, info):\n"
        "        return int(np.flatnonzero(info['action_mask'])[0])\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    out = tmp_path / "out"
    argv = ["--env", "GeoPipe-Small-v0", "--policies", "lcf", "only_act:FirstValid", "--seeds", "2", "--workers", "1",
            "--no-plots", "--out", str(out)]
    assert evaluate.main(argv) == 0
    rows = (out / "results.csv").read_text().splitlines()[1:]
    assert sorted({row.split(",")[1] for row in rows}) == ["FirstValid", "lcf"]
    returns = {row.split(",")[3] for row in rows if row.split(",")[1] == "FirstValid"}
    assert len(returns) == 2, "GeoPipe-Small-v0's two seeds played one episode"


@pytest.mark.parametrize("spec, message", [
    ("own_policies:NoAct", "does not follow the policy protocol: it has no act"),
    ("own_policies:Missing", "has no Missing"),
    ("no_such_module_here:X", "cannot import no_such_module_here"),
    ("nowhere/own.py:X", "no file nowhere/own.py"),
])
def test_bad_own_policies_are_one_line_errors(tmp_path, monkeypatch, capsys, spec, message):
    (tmp_path / "own_policies.py").write_text(OWN_POLICY)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        evaluate.main(["--env", TOY, "--policies", spec, "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err and err.count("\n") == 1, err


def test_a_package_seen_twice_registers_its_policies_once(tmp_path, monkeypatch):
    """An editable install leaves ``<dist>.egg-info`` in the source folder; run from there, the package's entry
    points are listed twice. The default policies still hold the shipped agent once."""
    import importlib.metadata

    from geopipe_evaluation import specs

    real = importlib.metadata.entry_points

    def twice(**kwargs):
        found = list(real(**kwargs))
        return found + found

    monkeypatch.setattr(importlib.metadata, "entry_points", twice)
    assert len(specs._entry_points()) == len({(ep.name, ep.value) for ep in real(group=specs.ENTRY_POINT_GROUP)}) >= 1
    default, _ = specs.default_policy_specs()
    assert len(default) == len(set(default))


def test_table_cells_print_no_rounding_noise_and_no_percentage_of_a_zero_reference():
    """A CI half-width that is floating-point noise prints as 0 (equal values summed), and a change vs the reference
    beyond ±1000% (a reference near zero) is left out; ordinary changes keep their percentage."""
    from geopipe_evaluation.report import _cell

    assert _cell({"mean": 1.0, "ci95": 6.37e-16, "n": 5}) == "1 ± 0"
    assert _cell({"mean": 0.1, "ci95": 0.02, "n": 5, "change_vs_reference_pct": 3166.7}) == "0.1 ± 0.02"
    assert _cell({"mean": 14.6, "ci95": 9.3, "n": 5, "change_vs_reference_pct": -81.9}) == "14.6 ± 9.3 (-81.9%)"
    assert _cell({"mean": 2.0, "ci95": 0.5, "n": 1}) == "2"


REFUSE_AT_ONCE = """
import sys, time
start = time.perf_counter()
from geopipe_evaluation.evaluate_cli import main
try:
    main(sys.argv[1:])
    code = 0
except SystemExit as exc:
    code = exc.code
print(code, "torch" in sys.modules, round(time.perf_counter() - start, 2))
"""


@pytest.mark.parametrize("args, message", [
    (["--env", "my-wrold.yaml"], "my-wrold.yaml: file not found"),
    (["--env", "BAD_SCENARIO"], "mfu: got 3; expected a finite number > 0 and <= 1"),
    (["--env", "GeoPipe-v9"], "Environment version `v9` for environment `GeoPipe` doesn't exist"),
    (["--policies", "lcf", "nosuch"], "unknown policy 'nosuch'"),
    (["--cost-weight", "-1"], "cost_weight: got -1"),
])
def test_bad_input_is_refused_before_torch_and_the_kernels(tmp_path, args, message):
    """With an empty kernel cache (a fresh machine), a bad env, scenario file, policy or option is refused with one
    line and exit 2 before torch is imported and before any kernel compiles (the cache folder stays empty), the
    shipped agent among the default policies included."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nextends: geopipe-v0\nname: bad\nmfu: 3.0\n")
    args = [str(bad) if a == "BAD_SCENARIO" else a for a in args]
    cache = tmp_path / "cache"
    env = {**os.environ, "GEOPIPE_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", REFUSE_AT_ONCE, *args, "--out", str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    code, torch_imported, seconds = done.stdout.split()
    assert code == "2" and torch_imported == "False", done.stderr
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not any(cache.rglob("*.nbi")), "a kernel was compiled before the input was refused"
