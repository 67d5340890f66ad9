"""Packaging: one version everywhere, an SPDX licence, and data that ships."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
import yaml

import geopipe_env

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = ("geopipe_env", "agents", "baselines")


def test_version_has_one_source_that_the_citation_and_changelog_repeat():
    """pyproject reads the version from geopipe_env.__version__; CITATION.cff and CHANGELOG.md name the same one."""
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "geopipe_env.__version__"}
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["title"] == "GeoPipe" and str(citation["version"]) == geopipe_env.__version__
    assert f"## [{geopipe_env.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


def test_license_is_an_spdx_string_and_its_files_exist():
    """The licence is an SPDX expression (not a table), and every licence file it names exists."""
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert "MIT License" in (ROOT / "LICENSE").read_text() and "GeoPipe contributors" in (ROOT / "LICENSE").read_text()
    for pattern in project["license-files"]:
        assert list(ROOT.glob(pattern)), pattern


@pytest.mark.parametrize("package", PACKAGES)
def test_every_data_file_ships_as_package_data(package):
    """Each non-Python file inside a package (hyperparameters, the shipped agent, scenarios, py.typed) matches a
    package-data pattern, so an installed copy has it."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"][package]
    folder = ROOT / package
    assert (folder / "py.typed").is_file()
    files = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"]
    assert files
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert unshipped == []
