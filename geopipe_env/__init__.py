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

# The layers, bottom to top. Each is a sub-package (the env and its rendering sit at the top level), and a module
# imports only from its own layer and those below: 1 ``base``: units, catalogs, table declarations, how code is
# compiled, the process caches; 2 ``physics``: pipeline timing and memory, the schedules and their executor,
# bandwidth sharing, energy, failures, job sizing; 3 ``scenario``: the scenario types, the format's declarations,
# loading, the JSON Schema, the bundled data; 4 ``simulation``: the core types, per-episode worlds, the event heap,
# the simulator and its compiled kernels, the layout table; 5 ``decision``: placement strategies and their compiled
# twins, the observation, the decision backends; 6 the env and rendering. (The numpy specification of the compiled
# code lives with the tests, in tests/reference.py, and does not ship.)
LAYERS = {"base": 1, "physics": 2, "scenario": 3, "simulation": 4, "decision": 5, "env": 6, "render": 6}


def layer_of(module: str) -> int:
    """The layer of a module of the package, by its dotted name (``geopipe_env.scenario.loader`` is in layer 3)."""
    return LAYERS[module.removeprefix("geopipe_env.").split(".")[0]]


__all__ = ["ENV_IDS", "LAYERS", "__version__", "layer_of"]
