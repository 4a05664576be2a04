"""How the planner reads a dry run's jobs from Snakemake's log events (planning/jobs.py).

The real dry run is read in tests/test_planner.py and tests/workflow/test_dry_run.py; here the
events are built by hand, to pin the order of the jobs and the message a Snakemake that
changed its events gets.
"""

from __future__ import annotations

import logging

import pytest
import snakemake
from snakemake_interface_logger_plugins.common import LogEvent

from pipeline_lib.planning.jobs import DryRunReport, Job, PlanError


def event(kind: LogEvent, **fields: object) -> logging.LogRecord:
    """A record as Snakemake logs it: the event and its fields as attributes."""
    return logging.makeLogRecord({"msg": "", "levelno": logging.INFO, "event": kind, **fields})


def job_info(
    rule: str, inputs: list[str], outputs: list[str], gpu: int | None = None, **wildcards: str
):
    resources = {} if gpu is None else {"gpu": gpu}
    return event(
        LogEvent.JOB_INFO,
        rule_name=rule,
        wildcards=wildcards,
        input=inputs,
        output=outputs,
        resources=resources,
    )


def test_jobs_come_by_level_then_rule_wildcards_and_outputs() -> None:
    report = DryRunReport()
    # Logged in an order of the scheduler's: the planner's order must not depend on it.
    for record in (
        job_info("all", ["r/b/score.json", "r/a/score.json"], []),
        job_info("score", ["r/b/split.npz"], ["r/b/score.json"], inlier="b"),
        job_info("split", [], ["r/b/split.npz"], inlier="b"),
        job_info("score", ["r/a/split.npz"], ["r/a/score.json"], gpu=1, inlier="a"),
        job_info("split", [], ["r/a/split.npz"], inlier="a"),
        job_info("init", [], ["r/store.json"]),
        event(LogEvent.RUN_INFO, stats={"init": 1, "split": 2, "score": 2, "all": 1, "total": 6}),
        event(LogEvent.RUN_INFO, stats={"ignored": 1}),  # logged again after the jobs
    ):
        report.emit(record)
    assert report.jobs() == [
        Job("init", {}, ("r/store.json",)),
        Job("split", {"inlier": "a"}, ("r/a/split.npz",)),
        Job("split", {"inlier": "b"}, ("r/b/split.npz",)),
        Job("score", {"inlier": "a"}, ("r/a/score.json",), gpus=1),
        Job("score", {"inlier": "b"}, ("r/b/score.json",)),
        Job("all", {}, ()),
    ]
    assert report.stats() == {"init": 1, "split": 2, "score": 2, "all": 1}


def test_a_snakemake_whose_events_changed_is_named_with_its_version() -> None:
    """The planner reads the JOB_INFO and RUN_INFO events of the logger-plugin interface; a
    Snakemake that renames a field or stops sending one fails here with its version."""
    report = DryRunReport()
    report.emit(event(LogEvent.JOB_INFO, rule_name="split", wildcards={}, input=[], resources={}))
    version = f"Snakemake {snakemake.__version__}'s dry run reported"
    with pytest.raises(PlanError, match=rf"{version} a job without output \(a JOB_INFO event\)"):
        report.jobs()
    with pytest.raises(PlanError, match=rf"{version} no job stats \(a RUN_INFO event"):
        report.stats()
