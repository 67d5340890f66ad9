"""The documentation site builds with MkDocs in strict mode (every link, anchor and API reference resolves)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import readme_link_targets

pytest.importorskip("mkdocs", reason="the [docs] extra is not installed")
pytest.importorskip("mkdocstrings", reason="the [docs] extra is not installed")

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    """``mkdocs build --strict`` succeeds and writes every page of the nav."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for page in ("index.html", "physics/index.html", "api/index.html", "environment/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "GeoPipeEnv" in api and "load_scenario" in api
    # docs/griffe_sphinx_roles.py turns the docstrings' Sphinx roles into code; none is left as text.
    assert not re.findall(r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj):", api)
    assert "<code>Scenario</code>" in api
    # The env's gym methods have their own entries, and the class shows the module's docstring.
    for text in ("Start an episode", "Take one decision", "Draw the current state", "Action Space"):
        assert text in api, text


def test_readme_links_to_existing_docs():
    """Every relative link in the README points at a file in the repository."""
    targets = readme_link_targets()
    assert targets, "the README links to the docs"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing


def test_sphinx_roles_become_code_spans():
    """The API reference's Griffe extension shows a role's title, a tilde target's last name, or the target."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("griffe_sphinx_roles", ROOT / "docs" / "griffe_sphinx_roles.py")
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    text = "a :class:`Scenario`, :func:`~geopipe_env.scenario.loader.load_scenario`, :py:meth:`reset <GeoPipeEnv.reset>` and ``x``"
    assert roles.rewrite_roles(text) == "a `Scenario`, `load_scenario`, `reset` and ``x``"
