"""How the suite is shared between pytest-xdist workers (`make test` runs two).

Tests are handed out a test file at a time (``--dist loadgroup``: each file is one group), so
a module's fixtures are built once. The files that use the session's ``tiny_run`` (one
Snakemake run of tests/configs/tiny.yaml, about 100 s) form one group, so that run is made
once, on one worker. Groups are ordered longest first (that tiny-run group, the other
Snakemake runs, the real-data tests, then the unit tests), so the two workers finish
together: the idle seconds of one (a SLURM job waiting for its status check, a server
starting) are the other's working seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

#: Group of every test whose file uses the session-scoped ``tiny_run`` fixture.
TINY_RUN_GROUP = "tiny_run"


def _group(item: pytest.Item) -> str:
    if "tiny_run" in getattr(item, "fixturenames", ()):
        return TINY_RUN_GROUP
    return Path(str(item.path)).relative_to(Path(__file__).parent).as_posix()


def _weight(items: list[pytest.Item]) -> int:
    """Rough cost class of a group: higher runs first."""
    markers = {marker.name for item in items for marker in item.iter_markers()}
    if any(_group(item) == TINY_RUN_GROUP for item in items):
        return 3
    if markers & {"workflow", "cluster"}:
        return 2
    return 1 if "realdata" in markers else 0


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """One xdist group per test file (the tiny run's users share one), longest groups first.

    Without xdist the groups are unused and only the order changes, which no test depends on.
    """
    by_file: dict[Path, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(Path(str(item.path)), []).append(item)
    groups: dict[str, list[pytest.Item]] = {}
    for file_items in by_file.values():
        # A file with one tiny_run user goes whole into the tiny-run group.
        name = (
            TINY_RUN_GROUP
            if any(_group(item) == TINY_RUN_GROUP for item in file_items)
            else _group(file_items[0])
        )
        groups.setdefault(name, []).extend(file_items)
    ordered = sorted(groups.items(), key=lambda entry: -_weight(entry[1]))  # stable
    items[:] = [item for _, group_items in ordered for item in group_items]
    for name, group_items in ordered:
        for item in group_items:
            item.add_marker(pytest.mark.xdist_group(name))
