"""The jobs of a config, read from the DAG Snakemake itself builds (no text is parsed).

The workflow runs through Snakemake's public API (:class:`snakemake.api.SnakemakeApi`) as
``snakemake --dry-run --forceall`` runs it: nothing is executed, every job of the DAG is a job
the planner costs, and the per-rule counts are the dry run's own job stats. The dry run tells
its jobs through the log events every logger plugin receives
(:class:`snakemake_interface_logger_plugins.common.LogEvent`): one ``JOB_INFO`` per job (rule,
wildcards, input and output files) and ``RUN_INFO`` with the job stats. ``DAGApi`` has no
method that returns the DAG itself.
"""

from __future__ import annotations

import contextlib
import graphlib
import io
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class PlanError(RuntimeError):
    """Snakemake could not build the config's DAG, or its counts disagree with its jobs."""


@dataclass(frozen=True)
class Job:
    """One job of the DAG: its rule, wildcards and output paths (relative to the workdir),
    and the GPUs it asks for (its rule's ``gpu`` resource; a job without one uses the CPU)."""

    rule: str
    wildcards: dict[str, str]
    outputs: tuple[str, ...]
    gpus: int = 0


def snakemake_jobs(
    configfiles: Sequence[str | os.PathLike],
    *,
    workdir: str | os.PathLike,
    snakefile: str | os.PathLike = REPO / "Snakefile",
    resources: Mapping[str, Any] | None = None,
    overwrite_resources: Mapping[str, Any] | None = None,
) -> tuple[list[Job], dict[str, int]]:
    """Every job of the DAG of ``configfiles`` in ``workdir`` (all of them, as ``--forceall``
    plans), and Snakemake's own job count per rule.

    ``resources`` and ``overwrite_resources`` are a command line's ``--resources`` and
    ``--set-resources`` (name -> value; rule -> name -> value), e.g. a command line's
    (:func:`command_resources`) or a profile's (:func:`profile_resources`).

    Jobs come in the order Snakemake's job stats list them: by topological level, then rule
    name, then wildcards (deterministic: the same config gives the same plan text).

    Raises
    ------
    PlanError
        If Snakemake fails to load the workflow or build the DAG (the message holds its
        error), or if its counts disagree with the jobs read.
    """
    # What the Snakefile prints while it loads (a dry run's notes, such as data not found
    # yet) is the plan's business only when it fails: then the error holds its end.
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            jobs, stats = _dag_jobs(
                configfiles,
                Path(workdir),
                Path(snakefile),
                resources={**(resources or {})},
                overwrite_resources={**(overwrite_resources or {})},
            )
    # The Snakefile's own code can raise anything; it refuses a bad config with sys.exit.
    except (Exception, SystemExit) as error:
        raise PlanError(
            f"snakemake could not plan {list(map(str, configfiles))}: {error}\n"
            f"{printed.getvalue()[-3000:]}"
        ) from error
    counted = dict(Counter(job.rule for job in jobs))
    if counted != stats:
        raise PlanError(f"the DAG's jobs {counted} disagree with its job stats {stats}")
    return jobs, stats


def _dag_jobs(
    configfiles: Sequence[str | os.PathLike],
    workdir: Path,
    snakefile: Path,
    *,
    resources: Mapping[str, Any],
    overwrite_resources: Mapping[str, Any],
) -> tuple[list[Job], dict[str, int]]:
    """The DAG's jobs (topological level, rule, wildcards) and its job stats, total left out."""
    # Imported here: costing a list of jobs (tests, benchmarks) needs no Snakemake.
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        ExecutionSettings,
        OutputSettings,
        ResourceSettings,
    )

    reported = DryRunReport()
    output = OutputSettings(quiet={Quietness.ALL}, enable_file_logging=False)
    with SnakemakeApi(output) as api:
        # The logger the API's logger plugins are attached to: the dry run's events reach it.
        logger = api.logger_manager.logger
        logger.addHandler(reported)
        try:
            workflow_api = api.workflow(
                resource_settings=ResourceSettings(
                    cores=1, resources=resources, overwrite_resources=overwrite_resources
                ),
                config_settings=ConfigSettings(configfiles=[Path(f) for f in configfiles]),
                snakefile=snakefile,
                workdir=workdir,
            )
            workflow_api.dag(DAGSettings(forceall=True)).execute_workflow(
                executor="dryrun", execution_settings=ExecutionSettings(ignore_incomplete=True)
            )
        finally:
            logger.removeHandler(reported)
    return reported.jobs(), reported.stats()


#: The fields of a ``JOB_INFO`` event the planner reads.
JOB_FIELDS = ("rule_name", "wildcards", "input", "output", "resources")


class DryRunReport(logging.Handler):
    """What a dry run logs about its jobs: each job's fields, and the job stats.

    A log handler, as a logger plugin is one: the events and their fields are the interface
    Snakemake keeps for its logger plugins. A field missing is reported when the jobs are
    read, not here (the logging module would print an error raised in ``emit`` and go on).
    """

    def __init__(self) -> None:
        from snakemake_interface_logger_plugins.common import LogEvent

        super().__init__()
        self._job_info, self._run_info = LogEvent.JOB_INFO, LogEvent.RUN_INFO
        self.reported: list[dict] = []
        self.job_stats: dict[str, int] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        if event == self._job_info:
            self.reported.append({name: getattr(record, name, None) for name in JOB_FIELDS})
        elif event == self._run_info and self.job_stats is None:
            # Logged before the jobs and again after them: the first is the plan.
            self.job_stats = dict(getattr(record, "stats", None) or {})

    def stats(self) -> dict[str, int]:
        """Jobs per rule, ``total`` left out."""
        if not self.job_stats:
            raise PlanError(_changed("no job stats (a RUN_INFO event with `stats`)"))
        return {rule: count for rule, count in self.job_stats.items() if rule != "total"}

    def jobs(self) -> list[Job]:
        """The jobs by topological level (a job after every job it needs), then rule name,
        wildcards and outputs: the order of the dry run's job stats."""
        for fields in self.reported:
            missing = [name for name, value in fields.items() if value is None]
            if missing:
                raise PlanError(_changed(f"a job without {', '.join(missing)} (a JOB_INFO event)"))
        jobs = [
            Job(
                fields["rule_name"],
                dict(fields["wildcards"]),
                tuple(map(str, fields["output"])),
                _integer(fields["resources"].get("gpu")),
            )
            for fields in self.reported
        ]
        producer = {path: index for index, job in enumerate(jobs) for path in job.outputs}
        needs = {
            index: {producer[str(path)] for path in fields["input"] if str(path) in producer}
            for index, fields in enumerate(self.reported)
        }
        levels = graphlib.TopologicalSorter(needs)
        levels.prepare()
        ordered = []
        while levels.is_active():
            level = levels.get_ready()
            ordered += sorted((jobs[index] for index in level), key=_order)
            levels.done(*level)
        return ordered


def _integer(resource: Any) -> int:
    """A rule's resource as an integer (a Snakemake ``Resource``); 0 when absent or not one."""
    value = getattr(resource, "value", resource)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def command_resources(argv: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``--resources`` and ``--set-resources`` a ``snakemake`` command line runs with.

    ``argv`` without the program name; its profiles (``--profile``, and the workflow's own)
    are read by Snakemake's own command-line parser, so a plan sees the resources
    ``snakemake ARGV`` would run with: name -> value, and rule -> name -> value.

    Raises
    ------
    PlanError
        If Snakemake cannot parse the command line (or read a profile).
    """
    from snakemake.cli import parse_args

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            _, args = parse_args([*argv, "--snakefile", str(REPO / "Snakefile")])
    except (Exception, SystemExit) as error:
        raise PlanError(
            f"snakemake could not parse {' '.join(argv)}: {error}\n{printed.getvalue()[-2000:]}"
        ) from error

    def values(resources: Any) -> dict[str, Any]:
        return {name: getattr(value, "value", value) for name, value in resources.items()}

    return values(args.resources or {}), {
        rule: values(resources) for rule, resources in (args.set_resources or {}).items()
    }


def profile_resources(profile: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The resources ``snakemake --profile PROFILE`` runs with (:func:`command_resources`)."""
    return command_resources(["--profile", str(profile)])


def _changed(what: str) -> str:
    from snakemake import __version__

    return (
        f"Snakemake {__version__}'s dry run reported {what}: the planner reads the JOB_INFO "
        "and RUN_INFO events Snakemake 9's dry run sends its logger plugins, and this version "
        "changed them"
    )


def _order(job: Job) -> tuple:
    return (job.rule, tuple(job.wildcards.values()), job.outputs)
