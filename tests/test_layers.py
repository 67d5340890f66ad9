"""The code's structure: ``geopipe_env``'s sub-packages are its layers (``geopipe_env.LAYERS``), and every module
imports only from its own layer and below; no two modules of the project import each other, not even inside a function; the core
imports neither the training, Ray nor evaluation packages, and the packages above it depend one way: the scripted
policies (``geopipe_baselines``) on the core, the evaluation harness (``geopipe_evaluation``) on both, and
``geopipe_agents`` on all three."""

from __future__ import annotations

import ast

import networkx as nx

from geopipe_env import LAYERS, layer_of

from benchmarks.layers_figure import import_graph, imports, modules


def test_no_module_imports_another_that_imports_it_back():
    """The import graph of the four packages has no cycle, lazy imports included."""
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, cycles


def test_the_core_imports_only_downwards():
    """Each geopipe_env module sits in a layer's sub-package (or is the env or rendering at the top), and imports
    only from its layer and below."""
    graph = import_graph()
    core = {n for n in graph if n.startswith("geopipe_env.")}
    assert {n.removeprefix("geopipe_env.").split(".")[0] for n in core} == set(LAYERS)
    upward = [(src, dst) for src, dst in graph.edges if src in core and dst in core and layer_of(dst) > layer_of(src)]
    assert not upward, upward


def test_the_folders_are_the_layers():
    """A layer below the top is one sub-package, and a sub-package holds one layer: the folder names a reader sees
    are the layers."""
    folders = {p.parent.name for name, p in modules().items() if name.startswith("geopipe_env.") and p.name != "__init__.py"}
    assert folders - {"geopipe_env"} == {name for name, layer in LAYERS.items() if layer < max(LAYERS.values())}
    top = {p.stem for name, p in modules().items()
           if name.startswith("geopipe_env.") and name.count(".") == 1 and p.name != "__init__.py"}
    assert top == {name for name, layer in LAYERS.items() if layer == max(LAYERS.values())}


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
    """A geopipe_env module's docstring, and each layer's package docstring, opens with its layer, as LAYERS has it
    (a reader knows where they are)."""
    for name, path in modules().items():
        if name.startswith("geopipe_env."):
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            assert doc.startswith(f"Layer {layer_of(name)}:"), name
