"""The documentation site builds with MkDocs in strict mode (every link, anchor and API reference resolves)."""

from __future__ import annotations

import os
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


def test_readme_links_to_existing_docs():
    """Every relative link in the README points at a file in the repository."""
    targets = readme_link_targets()
    assert targets, "the README links to the docs"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing
