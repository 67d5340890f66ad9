"""Layer 1: the process's bounded caches, in one place.

Every cache that outlives an episode is a :class:`ProcessCache`: a least-recently-used map of bounded size
(``cachetools.LRUCache``: when full it drops the entry used longest ago, not everything), named, counting its hits
and misses, and registered here, so that :func:`clear_all` forgets every one (the tests use it to compare a process
with warm caches against a fresh one) and :func:`stats` reports them (the speed benchmarks print it). A cache holds
values that are pure functions of their keys, so what it holds never changes a result, only how soon it comes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cachetools import LRUCache


class ProcessCache(LRUCache):
    """A named, bounded LRU cache of the process, with hit and miss counters (:meth:`get_or`)."""

    def __init__(self, name: str, maxsize: int) -> None:
        super().__init__(maxsize)
        self.name = name
        self.hits = 0
        self.misses = 0
        _REGISTRY[name] = self

    def get_or(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The value cached at ``key``, or ``compute()`` stored there (counted as a hit or a miss)."""
        try:
            value = self[key]
        except KeyError:
            self.misses += 1
            value = self[key] = compute()
            return value
        self.hits += 1
        return value

    def clear_counts(self) -> None:
        self.hits = self.misses = 0


_REGISTRY: dict[str, ProcessCache] = {}


def clear_all() -> None:
    """Forget every process cache and its counts: the process behaves as a fresh one (results never depend on it)."""
    for cache in _REGISTRY.values():
        cache.clear()
        cache.clear_counts()


def stats() -> dict[str, tuple[int, int, int, int]]:
    """Per process cache: ``(hits, misses, entries, maxsize)``."""
    return {name: (c.hits, c.misses, len(c), int(c.maxsize)) for name, c in sorted(_REGISTRY.items())}
