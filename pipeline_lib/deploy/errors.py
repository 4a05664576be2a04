"""The deploy package's one error type (its own module so that every reader can raise it)."""

from __future__ import annotations


class PackageError(ValueError):
    """A package cannot be built or read; the message names the file and what to do."""
