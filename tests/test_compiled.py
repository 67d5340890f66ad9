"""The compiled code has one home: every formula and constant is defined once, the cache of machine code is keyed by
every source the compiled code reads, and a warmed-up process compiles nothing more during episodes."""

from __future__ import annotations

import ast
import importlib
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

import geopipe_env  # noqa: F401
from geopipe_env.base import compiled
from geopipe_env.base.compiled import COMPILED_SOURCES, PACKAGE_DIR, cache_dir, sources_hash


def _modules() -> dict[str, ast.Module]:
    """Every module of the package, parsed, by its path relative to the package."""
    return {str(p.relative_to(PACKAGE_DIR)): ast.parse(p.read_text()) for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _module_of(dotted: str) -> str | None:
    """The path (relative to the package) of a module of the package named ``geopipe_env.a.b``, else None."""
    parts = dotted.split(".")
    if parts[0] != "geopipe_env" or len(parts) < 2:
        return None
    for candidate in ("/".join(parts[1:]) + ".py", "/".join(parts[1:] + ["__init__.py"])):
        if (PACKAGE_DIR / candidate).exists():
            return candidate
    return None


def _compiles(node: ast.AST) -> bool:
    """Whether a module (or a function) has a function decorated with ``jit`` or ``jit_unchecked``."""
    return any(isinstance(d, ast.Name) and d.id in ("jit", "jit_unchecked") for f in ast.walk(node)
               if isinstance(f, ast.FunctionDef) for d in f.decorator_list)


def _compiled_reads(tree: ast.Module) -> set[str]:
    """The package's modules whose definitions the module's compiled functions read: names imported from them (or
    their modules, read by attribute) that a compiled function uses, directly or through a module-level constant."""
    imported: dict[str, str] = {}  # name in this module -> the package module it comes from
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                source = _module_of(f"{node.module}.{alias.name}") or _module_of(node.module)
                if source:
                    imported[alias.asname or alias.name] = source
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _module_of(alias.name):
                    imported[alias.asname or alias.name] = _module_of(alias.name)
    constants: dict[str, set[str]] = {}  # module-level name -> the names its value uses
    for node in tree.body:
        if isinstance(node, ast.Assign):
            used = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            for target in node.targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        constants[leaf.id] = used
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and _compiles(node):
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    frontier = list(names)
    while frontier:
        for used in constants.get(frontier.pop(), ()):
            if used not in names:
                names.add(used)
                frontier.append(used)
    return {imported[name] for name in names if name in imported}


def test_compiled_sources_list_every_module_compiled_code_reads():
    """COMPILED_SOURCES, which keys the cache, holds each module with a compiled function and every module of the
    package whose constants or functions compiled code reads: an edit to any of them gives a new cache folder."""
    modules = _modules()
    needed = {name for name, tree in modules.items() if _compiles(tree)}
    for name in list(needed):
        needed |= _compiled_reads(modules[name])
    assert needed == set(COMPILED_SOURCES), (sorted(needed - set(COMPILED_SOURCES)), sorted(set(COMPILED_SOURCES) - needed))


def _numeric(value: ast.AST) -> bool:
    """Whether an expression is arithmetic on numbers and names (a constant's value, e.g. ``2.0`` or ``1 << 20``)."""
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
    if isinstance(value, ast.UnaryOp):
        return _numeric(value.operand)
    if isinstance(value, ast.BinOp):
        return all(_numeric(v) or isinstance(v, ast.Name) for v in (value.left, value.right))
    return False


def test_every_constant_is_defined_once():
    """A module-level constant (an upper-case name bound to a number) is assigned in one module only: compiled code
    imports the physics' constants instead of keeping copies."""
    homes: dict[str, list[str]] = {}
    for name, tree in _modules().items():
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _numeric(node.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for leaf in targets:
                    if isinstance(leaf, ast.Name) and leaf.id.lstrip("_").isupper() and len(leaf.id) > 1:
                        homes.setdefault(leaf.id, []).append(name)
    twice = {constant: where for constant, where in homes.items() if len(where) > 1}
    assert not twice, twice


def test_the_cache_folder_is_keyed_by_the_sources(tmp_path):
    """Changing one compiled source (a constant's value) gives another folder; the same text gives the same one."""
    copy = tmp_path / "geopipe_env"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.nb[ci]"))
    assert sources_hash(copy) == sources_hash()
    pipeline = copy / "physics" / "pipeline.py"
    pipeline.write_text(pipeline.read_text().replace("BACKWARD_TO_FORWARD = 2.0", "BACKWARD_TO_FORWARD = 2.5"))
    assert sources_hash(copy) != sources_hash()
    assert cache_dir().name == f"{geopipe_env.__version__}-{sources_hash()}"


def test_the_package_caches_its_kernels_in_its_folder():
    """The package's compiled functions keep their machine code under cache_dir(), one folder per module."""
    from geopipe_env.physics import pipeline

    path = Path(pipeline.model_total_s._cache._cache_path)
    assert path.parent == cache_dir() and path.name == "physics_pipeline"


def _dispatchers() -> dict[str, CPUDispatcher]:
    found = {}
    for source in COMPILED_SOURCES:
        module = importlib.import_module("geopipe_env." + source.removesuffix(".py").replace("/", ".").removesuffix("__init__").rstrip("."))
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


@pytest.mark.parametrize("kwargs", [{}, {"scenario": "paper-24"}, {"scenario": "a6000-vm-pair", "timing": "exact"},
                                    {"strategies": ("bace-pipe", "bace-pipe-no-costmin", "cheapest")}])
def test_episodes_compile_nothing_after_the_warm_up(kwargs):
    """Every signature an episode calls from Python was compiled (or loaded) when the first env was made: no episode
    pays for a compile."""
    env = gym.make("GeoPipe-v0", **kwargs).unwrapped
    compiled_before = {name: len(d.signatures) for name, d in _dispatchers().items()}
    rng = np.random.default_rng(0)
    for seed in range(2):
        obs, info = env.reset(seed=seed)
        for _ in range(150):
            obs, reward, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
            if terminated or truncated:
                break
        env.episode_metrics()
    grown = {name: (n, len(_dispatchers()[name].signatures)) for name, n in compiled_before.items()
             if len(_dispatchers()[name].signatures) != n}
    assert not grown, grown


def test_package_cache_locator_is_installed_first():
    """The package's locator comes before numba's own, so the package's functions never land beside the sources."""
    from numba.core import caching

    assert caching.CacheImpl._locator_classes[0].__name__ == "PackageCacheLocator"
    assert compiled.jit is not None
