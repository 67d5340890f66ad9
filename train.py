"""``python train.py``: the ``geopipe-train`` command from a source checkout (see ``geopipe_agents.train_cli``)."""

from __future__ import annotations

import sys

from geopipe_agents import train_cli


def main(argv: list[str] | None = None) -> int:
    """Run ``geopipe-train`` with ``argv``, recording the command as ``python train.py ...``."""
    return train_cli.main(argv, prog="train.py")


if __name__ == "__main__":
    sys.exit(main())
