"""The flagship tables (benchmarks/flagship_table.py) fit a docs page: three tables of at most six columns, the
paired change against bace-pipe beside its mean; the last is the README's."""

from __future__ import annotations

import json

from benchmarks import flagship_table

MAX_COLUMNS = 6  # a docs table of more columns scrolls sideways


def _episode(policy: str, seed: int, scale: float, finished: bool = True) -> dict:
    return {
        "env": "GeoPipe-v0", "policy": policy, "seed": seed, "cross_region_gpu_share": 0.5, "stalled_job_fraction": 0.1,
        "avg_comm_slowdown": 1.1 if finished else None, "max_link_utilization": 0.9,
        "jobs_completed": 40 if finished else 0, "avg_time_in_system_h": scale * (10 + seed),
        "avg_jct_h": scale * (9 + seed) if finished else None, "total_cost_usd": scale * (1000 + seed),
    }


def test_three_tables_of_at_most_six_columns(tmp_path, capsys):
    seeds = [1000, 1001, 1002]
    episodes = [_episode("bace-pipe", s, 1.0) for s in seeds] + [_episode("sjf", s, 1.5) for s in seeds]
    episodes += [_episode("ldf", s, 2.0, finished=False) for s in seeds]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"envs": {"GeoPipe-v0": {"env_id": "GeoPipe-v0", "scenario": None}}, "seeds": seeds,
                                "episodes": episodes}))
    assert flagship_table.main([str(path)]) == 0
    tables = [block for block in capsys.readouterr().out.split("\n\n") if block.startswith("|")]
    assert len(tables) == 3
    for table in tables:
        lines = table.strip().splitlines()
        assert all(line.count("|") - 1 <= MAX_COLUMNS for line in lines)
        assert len({line.count("|") for line in lines}) == 1
    outcomes = {line.split(" | ")[0].strip("| "): line for line in tables[1].splitlines()[2:]}
    assert "%" not in outcomes["bace-pipe"]
    # sjf takes 1.5x bace-pipe's time in system and cost on every seed: +50.0% beside each mean
    assert outcomes["sjf"].count("(+50.0 ± ") == 2
    assert "| — |" in outcomes["ldf"]  # no finished job: no JCT
    headline = {line.split(" | ")[0].strip("| "): line for line in tables[2].splitlines()[2:]}
    assert "jobs done (of 40)" in tables[2].splitlines()[0]  # GeoPipe-v0 holds 40 jobs an episode
    assert headline["sjf"].startswith("| sjf | 0.50 | 10.0% | 40.0 | ")
    assert headline["sjf"].count("(+50.0 ± ") == 2 and headline["ldf"].startswith("| ldf | 0.50 | 10.0% | 0.0 |")


def test_a_world_whose_gpus_fail_adds_a_goodput_table(tmp_path, capsys):
    """Goodput, GPU-hours lost and interruptions per job make a fourth table, only where some GPU-time was lost."""
    seeds = [1000, 1001]
    episodes = [{**_episode(p, s, 1.0), "goodput": 1.0, "gpu_hours_lost_to_failures": 0.0,
                 "interruptions_per_job": 0.0} for p in ("bace-pipe", "sjf") for s in seeds]
    path = tmp_path / "results.json"
    results = {"envs": {"GeoPipe-v0": {"env_id": "GeoPipe-v0", "scenario": None}}, "seeds": seeds, "episodes": episodes}
    path.write_text(json.dumps(results))
    assert flagship_table.main([str(path)]) == 0
    assert "goodput" not in capsys.readouterr().out
    episodes[0].update(goodput=0.9, gpu_hours_lost_to_failures=120.0, interruptions_per_job=0.5)
    path.write_text(json.dumps(results))
    assert flagship_table.main([str(path)]) == 0
    tables = [block for block in capsys.readouterr().out.split("\n\n") if block.startswith("|")]
    assert len(tables) == 4 and tables[3].startswith("| policy | goodput |")
    assert "| bace-pipe | 0.950 ± 0.635 | 60 ± 762 | 0.25 ± 3.18 |" in tables[3]
