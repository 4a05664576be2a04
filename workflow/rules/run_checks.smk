"""Checks and hooks of a run: missing data, unused GPUs, the warm-worker server. No rules.

The Snakefile calls them: _missing_image_data and warn_missing_data when it is parsed,
check_before_jobs and start_warm_workers in its onstart hook, stop_warm_workers after.
"""

import atexit
import weakref

from pipeline_lib.config.gpus import GPU_RULES, gpu_warning, visible_cuda_devices
from pipeline_lib.data.presence import missing_data
from pipeline_lib.runtime import warm_jobs
from pipeline_lib.tracking.mlflow_store import default_tracking_uri, redact_uri

# Outputs of the rules that read a data set's raw files: while one of them is missing, the
# raw files must be there (add the output of any new rule that reads them).
RAW_DATA_OUTPUTS = [
    "{dataset}/dataset.npz",
    "{dataset}/data_provenance.json",
]


def _missing_image_data():
    """Why data sets the run reads are not where their readers look (none: an empty list).

    A data set whose RAW_DATA_OUTPUTS all exist needs its files no more.
    """
    root = resolve_data_root(config["data"]["root"])
    return [
        reason
        for name, settings in DATASET_SETTINGS.items()
        if not all(
            os.path.exists(output.format(dataset=name)) for output in RAW_DATA_OUTPUTS
        )
        for reason in [
            missing_data(
                name,
                root=root,
                download=config["data"]["download"],
                **settings.get("options", {}),
            )
        ]
        if reason
    ]


def _missing_data_note(missing):
    return (
        "Warning: data not found; a dry run plans anyway, a real run stops before its "
        "first job:\n  " + "\n  ".join(missing)
    )


def warn_missing_data(missing):
    """Parse-time note (dry runs too) on missing data; the main Snakemake process only.

    A dry run prints it again after its job list, which would scroll it away
    (_notes_after_dry_run).
    """
    if not workflow.is_main_process:
        return
    if missing:
        print(_missing_data_note(missing), file=sys.stderr)
    atexit.register(_notes_after_dry_run, weakref.ref(workflow), missing)


def _notes_after_dry_run(workflow_ref, missing):
    """At the end of a dry run (the process exits): the missing data and unused GPUs.

    Snakemake has no hook after a dry run; this runs at the exit of the process that parsed
    the workflow, and says nothing unless that process ran a dry run (not a real run, whose
    onstart hook says the same before its jobs, nor a plan built through the API).
    """
    workflow = workflow_ref()
    if workflow is None or not workflow.dryrun or workflow.dag is None:
        return
    # The dry run has marked its jobs done: the DAG's jobs are those it listed (and any done
    # before, which still name the rules of this config).
    notes = [gpu_note(workflow, workflow.dag.jobs)]
    notes += [_missing_data_note(missing)] if missing else []
    for note in filter(None, notes):
        print(note, file=sys.stderr, flush=True)


def _resource_int(resource):
    """A resource's integer value (a Snakemake Resource, a number or None); 0 otherwise."""
    value = getattr(resource, "value", resource)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def gpu_note(workflow, jobs):
    """The warning of pipeline_lib.config.gpus for ``jobs`` of this run, or None."""
    rule_gpus = {
        job.rule.name: _resource_int(job.rule.resources.get("gpu"))
        for job in jobs
        if job.rule.name in GPU_RULES
    }
    local = workflow.local_exec and not workflow.remote_exec
    return gpu_warning(
        rule_gpus,
        declared=_resource_int(workflow.global_resources.get("gpu")) or None,
        cuda_devices=visible_cuda_devices() if local else 0,
    )


def check_before_jobs(missing):
    """The onstart hook: real runs only, after the plan is made, before any job starts.

    Raises WorkflowError (Snakemake prints it and exits with 1) when data is missing, and
    warns when a SQLite tracking store is used while jobs run on other hosts, or when the
    run has GPUs but its training and embedding jobs ask for none.
    """
    from snakemake.exceptions import WorkflowError

    note = gpu_note(workflow, workflow.dag.needrun_jobs())
    if note:
        print(note, file=sys.stderr)
    if config["tracking"]["enabled"] and not workflow.local_exec:
        uri = default_tracking_uri("mlflow")
        if uri.startswith("sqlite:"):
            print(
                f"Warning: MLflow tracking writes the SQLite file {redact_uri(uri)} while "
                "jobs run on a cluster. Its writers are local rules (this host, one at a "
                "time), but SQLite's locks do not hold on a network file system and other "
                "hosts cannot read it safely: set MLFLOW_TRACKING_URI to a tracking server "
                "(docs/cluster.md, 'MLflow on a cluster'), or tracking.enabled: false.",
                file=sys.stderr,
            )
    if missing:
        raise WorkflowError(
            "data not found, nothing was run:\n  " + "\n  ".join(missing)
        )


# The run's warm-worker server (pipeline_lib/runtime/warm_jobs.py), while one runs.
WARM_SERVER = []


def start_warm_workers():
    """The onstart hook's second half: the jobs this host runs fork from one warm process.

    That is every job of a local run, and the aggregation rules (localrules) of a cluster
    run. Not where jobs run in their own software environment (--sdm conda or apptainer) or
    where DROC_WARM_JOBS=0. The server takes jobs of this Snakemake process only: a cluster
    job that inherits the socket's address is refused and runs in its own process.
    """
    if workflow.deployment_settings.deployment_method:
        return
    scripts = [
        Path(job.rule.basedir.join(job.rule.script).get_path_or_uri(secret_free=True))
        for job in workflow.dag.needrun_jobs()
        if job.rule.script and (workflow.local_exec or job.is_local)
    ]
    WARM_SERVER.append(warm_jobs.start_server(scripts, Path(".snakemake") / "log"))


def stop_warm_workers():
    """The onsuccess and onerror hooks: the run is over, so is its server."""
    while WARM_SERVER:
        warm_jobs.stop_server(WARM_SERVER.pop())
