"""Command-line reading of an ``evaluate.py`` results.json, shared by the table scripts in this folder."""

from __future__ import annotations

import json
import sys


def read(argv: list[str] | None, usage: str, max_extra: int = 1) -> tuple[dict, list[str]] | None:
    """``(results, extra arguments)`` from ``argv`` (default ``sys.argv[1:]``): the results.json path, then up to
    ``max_extra`` more; None (after printing ``usage``) when the count is wrong."""
    argv = sys.argv[1:] if argv is None else argv
    if not 1 <= len(argv) <= 1 + max_extra:
        print(usage)
        return None
    with open(argv[0]) as f:
        return json.load(f), argv[1:]
