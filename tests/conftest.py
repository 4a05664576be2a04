"""How the suite is shared between pytest-xdist workers (`make test` runs two).

Tests are handed out a test file at a time, so a module's fixtures are built once. The files
that use one of the session's shared runs (``tiny_run``: tests/configs/tiny.yaml;
``studies_run``: tests/configs/studies_toy.yaml) form one unit per run, so each run is made
once, on one worker. Units are ordered longest first (the shared runs' files, the other
Snakemake runs, the real-data tests, then the unit tests), so the two workers finish
together: the idle seconds of one (a SLURM job waiting for its status check, a server
starting) are the other's working seconds. Within a unit the cluster tests come first: the
SLURM run starts, and the unit's shared run is made while its jobs wait (test_slurm.py).

xdist's own ``--dist loadgroup`` would do the grouping from ``xdist_group`` marks, but under
pytest 9 it drops them (it renames ``item._nodeid``, which ``item.nodeid`` no longer reads),
so the unit of work is chosen here, by a scheduler that only overrides the scope of a test.

Two workers on two cores means more runnable threads than cores (a worker's torch uses two
threads, as does a two-thread Snakemake job it starts). OpenMP's default of spinning while it
waits then burns the cores the other worker needs: two 2-thread ResNet forward loops side by
side took 15 s each spinning and 5.3 s each with ``OMP_WAIT_POLICY=PASSIVE`` (3.9 / 4.3 s
alone). The policy is set here, before torch loads, for every process the tests start; it
changes when threads sleep, not what they compute.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

TESTS = Path(__file__).resolve().parent
#: Session-scoped Snakemake runs (tests/workflow/conftest.py): each is the unit of work of
#: every file under tests/workflow that names it (a file names at most one).
SHARED_RUN_UNITS = ("tiny_run", "studies_run")


@functools.cache
def unit_of_file(relative_path: str) -> str:
    """The work unit of a test file (path relative to the rootdir, as in a node id)."""
    path = TESTS.parent / relative_path
    if path.is_file() and path.parent.name == "workflow":
        text = path.read_text()
        for unit in SHARED_RUN_UNITS:
            if unit in text:
                return unit
    return relative_path


def _unit(item: pytest.Item) -> str:
    return unit_of_file(item.nodeid.split("::", 1)[0])


def _weight(items: list[pytest.Item]) -> int:
    """Rough cost class of a unit: higher runs first."""
    if _unit(items[0]) in SHARED_RUN_UNITS:
        return 3
    markers = {marker.name for item in items for marker in item.iter_markers()}
    if markers & {"workflow", "cluster"}:
        return 2
    return 1 if "realdata" in markers else 0


#: Unit-test files that train networks, compile them, export them or run the command-line
#: tool in subprocesses: three quarters of the unit tests' time. Their tests are marked
#: ``slow``: `make test` runs them, the edit loop (`make test-fast`) leaves them out.
SLOW_FILES = frozenset(
    {
        "tests/ssl/test_stepper.py",
        "tests/ssl/test_stepper_fused.py",
        "tests/ssl/test_stepper_cuda.py",
        "tests/ssl/test_fused.py",
        "tests/ssl/test_compiling.py",
        "tests/ssl/test_train.py",
        "tests/ssl/test_flops.py",
        "tests/test_epoch_eval.py",
        "tests/test_bench_streams.py",
        "tests/test_bench_compile.py",
        "tests/test_bench_random_init.py",
        "tests/test_bench_train.py",
        "tests/test_profile_step.py",
        "tests/test_imagenet.py",
        "tests/deploy/test_fuzz_images.py",
        "tests/deploy/test_cli.py",
        "tests/deploy/test_mlflow_model.py",
        "tests/deploy/test_export.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    """A renamed or deleted test file must leave ``SLOW_FILES`` too, or its mark is lost."""
    missing = sorted(name for name in SLOW_FILES if not (TESTS.parent / name).is_file())
    if missing:
        raise pytest.UsageError(f"tests/conftest.py SLOW_FILES names missing files: {missing}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each unit's tests together, longest units first (xdist hands them out in this order).

    Without xdist only the order changes, which no test depends on. Tests of
    ``SLOW_FILES`` get the ``slow`` mark here.
    """
    for item in items:
        if item.nodeid.split("::", 1)[0] in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        units.setdefault(_unit(item), []).append(item)
    ordered = sorted(units.values(), key=lambda unit_items: -_weight(unit_items))  # stable
    items[:] = [
        item for unit_items in ordered for item in sorted(unit_items, key=_cluster_tests_first)
    ]


def _cluster_tests_first(item: pytest.Item) -> bool:
    """Sort key: False (first in its unit) for a cluster test. The SLURM run starts, then the
    unit's shared run is made while the cluster's jobs wait for their status checks."""
    return item.get_closest_marker("cluster") is None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduler, with a test's scope being its file's unit (see above)."""
    from xdist.scheduler import LoadScopeScheduling

    class FileUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_file(nodeid.split("::", 1)[0])

    return FileUnitScheduling(config, log)


@pytest.fixture(autouse=True)
def _tracking_uri_stays_in_its_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mlflow.set_tracking_uri`` (the registering tests, ``register_package``) also sets
    ``$MLFLOW_TRACKING_URI``, which every later store lookup of the worker then follows
    (``default_tracking_uri``): each test starts without it, and its own setting is undone."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
