"""Rule resources that grow with the attempt (``pipeline_lib.config.resources``)."""

from __future__ import annotations

import inspect

import pytest

from pipeline_lib.config.resources import mem_mb_by_attempt


def test_memory_grows_with_the_attempt() -> None:
    mem_mb = mem_mb_by_attempt(12000)
    assert [mem_mb({}, attempt) for attempt in (1, 2, 3)] == [12000, 24000, 36000]
    # Snakemake passes resource-function arguments by name.
    assert list(inspect.signature(mem_mb).parameters) == ["wildcards", "attempt"]


@pytest.mark.parametrize("base", [0, -5, 1.5, True, "8000"])
def test_bad_base_memory_raises(base: object) -> None:
    with pytest.raises(ValueError, match="base_mb"):
        mem_mb_by_attempt(base)  # type: ignore[arg-type]
