"""Layer 1: how the package compiles its kernels, and where it keeps their machine code.

Every compiled function of the package is decorated with :data:`jit` (numba's ``njit`` with its disk cache). The
machine code is kept once per user and machine, in a folder named by the package version, numba's version and a
hash of the compiled sources (:data:`COMPILED_SOURCES`): every virtual environment, process and Ray worker that
runs the same sources loads the same code, and an edit to any of them (a kernel, a formula or a constant a kernel
reads) gives a new folder, so no process ever runs stale machine code. The folder is
``$GEOPIPE_CACHE_DIR`` if set, else ``$NUMBA_CACHE_DIR/geopipe`` if that is set, else the user's cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux and macOS, ``%LOCALAPPDATA%`` on Windows) under ``geopipe``. Where
no such folder is writable, numba's own cache places are used.

``tests/test_compiled.py`` checks that :data:`COMPILED_SOURCES` lists every module that compiles code and every
module of the package that such a module imports.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numba
from numba import njit

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # geopipe_env/
# The package's modules whose code is compiled, and those whose constants or functions compiled code reads: their
# text keys the cache folder. Paths relative to the package.
COMPILED_SOURCES = (
    "base/compiled.py",
    "base/tables.py",
    "base/units.py",
    "physics/energy.py",
    "physics/network.py",
    "physics/pipeline.py",
    "physics/schedule.py",
    "simulation/sim_kernels.py",
    "simulation/layout_table.py",
    "decision/candidate_kernels.py",
    "decision/observation.py",
)


def sources_hash(package_dir: Path = PACKAGE_DIR, sources: tuple[str, ...] = COMPILED_SOURCES) -> str:
    """A short hash of the compiled sources' text (and of numba's and Python's versions, which the code also
    depends on)."""
    digest = hashlib.sha256(f"numba {numba.__version__} python {sys.version_info[:2]}".encode())
    for name in sources:
        digest.update(name.encode())
        digest.update((package_dir / name).read_bytes())
    return digest.hexdigest()[:16]


def _user_cache_root() -> Path:
    """Where this user's caches go on this platform."""
    if os.environ.get("GEOPIPE_CACHE_DIR"):
        return Path(os.environ["GEOPIPE_CACHE_DIR"])
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]) / "geopipe"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "geopipe" / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "geopipe"


def _version() -> str:
    from geopipe_env import __version__  # the package's own version, read without importing its env

    return __version__


def cache_dir() -> Path:
    """The folder of this package version's and these sources' machine code."""
    return _user_cache_root() / "kernels" / f"{_version()}-{sources_hash()}"


def _install_locator() -> None:
    """Make numba keep the package's compiled functions in :func:`cache_dir` (its first cache locator)."""
    from numba.core import caching

    class PackageCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        """The package's functions, cached in one folder per module under :func:`cache_dir`."""

        root: Path | None = None

        def __init__(self, py_func, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            relative = Path(py_file).resolve().relative_to(PACKAGE_DIR)
            self._cache_path = str(self.root / "_".join(relative.with_suffix("").parts))

        def get_cache_path(self) -> str:
            return self._cache_path

        @classmethod
        def from_function(cls, py_func, py_file: str):
            if cls.root is None or not Path(py_file).resolve().is_relative_to(PACKAGE_DIR):
                return None
            return super().from_function(py_func, py_file)

    try:
        root = cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        return  # not writable: numba's own locators apply
    PackageCacheLocator.root = root
    caching.CacheImpl._locator_classes.insert(0, PackageCacheLocator)


_install_locator()

jit = njit(cache=True)  # the decorator of every compiled function of the package
# The schedule executor's inner loops: numpy's error model, which drops the zero checks around each integer division
# and modulo (they decode op codes several times per op; the loops divide only by counts that are never zero).
# It changes no result of code that raised nothing, and runs the executor 1.2x as fast.
jit_unchecked = njit(cache=True, error_model="numpy")
# Small helpers of the executor's event loop, inlined into it: a call to a compiled function that takes arrays
# counts references to each of them (two atomic operations an array), which cost about a quarter of the loop's time.
jit_inline = njit(cache=True, error_model="numpy", inline="always")


@jit
def pairwise_sum(values, count):
    """``values[:count].sum()`` as numpy computes it (pairwise: blocks of 8 accumulators, halves past 128), so that
    compiled code reproduces numpy's sums bit for bit."""
    if count < 8:
        total = 0.0
        for i in range(count):
            total += values[i]
        return total
    if count <= 128:
        r0, r1, r2, r3 = values[0], values[1], values[2], values[3]
        r4, r5, r6, r7 = values[4], values[5], values[6], values[7]
        i = 8
        while i < count - count % 8:
            r0 += values[i]
            r1 += values[i + 1]
            r2 += values[i + 2]
            r3 += values[i + 3]
            r4 += values[i + 4]
            r5 += values[i + 5]
            r6 += values[i + 6]
            r7 += values[i + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < count:
            total += values[i]
            i += 1
        return total
    half = count // 2
    half -= half % 8
    return pairwise_sum(values, half) + pairwise_sum(values[half:], count - half)
