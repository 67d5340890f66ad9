"""Import names that cannot clash: the wheel installs only geopipe_* packages, so a distribution that owns the
top-level names ``agents`` or ``baselines`` (the public index has both, and OpenAI Baselines installs ``baselines``)
installs beside GeoPipe without shadowing it or being shadowed by it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
PACKAGE_DIRS: dict[str, str] = SETUPTOOLS["package-dir"]
# What a wheel holds beside its packages.
SOURCE_FILES = ("pyproject.toml", "README.md", "LICENSE")


def _source_packages() -> set[str]:
    """Every package of the source tree by its import name: each folder with an ``__init__.py``."""
    found = set()
    for name, folder in PACKAGE_DIRS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    return found


def test_every_installed_name_starts_with_geopipe_and_every_package_is_listed():
    """The packages the wheel installs are the source tree's packages, each under a geopipe_ name."""
    assert set(SETUPTOOLS["packages"]) == _source_packages()
    assert all(name.split(".")[0].startswith("geopipe_") for name in SETUPTOOLS["packages"])
    assert {"agents", "baselines"} <= set(PACKAGE_DIRS.values())  # the folders keep the project's layout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel of GeoPipe, built from a copy of the sources (an in-tree build would reuse a stale build/ folder)."""
    pytest.importorskip("setuptools.build_meta")
    source = tmp_path_factory.mktemp("source")
    for name in SOURCE_FILES:
        shutil.copy(ROOT / name, source / name)
    for pattern in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license-files"]:
        for path in ROOT.glob(pattern):
            (source / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, source / path.relative_to(ROOT))
    for folder in PACKAGE_DIRS.values():
        shutil.copytree(ROOT / folder, source / folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    return _build_wheel(source, tmp_path_factory.mktemp("wheel"))


def _build_wheel(source: Path, out: Path) -> Path:
    """The wheel of the project in ``source``, built into ``out`` by this interpreter's setuptools."""
    code = "import sys\nfrom setuptools import build_meta\nprint(build_meta.build_wheel(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(out)], cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out / done.stdout.split()[-1]


def test_the_wheel_holds_only_geopipe_packages_and_every_module(wheel):
    """Every file of the wheel lies under a geopipe_ package or its dist-info, and every module and shipped agent
    of the source tree is in it under its import name."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == set(PACKAGE_DIRS)
    expected = {
        f"{name}/{path.relative_to(ROOT / folder).as_posix()}"
        for name, folder in PACKAGE_DIRS.items()
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sorted(expected - names) == []
    assert "geopipe_agents/pretrained/geopipe_v0_maskable_ppo.zip" in names


STAND_IN = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "stand-in-agents-baselines"
        version = "1.0"
        [tool.setuptools]
        packages = ["agents", "baselines"]
    """,
    "agents/__init__.py": "OWNER = 'stand-in'\n",
    "baselines/__init__.py": "OWNER = 'stand-in'\n",
}


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def test_geopipe_installs_beside_a_distribution_that_owns_agents_and_baselines(wheel, tmp_path):
    """In a fresh venv (dependencies from this interpreter's site-packages), the stand-in and GeoPipe share no file,
    both import, a shipped agent loads, and geopipe-evaluate runs scripted policies and a saved agent from the
    wheel's console script."""
    pytest.importorskip("torch")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=True)  # pip from Python's own bundle, no index
    python = env_dir / "bin" / "python"
    stand_in = tmp_path / "stand_in"
    for name, text in STAND_IN.items():
        (stand_in / name).parent.mkdir(parents=True, exist_ok=True)
        (stand_in / name).write_text(textwrap.dedent(text))
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for target in (_build_wheel(stand_in, tmp_path), wheel):
        _pip(python, str(target))
    records = {
        dist: {line.split(",")[0] for line in next(Path(site).glob(f"{dist}-*.dist-info/RECORD")).read_text().splitlines()}
        for dist in ("stand_in_agents_baselines", "geopipe_gym")
    }
    shared = {path for path in records["stand_in_agents_baselines"] & records["geopipe_gym"] if ".dist-info/" not in path}
    assert shared == set()

    work = tmp_path / "work"  # outside the repository, whose folders agents/ and baselines/ would be importable
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": "", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    check = """
        import agents, baselines, geopipe_agents, geopipe_baselines, geopipe_env, geopipe_evaluation
        assert agents.OWNER == baselines.OWNER == 'stand-in'
        site = {site!r}
        for module in (agents, baselines, geopipe_agents, geopipe_baselines, geopipe_env, geopipe_evaluation):
            assert module.__file__.startswith(site), module.__file__
        print(geopipe_agents.pretrained_path().with_name('small_maskable_ppo.zip'))
    """.format(site=site)
    done = subprocess.run([str(python), "-c", textwrap.dedent(check)], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    agent = done.stdout.strip()
    args = ["--env", "GeoPipe-Small-v0", "--policies", "lcf", agent, "--seeds", "1", "--workers", "1", "--no-plots", "--out", "out"]
    done = subprocess.run([str(env_dir / "bin" / "geopipe-evaluate"), *args], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = (work / "out" / "results.csv").read_text().splitlines()[1:]
    assert sorted(row.split(",")[1] for row in rows) == ["lcf", "small_maskable_ppo"]
