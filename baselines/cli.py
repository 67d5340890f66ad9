"""Small helpers shared by the command-line tools (``evaluate.py``, ``train.py``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers >= ``minimum``, with a clear error otherwise."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text}")
        return value

    parse.__name__ = f"int>={minimum}"  # argparse names the type in its messages
    return parse
