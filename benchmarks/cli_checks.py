"""Command-line checks the benchmark scripts share (a sibling module: the scripts import it
as ``cli_checks``, run from benchmarks/ or its parent)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable


def at_least_one(
    parser: argparse.ArgumentParser, args: argparse.Namespace, names: Iterable[str]
) -> argparse.Namespace:
    """``args``, after a usage error (``parser.error``, exit status 2) naming the first
    option of ``names`` (destination names) below 1: a count or size of 0 would time
    nothing."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args
