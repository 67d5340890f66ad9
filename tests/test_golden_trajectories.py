"""What an agent sees must not move by accident: masked-random episodes equal a recording.

The golden metrics test covers the scripted policies' episode metrics; this one covers every observation, mask and
reward along masked-random trajectories in ``tests/data/golden_trajectories.json``: the ``a6000-vm-pair``,
GeoPipe-Paper-v0 and GeoPipe-Toy-v0 cases (single-replica physics), the ``geopipe-abundant`` cases (data-parallel
replicas, end-to-end MFU; recorded when that world was the flagship) and the ``GeoPipe-v0`` cases (the flagship:
scarcity, calibrated compute, the schedules of the literature). Every case sees BACE-Pipe's candidate, so all were
re-recorded when its placement rule changed; the golden metrics of policies that do not read it show that the
physics did not. ``python tests/test_golden_trajectories.py --record [CASE ...]`` re-records the GeoPipe-v0 cases
(or the cases named); do it only when their numbers change on purpose. Each case records per-step sums of each observation key (plain and
position-weighted, so a permutation shows), the mask's valid actions, and the rewards.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import geopipe_env  # noqa: F401

GOLDEN_PATH = Path(__file__).parent / "data" / "golden_trajectories.json"
LEGACY_CASES = {
    "a6000-vm-pair|0": ("GeoPipe-v0", {"scenario": "a6000-vm-pair"}, 0),
    "a6000-vm-pair|1": ("GeoPipe-v0", {"scenario": "a6000-vm-pair"}, 1),
    "a6000-vm-pair|2": ("GeoPipe-v0", {"scenario": "a6000-vm-pair"}, 2),
    "GeoPipe-Paper-v0|0": ("GeoPipe-Paper-v0", {}, 0),
    "GeoPipe-Toy-v0|0": ("GeoPipe-Toy-v0", {}, 0),
    "a6000-vm-pair-exact|3": ("GeoPipe-v0", {"scenario": "a6000-vm-pair", "timing": "exact"}, 3),
    "a6000-vm-pair-randomized|4": ("GeoPipe-v0", {"scenario": "a6000-vm-pair-randomized"}, 4),
    "geopipe-abundant|0": ("GeoPipe-v0", {"scenario": "geopipe-abundant"}, 0),
    "geopipe-abundant|1": ("GeoPipe-v0", {"scenario": "geopipe-abundant"}, 1),
    "geopipe-abundant-exact|3": ("GeoPipe-v0", {"scenario": "geopipe-abundant", "timing": "exact"}, 3),
}
FLAGSHIP_CASES = {
    "GeoPipe-v0|0": ("GeoPipe-v0", {}, 0),
    "GeoPipe-v0|1": ("GeoPipe-v0", {}, 1),
    "GeoPipe-v0-exact|3": ("GeoPipe-v0", {"timing": "exact"}, 3),
    "geopipe-v0-randomized|4": ("GeoPipe-v0", {"scenario": "geopipe-v0-randomized"}, 4),
}
CASES = {**LEGACY_CASES, **FLAGSHIP_CASES}


def make(env_id: str, kwargs: dict):
    """The unwrapped env of a case."""
    return gym.make(env_id, **kwargs).unwrapped


def play(env_id: str, kwargs: dict, seed: int, max_steps: int = 400) -> dict:
    """One masked-random episode (at most ``max_steps`` decisions): per-step fingerprints of what the agent saw."""
    env = make(env_id, kwargs)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    record: dict[str, list] = {"rewards": [], "valid": [], **{key: [] for key in obs}}

    def fingerprint(obs, info):
        for key, value in obs.items():
            flat = value.astype(np.float64).reshape(-1)
            record[key].append([float(flat.sum()), float(flat @ np.arange(1, flat.size + 1))])
        record["valid"].append(np.flatnonzero(info["action_mask"]).tolist())

    fingerprint(obs, info)
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        record["rewards"].append(float(reward))
        fingerprint(obs, info)
        if terminated or truncated:
            break
    return record


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN_PATH.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_trajectory_matches_recording(case, golden):
    """Same masks every step; rewards and observation sums equal the recording to 1e-9 (float32 sums: 1e-6).

    The mask returned with the last step is checked against the rule instead: wait alone (no policy acts on it
    except under a vector env's autoreset).
    """
    got, want = play(*CASES[case]), golden[case]
    assert len(got["rewards"]) == len(want["rewards"])
    for step, (g, w) in enumerate(zip(got["valid"][:-1], want["valid"][:-1])):
        assert g == w, f"mask differs at step {step}"
    wait_action = make(*CASES[case][:2]).wait_action
    assert got["valid"][-1] == [wait_action] == want["valid"][-1]
    assert got["rewards"] == pytest.approx(want["rewards"], rel=1e-9, abs=1e-12)
    for key in want:
        if key not in ("rewards", "valid"):
            assert np.allclose(got[key], want[key], rtol=1e-6, atol=1e-6), f"observation {key!r} differs"


if __name__ == "__main__" and "--record" in sys.argv:
    # --record: the GeoPipe-v0 cases; --record CASE ...: the cases named.
    named = sys.argv[sys.argv.index("--record") + 1:] or list(FLAGSHIP_CASES)
    recorded = json.loads(GOLDEN_PATH.read_text())
    recorded.update({case: play(*CASES[case]) for case in named})
    GOLDEN_PATH.write_text(json.dumps(recorded) + "\n")
    print(f"wrote {len(named)} case(s) to {GOLDEN_PATH}")
