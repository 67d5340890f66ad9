"""``python evaluate.py``: the ``geopipe-evaluate`` command from a source checkout (see ``geopipe_evaluation.evaluate_cli``)."""

from __future__ import annotations

import sys

from geopipe_evaluation import evaluate_cli


def main(argv: list[str] | None = None) -> int:
    """Run ``geopipe-evaluate`` with ``argv``, recording the command as ``python evaluate.py ...``."""
    return evaluate_cli.main(argv, prog="evaluate.py")


if __name__ == "__main__":
    sys.exit(main())
