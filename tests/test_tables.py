"""Every table column and observation position is declared once (``geopipe_env.base.tables``), the two decision backends
agree on every declared field at every decision, and the docs' observation table is the declaration."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import geopipe_env  # noqa: F401
from geopipe_env.base import tables
from geopipe_env.decision.backends import CompiledBackend
from reference import PythonBackend
from geopipe_env.env import GeoPipeEnv
from geopipe_env.scenario.loader import load_scenario
from geopipe_env.decision.observation import obs_layout
from benchmarks.synthetic import random_scenario_dict

DOCS = Path(__file__).resolve().parent.parent / "docs"
# The candidate figures a CandidateInfo holds, by the declared candidate column they come from.
INFO_FIELD = {"iteration": "iteration_s", "duration": "duration_s", "cost": "cost_usd", "carbon": "carbon_kg",
              "rate": "rate_gbps", "demand": "demand_gbps", "stalled": "stalled", "schedule": "schedule"}


def test_a_table_is_bound_whole_or_not_at_all():
    """Code that binds a table's positions must name every column once: a column declared without its computation
    fails at import."""
    table = tables.Table("t", (tables.Column("a", ""), tables.Column("b", "")))
    assert table.positions("b", "a") == (1, 0)
    for names in (("a",), ("a", "b", "c"), ("a", "a")):
        with pytest.raises(ValueError, match="bind every column once"):
            table.positions(*names)


def test_observation_shapes_follow_the_declaration():
    """Each observation key's table has one column per declared feature."""
    layout = obs_layout(5, 3, 4)
    for key, table, _ in tables.OBSERVATION:
        assert layout[key][-1] == len(table), key
    assert set(INFO_FIELD) == set(tables.CANDIDATE_FLOATS.names)


def _pair(scenario, strategies=None):
    """Two envs of one scenario, the first with the compiled backend and the second with the Python one."""
    compiled = GeoPipeEnv(scenario, strategies=strategies)
    python = GeoPipeEnv(scenario, strategies=strategies)
    assert isinstance(compiled._backend, CompiledBackend)
    python._backend = PythonBackend(python.strategies)
    return compiled, python


def _agree(compiled: GeoPipeEnv, python: GeoPipeEnv, obs_c: dict, obs_p: dict, where: str) -> None:
    """The two backends' observations agree feature by feature, and their candidates column by column."""
    for key, table, _ in tables.OBSERVATION:
        got = obs_c[key].reshape(-1, len(table))
        want = obs_p[key].reshape(-1, len(table))
        for position, column in enumerate(table.columns):
            np.testing.assert_array_equal(got[:, position], want[:, position], err_msg=f"{where}: {key}.{column.name}")
    for slot in range(compiled.queue_slots):
        for k in range(compiled.num_strategies):
            got, want = compiled.candidate(slot, k), python.candidate(slot, k)
            assert (got is None) == (want is None), (where, slot, k)
            if got is None:
                continue
            assert got.placement == want.placement, (where, slot, k)
            for column in tables.CANDIDATE_FLOATS.names:
                field = INFO_FIELD[column]
                assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-12, abs=1e-300), (
                    where, slot, k, column)


def _random_world(seed: int):
    rng = np.random.default_rng(seed)
    spec = random_scenario_dict(rng, int(rng.integers(2, 9)), int(rng.integers(4, 30)), batch=bool(seed % 2))
    return load_scenario(spec)


@pytest.mark.parametrize("scenario, strategies, seed", [
    ("geopipe-v0", None, 0),
    ("paper-24", None, 1),
    ("a6000-vm-pair-randomized", ("greenest", "bace-pipe-no-pathfinder", "lcf", "fastest"), 2),
    ("toy", None, 3),
    ("random", None, 4),
    ("random", ("cheapest", "bace-pipe-no-costmin", "cr-ldf"), 5),
])
def test_the_backends_agree_on_every_declared_field(scenario, strategies, seed):
    """Masked-random runs of the same seed and actions: the compiled and the Python backend give equal observations
    (every declared feature), masks, candidates (every declared candidate column), rewards and metrics."""
    world = _random_world(seed) if scenario == "random" else scenario
    compiled, python = _pair(world, strategies)
    rng = np.random.default_rng(seed)
    for episode in range(2):
        obs_c, info_c = compiled.reset(seed=seed + episode)
        obs_p, info_p = python.reset(seed=seed + episode)
        for step in range(80):
            np.testing.assert_array_equal(info_c["action_mask"], info_p["action_mask"])
            _agree(compiled, python, obs_c, obs_p, f"episode {episode} step {step}")
            action = int(rng.choice(np.flatnonzero(info_c["action_mask"])))
            obs_c, reward_c, term_c, trunc_c, info_c = compiled.step(action)
            obs_p, reward_p, term_p, trunc_p, info_p = python.step(action)
            assert (reward_c, term_c, trunc_c) == (reward_p, term_p, trunc_p)
            if term_c or trunc_c:
                _agree(compiled, python, obs_c, obs_p, f"episode {episode} end")
                assert info_c["episode_metrics"] == info_p["episode_metrics"]
                break


def test_docs_observation_table_is_the_declaration():
    """docs/environment.md holds the observation table that tables.observation_markdown() writes, row for row."""
    text = (DOCS / "environment.md").read_text()
    assert tables.observation_markdown() in text
    rows = [line for line in text.splitlines() if re.match(r"\| `(regions|links|queue|candidates|global)` \|", line)]
    assert len(rows) == sum(len(table) for _, table, _ in tables.OBSERVATION)


def test_a_record_is_packed_by_field_name_in_its_declared_order():
    """Table.pack orders the fields as declared, and refuses a missing or an unknown field in one line."""
    from geopipe_env.base.tables import DECISION_STATE, DS_CAPACITY, DS_FREE_GPUS, DS_LINK_LOAD, DS_NOW_S

    record = DECISION_STATE.pack(link_load="l", capacity="c", free_gpus="g", now_s=1.0)
    assert (record[DS_NOW_S], record[DS_FREE_GPUS], record[DS_CAPACITY], record[DS_LINK_LOAD]) == (1.0, "g", "c", "l")
    with pytest.raises(ValueError, match=r"missing \['link_load'\], unknown \[\]"):
        DECISION_STATE.pack(capacity="c", free_gpus="g", now_s=1.0)
    with pytest.raises(ValueError, match=r"missing \[\], unknown \['load'\]"):
        DECISION_STATE.pack(link_load="l", capacity="c", free_gpus="g", now_s=1.0, load="x")
