"""Command-line reading of an ``evaluate.py`` results.json, shared by the table scripts in this folder."""

from __future__ import annotations

import json
import sys


def read(argv: list[str] | None, usage: str, max_extra: int = 1) -> tuple[dict, list[str]] | None:
    """``(results, extra arguments)`` from ``argv`` (default ``sys.argv[1:]``): the results.json path, then up to
    ``max_extra`` more; None (after printing ``usage``, or one line saying why) when the count is wrong, ``-h`` or
    ``--help`` is asked, or the file cannot be read as JSON."""
    argv = sys.argv[1:] if argv is None else argv
    if not 1 <= len(argv) <= 1 + max_extra or argv[0] in ("-h", "--help"):
        print(usage)
        return None
    try:
        with open(argv[0]) as f:
            return json.load(f), argv[1:]
    except (OSError, ValueError) as error:
        print(f"{argv[0]}: cannot read an evaluate.py results.json ({error})", file=sys.stderr)
        return None
