"""GeoPipe: a Gymnasium benchmark for scheduling multi-tenant pipeline-parallel LLM training across
geo-distributed GPU clusters.

The package is built in layers (:data:`LAYERS`): each module imports only from its own layer and the layers below
it (``tests/test_layers.py`` checks every import, and that no two modules import each other, even inside a
function). ``docs/design.md`` draws them.
"""

from gymnasium.envs.registration import register

# The one source of the version: pyproject.toml reads it (tool.setuptools.dynamic); CITATION.cff and CHANGELOG.md
# repeat it, and tests/test_packaging.py checks that they agree.
__version__ = "0.1.0"

ENV_IDS = {
    "GeoPipe-v0": "geopipe-v0",
    "GeoPipe-Abundant-v0": "geopipe-abundant",
    "GeoPipe-Paper-v0": "paper",
    "GeoPipe-Paper24-v0": "paper-24",
    "GeoPipe-Toy-v0": "toy",
    "GeoPipe-Small-v0": "small",
    "GeoPipe-Trace-v0": "geopipe-v0-philly",
    "GeoPipe-Faults-v0": "geopipe-v0-faults",
}

for _env_id, _scenario in ENV_IDS.items():
    register(id=_env_id, entry_point="geopipe_env.env:GeoPipeEnv", kwargs={"scenario": _scenario})

# Each module's layer: 1 units, catalogs, table declarations, how code is compiled and the process caches; 2 scenario types and bundled
# data; 3 physics (pipeline timing, schedules, bandwidth sharing, energy), job sizing and the core types; 4 the scenario format and its loading,
# per-episode worlds, the event heap, the simulator and its compiled kernels, the layout table; 5 placement
# strategies and their compiled twins; 6 the observation, the decision backends, rendering and the env. (The numpy
# specification of the compiled code lives with the tests, in tests/reference.py, and does not ship.)
LAYERS = {
    "units": 1, "catalog": 1, "tables": 1, "compiled": 1, "caches": 1,
    "scenario": 2, "bundled": 2,
    "physics": 3, "physics.pipeline": 3, "physics.schedule": 3, "physics.network": 3, "physics.energy": 3, "physics.failures": 3, "sizing": 3, "core_types": 3,
    "scenario_format": 4, "loader": 4, "schema": 4, "generator": 4, "engine": 4, "simulator": 4, "sim_kernels": 4,
    "layout_table": 4,
    "placement": 5, "candidate_kernels": 5, "strategies": 5,
    "observation": 6, "decision": 6, "render": 6, "env": 6,
}

__all__ = ["ENV_IDS", "LAYERS", "__version__"]
