"""GeoPipe: a Gymnasium benchmark for scheduling multi-tenant pipeline-parallel LLM training across
geo-distributed GPU clusters.

Layers (each module imports only from layers below it):
  1. ``units``, ``catalog``                         units and built-in catalogs
  2. ``scenario``, ``bundled``                      frozen scenario types, bundled data
  3. ``physics.*``, ``sizing``                      pipeline timing, schedule simulation, bandwidth, energy, K* sizing;
                                                    ``physics.kernels``: their compiled (numba) counterparts
  4. ``loader``, ``generator``, ``engine``, ``simulator``, ``layout_table``  YAML loading and validation,
                                                    per-episode worlds, event heap, cluster simulator, layouts as
                                                    flat arrays for compiled code
  5. ``placement``, ``candidate_kernels``, ``candidate_table``  named placement strategies; the candidate table of
                                                    the built-in strategies in compiled code
  6. ``observation``, ``env``                       observation encoding and the Gymnasium env
  7. ``render``                                     ANSI and RGB rendering
"""

from gymnasium.envs.registration import register

# The one source of the version: pyproject.toml reads it (tool.setuptools.dynamic); CITATION.cff and CHANGELOG.md
# repeat it, and tests/test_packaging.py checks that they agree.
__version__ = "0.1.0"

ENV_IDS = {
    "GeoPipe-v0": "geopipe-v0",
    "GeoPipe-Paper-v0": "paper",
    "GeoPipe-Paper24-v0": "paper-24",
    "GeoPipe-Toy-v0": "toy",
}

for _env_id, _scenario in ENV_IDS.items():
    register(id=_env_id, entry_point="geopipe_env.env:GeoPipeEnv", kwargs={"scenario": _scenario})

__all__ = ["ENV_IDS", "__version__"]
