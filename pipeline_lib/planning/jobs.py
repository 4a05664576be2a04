"""The jobs of a config, read from the DAG Snakemake itself builds (no text is parsed).

The workflow is loaded through Snakemake's API (:class:`snakemake.api.SnakemakeApi`) and its
DAG built as ``snakemake --dry-run --forceall`` builds it, without executing or scheduling
anything: every job of the DAG is a job the planner costs, and the per-rule counts are the
DAG's own (:meth:`snakemake.dag.DAG.stats`, the numbers a dry run prints under "Job stats").
``DAGApi`` has no method that returns the DAG, so the DAG is built with the two ``Workflow``
calls its ``printdag`` makes (``_prepare_dag``, ``_build_dag``), minus the printing.
"""

from __future__ import annotations

import contextlib
import io
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
        OutputSettings,
        ResourceSettings,
    )

    output = OutputSettings(quiet={Quietness.ALL}, enable_file_logging=False)
    with SnakemakeApi(output) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(
                cores=1, resources=resources, overwrite_resources=overwrite_resources
            ),
            config_settings=ConfigSettings(configfiles=[Path(f) for f in configfiles]),
            snakefile=snakefile,
            workdir=workdir,
        )
        # The DAG API loads the Snakefile and sets the settings the DAG is built with.
        workflow = workflow_api.dag(DAGSettings(forceall=True)).workflow_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        levels = workflow.dag.toposorted(set(workflow.dag.needrun_jobs()))
        jobs = [
            Job(
                job.rule.name,
                dict(job.wildcards.items()),
                tuple(map(str, job.output)),
                _integer(job.rule.resources.get("gpu")),
            )
            for level in levels
            for job in sorted(level, key=_order)
        ]
        _, stats = workflow.dag.stats()
    return jobs, {rule: count for rule, count in stats.items() if rule != "total"}


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


def _order(job) -> tuple:
    return (job.rule.name, tuple(job.wildcards), tuple(map(str, job.output)))
