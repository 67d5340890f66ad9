"""Random valid scenarios, for the property tests and the scaling benchmark (not shipped with the package).

``random_scenario_dict`` draws a scenario file's content (regions, a connected random WAN, a workload) from a
numpy RNG; ``random_scenario`` loads it through the YAML loader, so every world it returns has passed the same
validation as a user's file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geopipe_env.scenario import bundled
from geopipe_env.scenario.loader import load_scenario
from geopipe_env.scenario.types import Scenario

SMALL_MODELS = ("qwen2.5-14b", "gemma-3-27b", "qwen2.5-32b")  # fit a few dozen GPUs of any catalog type
GPU_TYPES = ("A6000", "A100", "H100")
GPU_COUNTS = (8, 16, 32, 64)


def random_scenario_dict(
    rng: np.random.Generator,
    num_regions: int,
    num_jobs: int = 8,
    market_prices: bool = True,
    extra_link_fraction: float = 0.3,
    batch: bool = False,
) -> dict[str, Any]:
    """A random, valid scenario as a dict in the YAML v1 schema.

    Regions get a random GPU type and count, PUE, and a constant price or (with ``market_prices``) a bundled
    hourly market. The WAN is a random spanning tree, so it is connected, plus each other pair with probability
    ``extra_link_fraction``; links have 0.5–50 Gbit/s and 1–150 ms. Jobs are Poisson arrivals of small models
    trained on Alpaca, so episodes stay short; with ``batch`` they all arrive at t = 0 (a long queue at once).
    """
    ids = [f"r{i}" for i in range(num_regions)]
    markets = bundled.price_markets()
    regions = []
    for rid in ids:
        region: dict[str, Any] = {
            "id": rid,
            "gpu": str(rng.choice(GPU_TYPES)),
            "num_gpus": int(rng.choice(GPU_COUNTS)),
            "pue": round(float(rng.uniform(1.0, 1.6)), 3),
        }
        if market_prices and rng.random() < 0.5:
            region["price_market"] = str(rng.choice(markets))
        else:
            region["price_usd_per_kwh"] = round(float(rng.uniform(0.03, 0.4)), 4)
        regions.append(region)
    # Enough GPUs of the smallest type for the largest model, in region r0, which every region reaches.
    regions[0]["num_gpus"] = 64
    matrix: dict[str, dict[str, dict[str, float]]] = {}

    def link(a: str, b: str) -> None:
        matrix.setdefault(a, {})[b] = {
            "bandwidth_gbps": round(float(rng.uniform(0.5, 50.0)), 3),
            "latency_ms": round(float(rng.uniform(1.0, 150.0)), 2),
        }

    for i in range(1, num_regions):
        link(ids[int(rng.integers(0, i))], ids[i])  # a random spanning tree
    for i in range(num_regions):
        for j in range(i + 1, num_regions):
            if ids[j] not in matrix.get(ids[i], {}) and rng.random() < extra_link_fraction:
                link(ids[i], ids[j])
    return {
        "name": f"random-{num_regions}r-{num_jobs}j",
        "horizon_h": 2000,
        "start_utc": "random",
        "mfu": round(float(rng.uniform(0.3, 0.5)), 3),
        "regions": regions,
        "network": {"rule": "matrix", "matrix": matrix},
        "workload": {
            "num_jobs": num_jobs,
            "arrival": {"process": "batch"}
            if batch
            else {"process": "poisson", "mean_interarrival_h": round(float(rng.uniform(0.05, 1.0)), 3)},
            "models": list(rng.choice(SMALL_MODELS, size=int(rng.integers(1, len(SMALL_MODELS) + 1)), replace=False)),
            "datasets": ["alpaca"],
            "num_microbatches": int(rng.choice((8, 16, 32))),
        },
    }


def random_scenario(rng: np.random.Generator, num_regions: int, num_jobs: int = 8, **kwargs: Any) -> Scenario:
    """A random valid :class:`Scenario` (see :func:`random_scenario_dict`)."""
    return load_scenario(random_scenario_dict(rng, num_regions, num_jobs, **kwargs))
