"""The code's structure as a figure: every module of ``geopipe_env``, ``geopipe_baselines``, ``geopipe_evaluation`` and
``geopipe_agents`` by layer, and an arrow for each import (inside functions too).

Usage: ``python benchmarks/layers_figure.py [--out docs/img/layers.png]``. ``geopipe_env``'s modules sit in the rows
of their layer (``geopipe_env.LAYERS``, 1 at the bottom), then the scripted policies (``geopipe_baselines``), the
evaluation harness (``geopipe_evaluation``) and ``geopipe_agents`` on top; an arrow
points from the importer to the module it imports, so every arrow of the core points down or sideways.
``tests/test_layers.py`` checks the same graph (:func:`import_graph`): no cycle, no upward import.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from pathlib import Path

import networkx as nx
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("geopipe_env", "geopipe_baselines", "geopipe_evaluation", "geopipe_agents")  # bottom to top
COLOURS = {"geopipe_env": "#4c72b0", "geopipe_baselines": "#dd8452", "geopipe_evaluation": "#8172b3",
           "geopipe_agents": "#55a868"}
# The rows above the core's layers: each package above it, 1.5 apart.
ABOVE_CORE = {package: 1.5 * (i + 1) for i, package in enumerate(PACKAGES[1:])}


def package_folder(package: str) -> str:
    """The folder of an import name in the source tree (``geopipe_agents`` is installed from ``agents/``)."""
    spec = importlib.util.find_spec(package)
    return Path(spec.origin).parent.name


def modules(root: Path = ROOT) -> dict[str, Path]:
    """The project's modules by dotted name (a package by its own name), and their files."""
    out = {}
    for package in PACKAGES:
        folder = root / package_folder(package)
        for path in sorted(folder.rglob("*.py")):
            parts = (package, *path.relative_to(folder).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, known: set[str] = frozenset()) -> set[str]:
    """Every module name a file imports, at its top level or inside functions. ``from p import m`` of modules
    ``p.m`` that ``known`` lists imports those modules, not the package ``p`` itself."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            submodules = {f"{node.module}.{a.name}" for a in node.names}
            names |= submodules if submodules <= known else {node.module} | submodules
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    """The project's modules, and an edge from each to every other one it imports (its own packages left out)."""
    found = modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(found)
    for name, path in found.items():
        for imported in imports(path, set(found)):
            target = imported
            while target and target not in found:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)
    return graph


def rows(graph: nx.DiGraph) -> dict[str, float]:
    """Each module's row: its layer in the core, then the other packages above it (:data:`ABOVE_CORE`)."""
    from geopipe_env import LAYERS, layer_of

    top = max(LAYERS.values())
    out = {}
    for name in graph:
        package, _, rest = name.partition(".")
        if package == "geopipe_env":
            out[name] = layer_of(name) if rest else 0
        else:
            out[name] = top + ABOVE_CORE[package]
    return out


def draw(graph: nx.DiGraph, out: Path) -> Path:
    """Draw the graph by rows and save it as a PNG."""
    level = rows(graph)
    by_row: dict[float, list[str]] = {}
    for name in sorted(graph, key=lambda n: (level[n], n)):
        by_row.setdefault(level[name], []).append(name)
    width = max(len(names) for names in by_row.values())
    position = {}
    for y, names in by_row.items():
        for i, name in enumerate(names):
            position[name] = ((i + 0.5) * width / len(names), y)
    fig = Figure(figsize=(16, 11), dpi=100)
    ax = fig.add_subplot()
    nx.draw_networkx_edges(graph, position, ax=ax, alpha=0.25, arrowsize=8, width=0.7, edge_color="#555555",
                           connectionstyle="arc3,rad=0.05", node_size=2200)
    for name, (x, y) in position.items():
        package, _, rest = name.partition(".")
        ax.text(x, y, rest or package, ha="center", va="center", fontsize=8.5,
                bbox={"boxstyle": "round,pad=0.35", "facecolor": COLOURS[package], "alpha": 0.25, "edgecolor": COLOURS[package]})
    from geopipe_env import LAYERS

    for layer in sorted(set(LAYERS.values())):
        ax.text(-0.6, layer, f"layer {layer}", ha="right", va="center", fontsize=9, color=COLOURS["geopipe_env"])
    top = max(LAYERS.values())
    for package, above in ABOVE_CORE.items():
        ax.text(-0.6, top + above, package, ha="right", va="center", fontsize=9, color=COLOURS[package])
    ax.set_xlim(-1.8, width + 0.2)
    ax.set_ylim(0.3, top + max(ABOVE_CORE.values()) + 0.6)
    ax.axis("off")
    ax.set_title("GeoPipe's modules by layer; an arrow points from a module to one it imports", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "layers.png")
    args = parser.parse_args(argv)
    graph = import_graph()
    print(f"{graph.number_of_nodes()} modules, {graph.number_of_edges()} imports, "
          f"{len(list(nx.simple_cycles(graph)))} cycles; figure: {draw(graph, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
