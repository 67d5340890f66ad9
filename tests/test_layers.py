"""The code's structure: every module of ``geopipe_env`` imports only from its own layer and below
(``geopipe_env.LAYERS``); no two modules of the project import each other, not even inside a function; the core
imports neither the training, Ray nor evaluation packages, and the packages above it depend one way: the scripted
policies (``geopipe_baselines``) on the core, the evaluation harness (``geopipe_evaluation``) on both, and
``geopipe_agents`` on all three."""

from __future__ import annotations

import ast

import networkx as nx

from geopipe_env import LAYERS

from benchmarks.layers_figure import import_graph, imports, modules


def test_no_module_imports_another_that_imports_it_back():
    """The import graph of the four packages has no cycle, lazy imports included."""
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, cycles


def test_the_core_imports_only_downwards():
    """Each geopipe_env module has a layer, and imports only from its layer and below."""
    graph = import_graph()
    core = {n for n in graph if n.startswith("geopipe_env.")}
    assert {n.removeprefix("geopipe_env.") for n in core} == set(LAYERS)
    upward = [
        (src, dst) for src, dst in graph.edges
        if src in core and dst in core and LAYERS[dst.removeprefix("geopipe_env.")] > LAYERS[src.removeprefix("geopipe_env.")]
    ]
    assert not upward, upward


def test_packages_depend_one_way():
    """Each package imports only those below it (geopipe_env, geopipe_baselines, geopipe_evaluation, geopipe_agents,
    bottom to top); the core imports no training, Ray or RL stack, and the scripted policies none of the plotting,
    Ray or RL stacks either. (The old import names ``agents`` and ``baselines`` belong to other projects: nothing
    imports them.)"""
    order = ("geopipe_env", "geopipe_baselines", "geopipe_evaluation", "geopipe_agents")
    stacks = {"torch", "stable_baselines3", "sb3_contrib", "ray", "tensorboard"}
    for name, path in modules().items():
        roots = {imported.split(".")[0] for imported in imports(path)}
        assert not roots & {"agents", "baselines"}, name
        package = name.split(".")[0]
        assert not roots & set(order[order.index(package) + 1:]), name
        if package in ("geopipe_env", "geopipe_baselines"):
            assert not roots & stacks, name
        if package == "geopipe_baselines":
            assert "matplotlib" not in roots, name


def test_each_core_module_says_its_layer():
    """A geopipe_env module's docstring opens with its layer, as LAYERS has it (a reader knows where they are)."""
    for name, path in modules().items():
        if name.startswith("geopipe_env.") and path.name != "__init__.py" or name == "geopipe_env.physics":
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            assert doc.startswith(f"Layer {LAYERS[name.removeprefix('geopipe_env.')]}:"), name
