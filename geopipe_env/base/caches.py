"""Layer 1: the process's bounded caches, in one place.

Every cache that outlives an episode is a :class:`BoundedDict`: a dict that, when a new entry would pass its size,
first drops its oldest entry (not everything, as an emptied cache would). A hit is a plain ``dict.get``, done in C:
``cachetools.LRUCache``, whose hits run in Python and move the entry to the end, cost about 1 µs a lookup, which at a
few lookups a decision made GeoPipe-Abundant-v0 8% slower (measured side by side); oldest-out rather than
least-recently-used costs a few more misses and no time on hits. The caches of the process are
:class:`ProcessCache` s: named, counting their hits and misses, and registered here, so that :func:`clear_all`
forgets every one (the tests use it to compare a process with warm caches against a fresh one) and :func:`stats`
reports them (the speed benchmarks print it). A cache holds values that are pure functions of their keys, so what it
holds never changes a result, only how soon it comes.

A cache may also keep what it computes on disk (:class:`DiskStore`, a ``diskcache.Cache``): with
``GEOPIPE_TIMING_STORE=on`` (or a folder's path) the schedule executor's timings, which cost about a millisecond
each, are shared by every process on the machine that runs the same code (the workers of a vector env, later runs
on the same seeds). It is off by default: on a process's first pass it costs about 15% (each new timing is written,
each miss read), and it repays that only where processes meet the same pipelines. The store sits beside the
compiled kernels, in a folder named by the package version and the hash of the compiled sources
(``compiled.cache_dir``), so an edit to the executor or a formula it reads starts a new store and no stale timing
is ever read.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import pickle
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import diskcache

STORE_SIZE_LIMIT_BYTES = 1 << 28  # 256 MiB on disk, then the oldest stored go first
STORE_TIMEOUT_S = 1.0  # a store busy with another process's write for longer is passed over (a miss)
STORE_BATCH = 64  # values written to the store in one transaction (one write costs about 300 µs alone, 36 µs so)
_STORE_ERRORS = (OSError, sqlite3.Error, diskcache.Timeout)


_STORES_PAUSED = threading.Event()


@contextlib.contextmanager
def stores_paused() -> Iterator[None]:
    """Inside, every disk store answers nothing and keeps nothing: for work no user asked for (the env's warm-up
    episodes), whose timings should neither come from nor go to the machine's store."""
    _STORES_PAUSED.set()
    try:
        yield
    finally:
        _STORES_PAUSED.clear()


class DiskStore:
    """A key-value store on disk that several processes share (``diskcache.Cache``), opened at its first use.

    A key is stored as the SHA-256 digest of its pickle (a short fixed-size key reads and writes several times
    faster than the pickled key itself), and new values are written :data:`STORE_BATCH` at a time in one
    transaction (and at the process's exit). Any failure to open, read or write it (a read-only disk, a lock held
    too long) counts as a miss: the caller computes the value, so the store can slow nothing down by more than its
    own time and never changes a result."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cache = None
        self._broken = False
        self._pending: dict[bytes, Any] = {}

    def folder(self) -> Path | None:
        """Where the store lives: beside the compiled kernels with ``GEOPIPE_TIMING_STORE=on``, under the path it
        names otherwise; None (no store) when it is unset, empty or ``off``."""
        setting = os.environ.get("GEOPIPE_TIMING_STORE", "")
        if setting.lower() in ("", "0", "off", "no", "false"):
            return None
        if setting.lower() not in ("1", "on", "yes", "true"):
            return Path(setting) / self.name
        from geopipe_env.base.compiled import cache_dir

        kernels = cache_dir()
        return kernels.parent.parent / self.name / kernels.name

    def _open(self):
        if self._cache is None and not self._broken:
            folder = self.folder()
            if folder is None:
                self._broken = True
                return None
            try:
                self._cache = diskcache.Cache(str(folder), size_limit=STORE_SIZE_LIMIT_BYTES, timeout=STORE_TIMEOUT_S,
                                              eviction_policy="least-recently-stored")
                atexit.register(self.flush)
            except _STORE_ERRORS:
                self._broken = True
        return self._cache

    @staticmethod
    def _digest(key: Any) -> bytes:
        return hashlib.sha256(pickle.dumps(key, protocol=5)).digest()

    def get(self, key: Any) -> Any:
        """The value stored at ``key``, or None."""
        if _STORES_PAUSED.is_set():
            return None
        cache = self._open()
        if cache is None:
            return None
        digest = self._digest(key)
        value = self._pending.get(digest)
        if value is not None:
            return value
        try:
            return cache.get(digest)
        except _STORE_ERRORS:
            return None

    def set(self, key: Any, value: Any) -> None:
        """Keep ``value`` at ``key`` (written with the next batch)."""
        if not _STORES_PAUSED.is_set() and self._open() is not None:
            self._pending[self._digest(key)] = value
            if len(self._pending) >= STORE_BATCH:
                self.flush()

    def flush(self) -> None:
        """Write the values not yet written, in one transaction."""
        cache, pending = self._cache, self._pending
        self._pending = {}
        if cache is None or not pending:
            return
        try:
            with cache.transact():
                for digest, value in pending.items():
                    cache.set(digest, value)
        except _STORE_ERRORS:
            pass


class BoundedDict(dict):
    """A dict of at most ``maxsize`` entries: setting a new key in a full one first drops the oldest entry. Reads are
    the dict's own."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = int(maxsize)

    def __setitem__(self, key: Any, value: Any) -> None:
        maxsize = self.__dict__.get("maxsize")  # absent while unpickling, which sets the items first
        if maxsize is not None and len(self) >= maxsize and key not in self:
            del self[next(iter(self))]
        super().__setitem__(key, value)


class ProcessCache(BoundedDict):
    """A named :class:`BoundedDict` of the process, with hit and miss counters (:meth:`get_or`). Values are never None."""

    def __init__(self, name: str, maxsize: int, store: DiskStore | None = None) -> None:
        super().__init__(maxsize)
        self.name = name
        self.store = store
        self.hits = self.misses = self.store_hits = 0
        _REGISTRY[name] = self

    def get_or(self, key: Any, compute: Callable[..., Any], *args: Any, persist: bool = False) -> Any:
        """The value cached at ``key``, or ``compute(*args)`` stored there (counted as a hit or a miss). With
        ``persist`` (for values that cost far more to compute than a disk read) a miss asks the cache's
        :class:`DiskStore` first, and keeps what it computes there."""
        value = self.get(key)
        if value is not None:
            self.hits += 1
            return value
        self.misses += 1
        if persist and self.store is not None:
            value = self.store.get(key)
            if value is not None:
                self.store_hits += 1
        if value is None:
            value = compute(*args)
            if persist and self.store is not None:
                self.store.set(key, value)
        self[key] = value
        return value

    def clear_counts(self) -> None:
        self.hits = self.misses = self.store_hits = 0


_REGISTRY: dict[str, ProcessCache] = {}


def clear_all() -> None:
    """Forget every process cache and its counts: the process behaves as a fresh one (results never depend on it)."""
    for cache in _REGISTRY.values():
        cache.clear()
        cache.clear_counts()


def stats() -> dict[str, tuple[int, int, int, int, int]]:
    """Per process cache: ``(hits, misses, entries, maxsize, misses its disk store answered)``."""
    return {name: (c.hits, c.misses, len(c), int(c.maxsize), c.store_hits) for name, c in sorted(_REGISTRY.items())}
