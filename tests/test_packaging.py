"""Packaging: one version everywhere, console scripts that resolve, data that ships, and a base install without torch."""

from __future__ import annotations

import fnmatch
import importlib
import json
import re
import tarfile
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import readme_link_targets

import geopipe_env
from geopipe_agents.loading import TRAIN_EXTRA_INSTALL, TRAIN_EXTRA_MODULES
from geopipe_baselines import policy_names

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Import name -> its folder in the source tree (agents/ installs as geopipe_agents, baselines/ as geopipe_baselines).
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]
PACKAGES = tuple(PACKAGE_DIRS)
DISTRIBUTION = PYPROJECT["project"]["name"]
# A pip requirement with extras, as written in an install hint: pip install 'name[extra]'.
EXTRAS_REQUIREMENT = re.compile(r"\bpip install [\"']?([A-Za-z0-9][A-Za-z0-9._-]*)\[")


def test_version_has_one_source_that_the_citation_and_changelog_repeat():
    """pyproject reads the version from geopipe_env.__version__; CITATION.cff and CHANGELOG.md name the same one."""
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "geopipe_env.__version__"}
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["title"] == "GeoPipe" and str(citation["version"]) == geopipe_env.__version__
    assert f"## [{geopipe_env.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


def test_the_distribution_name_is_used_by_every_install_hint():
    """The extras refer to the distribution by its own name, and every ``pip install 'name[extra]'`` in the code,
    README and docs names it (the import names differ: geopipe_env, geopipe_agents, geopipe_baselines)."""
    assert DISTRIBUTION == "geopipe-gym"
    for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items():
        for requirement in requirements:
            if requirement.startswith("geopipe"):
                assert requirement.startswith(f"{DISTRIBUTION}["), (extra, requirement)
    assert TRAIN_EXTRA_INSTALL == f"pip install '{DISTRIBUTION}[train]' (from a source checkout: pip install -e '.[train]')"
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(p for package in PACKAGES for p in (ROOT / PACKAGE_DIRS[package]).rglob("*.py"))]
    named = {(path.name, name) for path in files for name in EXTRAS_REQUIREMENT.findall(path.read_text())}
    assert named and {name for _, name in named} == {DISTRIBUTION}, sorted(named)


def test_the_cpu_torch_command_asks_for_the_torch_the_project_accepts():
    """README and getting-started tell CPU-only users to take PyTorch's CPU build within the [train] extra's torch
    range (which the CI pin, 2.13.0, satisfies), so the install that follows keeps it; neither tells anyone to pin
    torch==2.13.0, which on the public index is the CUDA build."""
    specifiers = pytest.importorskip("packaging.specifiers")
    requirement = next(r for r in PYPROJECT["project"]["optional-dependencies"]["train"] if r.startswith("torch"))
    spec = requirement.removeprefix("torch")
    assert specifiers.SpecifierSet(spec).contains("2.13.0")
    command = f'pip install "torch{spec}" --index-url https://download.pytorch.org/whl/cpu'
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        text = page.read_text()
        assert command in text and f"`{spec}`" in text and "pip install torch==" not in text, page.name
        # Read top down, the CPU build comes before any install that would pull torch from the public index.
        assert text.index(command) < text.index('pip install -e ".[train]"'), page.name


def test_license_is_an_spdx_string_and_its_files_exist():
    """The licence is an SPDX expression (not a table), and every licence file it names exists."""
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert "MIT License" in (ROOT / "LICENSE").read_text() and "GeoPipe contributors" in (ROOT / "LICENSE").read_text()
    for pattern in project["license-files"]:
        assert list(ROOT.glob(pattern)), pattern


def test_base_dependencies_leave_out_torch_and_sb3():
    """The base install is the env alone; torch and SB3 come with the [train] extra."""
    base = " ".join(PYPROJECT["project"]["dependencies"])
    train = " ".join(PYPROJECT["project"]["optional-dependencies"]["train"])
    for name in ("torch", "stable-baselines3", "sb3-contrib", "tensorboard"):
        assert name not in base and name in train


@pytest.mark.parametrize("name", ["geopipe-evaluate", "geopipe-train"])
def test_console_scripts_resolve_to_main_and_print_help(name, capsys):
    """Each console script names a main(argv, prog) whose --help exits 0 under the script's name."""
    module_name, _, attr = PYPROJECT["project"]["scripts"][name].partition(":")
    main = getattr(importlib.import_module(module_name), attr)
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith(f"usage: {name}")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_data_file_ships_as_package_data(package):
    """Each non-Python file inside a package (hyperparameters, the shipped agent, scenarios, py.typed) matches a
    package-data pattern, so an installed copy has it."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"][package]
    folder = ROOT / PACKAGE_DIRS[package]
    assert (folder / "py.typed").is_file()
    files = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"]
    assert files
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert unshipped == []


def _run(code: str, cwd: Path, block_train_extra: bool) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter on this checkout, optionally as if torch, SB3 and sb3-contrib were absent."""
    prelude = f"import sys\nfor _name in {TRAIN_EXTRA_MODULES!r}:\n    sys.modules[_name] = None\n" if block_train_extra else ""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_env_runs_and_renders_without_importing_torch(tmp_path):
    """Making and stepping an env imports no torch, SB3 or plotting library, even where they are installed;
    rendering to an RGB array adds matplotlib alone."""
    code = f"""
        import sys
        import gymnasium as gym
        import numpy as np
        import geopipe_env
        heavy = {(*TRAIN_EXTRA_MODULES, "matplotlib")!r}
        env = gym.make("GeoPipe-v0", render_mode="rgb_array")
        obs, info = env.reset(seed=0)
        env.step(int(np.flatnonzero(info["action_mask"])[0]))
        print(sorted(m for m in heavy if m in sys.modules))
        assert env.render().ndim == 3
        print(sorted(m for m in heavy if m in sys.modules))
    """
    result = _run(code, tmp_path, block_train_extra=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "['matplotlib']"]


def test_without_the_train_extra_evaluation_runs_and_training_says_what_to_install(tmp_path):
    """Without torch, scripted policies evaluate (the shipped agent left out with a note), a .zip policy and
    training stop with one line naming the [train] extra, and no results are written."""
    code = """
        import contextlib, io, json
        from geopipe_evaluation import evaluate_cli
        from geopipe_agents import train_cli
        messages = {}
        for name, main, argv in (
            ("default", evaluate_cli.main, ["--env", "GeoPipe-Toy-v0", "--seeds", "1", "--workers", "1", "--no-plots", "--out", "ok"]),
            ("agent", evaluate_cli.main, ["--policies", "lcf", "agent.zip", "--out", "bad"]),
            ("train", train_cli.main, ["--log-dir", "runs"]),
        ):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    messages[name] = (main(argv), err.getvalue())
                except SystemExit as exc:
                    messages[name] = (exc.code, err.getvalue())
        print(json.dumps(messages))
    """
    (tmp_path / "agent.zip").write_bytes(b"PK")
    result = _run(code, tmp_path, block_train_extra=True)
    assert result.returncode == 0, result.stderr
    messages = json.loads(result.stdout)
    code, note = messages["default"]
    assert code == 0 and "geopipe_v0_maskable_ppo.zip is left out" in note and f"{DISTRIBUTION}[train]" in note
    rows = (tmp_path / "ok" / "results.csv").read_text().splitlines()[1:]
    assert sorted(row.split(",")[1] for row in rows) == sorted(policy_names(include_aliases=False))
    for name in ("agent", "train"):
        code, message = messages[name]
        assert code == 2 and message.count("\n") == 1 and "[train] extra" in message and f"{DISTRIBUTION}[train]" in message, message
    assert not (tmp_path / "bad").exists() and not (tmp_path / "runs").exists()


# Generated by benchmarks/regimes.py, not part of the source (.gitignore).
GENERATED = ("benchmarks/results/regimes/scenarios/",)
TOP_LEVEL_FILES = ("README.md", "LICENSE", "CHANGELOG.md", "CITATION.cff", "pyproject.toml", "mkdocs.yml", "evaluate.py", "train.py")


def test_the_source_archive_holds_what_its_tests_docs_and_readme_use(tmp_path):
    """The sdist carries tests/ (conftest.py and data/ with it), docs/, benchmarks/ and the top-level scripts, so
    that an unpacked archive runs its own suite and builds its docs, and every README link resolves inside it."""
    pytest.importorskip("setuptools.build_meta")
    code = "import sys\nfrom setuptools import build_meta\nprint(build_meta.build_sdist(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    archive = tmp_path / done.stdout.split()[-1]
    assert archive.name == f"{DISTRIBUTION.replace('-', '_')}-{geopipe_env.__version__}.tar.gz"
    with tarfile.open(archive) as tar:
        members = {name.partition("/")[2] for name in tar.getnames()}
    expected = {
        path.relative_to(ROOT).as_posix()
        for folder in ("tests", "docs", "benchmarks")
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    expected = {name for name in expected if not name.startswith(GENERATED)} | set(TOP_LEVEL_FILES)
    assert {"tests/conftest.py", "tests/data/golden_metrics.json", "docs/index.md"} <= expected
    assert sorted(expected - members) == []
    assert sorted(set(readme_link_targets()) - members) == []
