"""Rule resources that depend on the attempt: a job killed for memory retries with more.

Imported by the rule files (``workflow/rules/*.smk``); light on purpose (no torch), since every
Snakemake start parses them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def mem_mb_by_attempt(base_mb: int) -> Callable[[Any, int], int]:
    """``mem_mb`` of a rule: ``base_mb`` on the first attempt, ``k * base_mb`` on attempt k.

    A SLURM or Kubernetes job that ran out of memory is retried (the rule's ``retries:``) with
    twice, then three times the memory instead of failing the same way again.

    Parameters
    ----------
    base_mb : int
        Memory of the first attempt, in MB.

    Returns
    -------
    callable
        ``(wildcards, attempt) -> int``, the signature Snakemake calls resource functions with.

    Raises
    ------
    ValueError
        If ``base_mb`` is not a positive integer.
    """
    if isinstance(base_mb, bool) or not isinstance(base_mb, int) or base_mb < 1:
        raise ValueError(f"base_mb must be a positive integer, got {base_mb!r}")

    def mem_mb(wildcards: Any, attempt: int) -> int:
        return base_mb * max(1, int(attempt))

    return mem_mb
