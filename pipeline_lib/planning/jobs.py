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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class PlanError(RuntimeError):
    """Snakemake could not build the config's DAG, or its counts disagree with its jobs."""


@dataclass(frozen=True)
class Job:
    """One job of the DAG: its rule, wildcards and output paths (relative to the workdir)."""

    rule: str
    wildcards: dict[str, str]
    outputs: tuple[str, ...]


def snakemake_jobs(
    configfiles: Sequence[str | os.PathLike],
    *,
    workdir: str | os.PathLike,
    snakefile: str | os.PathLike = REPO / "Snakefile",
) -> tuple[list[Job], dict[str, int]]:
    """Every job of the DAG of ``configfiles`` in ``workdir`` (all of them, as ``--forceall``
    plans), and Snakemake's own job count per rule.

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
            jobs, stats = _dag_jobs(configfiles, Path(workdir), Path(snakefile))
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
    configfiles: Sequence[str | os.PathLike], workdir: Path, snakefile: Path
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
            resource_settings=ResourceSettings(cores=1),
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
            Job(job.rule.name, dict(job.wildcards.items()), tuple(map(str, job.output)))
            for level in levels
            for job in sorted(level, key=_order)
        ]
        _, stats = workflow.dag.stats()
    return jobs, {rule: count for rule, count in stats.items() if rule != "total"}


def _order(job) -> tuple:
    return (job.rule.name, tuple(job.wildcards), tuple(map(str, job.output)))
