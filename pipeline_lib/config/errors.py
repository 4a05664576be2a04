"""The error every config check raises: a value the pipeline cannot run with."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A config value the pipeline cannot run with."""
