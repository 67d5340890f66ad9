"""Small helpers shared by the command-line tools (``geopipe-evaluate``, ``geopipe-train``)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from typing import NoReturn


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit code 2 (no usage block above them)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


DISTRIBUTION = "geopipe-gym"  # the name pip installs GeoPipe under (pyproject.toml)


def install_hint(extra: str) -> str:
    """How to install one of GeoPipe's extras, from the package index and from a source checkout (which is how it
    is installed while nothing is published)."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (from a source checkout: pip install -e '.[{extra}]')"


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers >= ``minimum``, with a clear error otherwise."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text}")
        return value

    parse.__name__ = f"int>={minimum}"  # argparse names the type in its messages
    return parse


def command_line(prog: str, argv: Sequence[str]) -> str:
    """The command as typed, for a run's records: ``python train.py ...`` for a script, ``geopipe-train ...`` for
    a console script."""
    head = ["python", prog] if prog.endswith(".py") else [prog]
    return shlex.join([*head, *argv])
