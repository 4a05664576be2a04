"""MLflow logging: the only module that imports mlflow.

One writer (``workflow/scripts/log_to_mlflow.py``, for the image benchmarks and MVTec AD
alike) logs every job result as a child run and a parent summary run per sweep. The result
files (in ``results/<experiment>/``) are the source of truth: a tracking server that does not
answer costs a warning and a few seconds, never a failed pipeline. Runs carry a stable key,
so logging the same results again creates no duplicates.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.config.keys import KEY_COLUMNS
from pipeline_lib.detection.auroc_intervals import INTERVAL_OMITTED
from pipeline_lib.runtime.io import exclusive_lock

log = logging.getLogger(__name__)

#: mlflow is imported inside the functions below (a run without tracking never loads it); a
#: warm-worker server, which serves runs that track, loads these up front for its jobs: the
#: client, and the SQLite store with the schema check every job opening it makes (1.5 s of
#: CPU that each of a run's MLflow jobs paid again).
WARM_PRELOAD = (
    "mlflow.tracking",
    "mlflow.entities",
    "mlflow.exceptions",
    "mlflow.store.tracking.sqlalchemy_store",
    "alembic.command",
    "alembic.script",
    "alembic.runtime.migration",
    "sqlalchemy.dialects.sqlite",
)

#: Tag names used to find runs again (MLflow tags allow dots in names).
SWEEP_TAG = "droc.sweep"
KEY_TAG = "droc.result_key"
HASH_TAG = "droc.content_hash"
KIND_TAG = "droc.kind"
#: Why a job run has no AUC interval (its NaN ``auroc_low`` / ``auroc_high`` metrics): the
#: record's :data:`~pipeline_lib.detection.auroc_intervals.INTERVAL_OMITTED`.
INTERVAL_OMITTED_TAG = f"droc.{INTERVAL_OMITTED}"
#: MLflow 3's UI opens an experiment on the view of its kind; without this tag it guesses the
#: GenAI overview (traces, tokens), which is empty for this pipeline's runs.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
#: A job run's MLflow params: the result's key columns.
PARAM_COLUMNS = KEY_COLUMNS


#: ``scheme://user:password@`` (userinfo up to the last ``@`` of the authority).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#]*@")
#: Query parameters that carry secrets (``?password=``, ``&token=``, SAS ``sig=`` ...).
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;][^=&;\s#]*(?:pass|pwd|secret|token|key|sig|auth|credential)[^=&;\s#]*=)"
    r"[^&;\s#]*",
    re.IGNORECASE,
)


def redact_uri(text: str) -> str:
    """``text`` (a URI, or a message holding URIs) with every credential replaced by ``***``.

    Tracking URIs may carry credentials (``http://user:password@host``,
    ``postgresql://user:password@db/mlflow``, ``?password=``/``?token=`` parameters). Every
    URI this pipeline prints or writes (logs, ``store.json``, ``logged.json``, warnings
    quoting an error) goes through this function first.

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        ``scheme://***@host...`` for any userinfo, ``name=***`` for secret query values;
        the rest unchanged (a ``sqlite:///`` path, a plain message).
    """
    text = _USERINFO.sub(r"\g<scheme>***@", str(text))
    return _SECRET_PARAM.sub(r"\g<name>***", text)


def is_server_uri(uri: str) -> bool:
    """An ``http(s)://`` tracking URI: a ``mlflow server``, which stores artifacts itself."""
    return uri.startswith(("http://", "https://"))


def default_tracking_uri(store_dir: str | os.PathLike) -> str:
    """``$MLFLOW_TRACKING_URI`` when set, else a SQLite file in ``store_dir``."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{(Path(store_dir).resolve() / 'mlflow.db').as_posix()}"


def server_reachable(uri: str, *, timeout_s: float) -> bool:
    """For an HTTP tracking URI, ask ``/health`` with a short timeout; files are always local."""
    if not is_server_uri(uri):
        return True
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as response:  # noqa: S310 - http(s) only
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def code_version(directory: str | os.PathLike) -> str:
    """The git commit of the workflow (with ``-dirty`` for local changes), or ``unknown``."""
    try:
        commit = subprocess.run(  # noqa: S603 - fixed git call
            ["git", "-C", str(directory), "rev-parse", "HEAD"],  # noqa: S607 - git from PATH
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(  # noqa: S603 - fixed git call
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],  # noqa: S607 - git from PATH
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


#: Prefix of the MLflow step metrics of ``train.eval_every``: ``test_auroc/<detector>``,
#: named for the split they are measured on.
EVAL_METRIC_PREFIX = "test_auroc/"


def history_curves(history: Sequence[Mapping[str, Any]]) -> list[tuple[str, float, int]]:
    """``(metric, value, epoch)`` of a training history: loss, lr and images/s every epoch,
    and ``test_auroc/<detector>`` on the epochs ``train.eval_every`` evaluated."""
    curves = [
        (name, float(record[name]), int(record["epoch"]))
        for record in history
        for name in ("loss", "lr", "images_per_s")
        if name in record
    ]
    curves += [
        (f"{EVAL_METRIC_PREFIX}{detector}", float(value), int(record["epoch"]))
        for record in history
        for detector, value in (record.get("eval") or {}).items()
    ]
    return curves


def read_histories(paths: Sequence[str | os.PathLike]) -> dict[str, list[dict[str, Any]]]:
    """Training curves for :func:`log_sweep`: each ``train_history.json``'s per-epoch records,
    keyed by the model's folder (the key of its MLflow ``training`` run)."""
    return {
        Path(path).parent.as_posix(): json.loads(Path(path).read_text())["history"]
        for path in paths
    }


#: Longest wait for one request to a tracking server that did answer ``/health``: a busy
#: server (SQLite behind it, a loaded host) may take seconds per write; ``timeout_s`` only
#: bounds how long an unreachable one can delay the pipeline.
REQUEST_TIMEOUT_S = 60


def _client(uri: str, *, timeout_s: float) -> Any:
    request_timeout = max(REQUEST_TIMEOUT_S, int(timeout_s))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(request_timeout))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _refusal(uri: str, error: Exception) -> str | None:
    """The warning for a server that refused this client's credentials, else ``None``."""
    code = getattr(error, "error_code", "")
    if code not in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return None
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    if code == "PERMISSION_DENIED":
        reason = f"user {user!r} is not allowed to write there (HTTP 403)"
    elif user:
        reason = f"it refused the password of user {user!r} (HTTP 401)"
    else:
        reason = "it requires a login and MLFLOW_TRACKING_USERNAME is not set (HTTP 401)"
    return (
        f"MLflow tracking server {redact_uri(uri)} refused access: {reason}. Set "
        "MLFLOW_TRACKING_USERNAME "
        "and MLFLOW_TRACKING_PASSWORD to an account of that server and re-run log_to_mlflow; "
        "runs are not logged, the result files still hold every result"
    )


def ensure_experiment(
    uri: str, experiment: str, *, artifact_dir: str | os.PathLike | None, timeout_s: float = 5.0
) -> dict[str, Any]:
    """Create the store and experiment once, before any fan-out writes to it.

    The experiment declares its kind (:data:`EXPERIMENT_KIND_TAG`), so ``mlflow ui`` opens it
    on its runs rather than on the GenAI overview.

    ``artifact_dir`` is used for a local store only: a tracking server keeps the artifacts of
    the experiments it creates (``mlflow server --artifacts-destination``) and takes them over
    HTTP, so the UI can show them without sharing a file system with the cluster.

    A server with authentication (``mlflow server --app-name basic-auth``) takes the user and
    password from ``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``; when it refuses
    them, this warns and returns ``"unauthorized"`` instead of failing the pipeline.

    Returns
    -------
    dict
        ``status`` ("ready", "unreachable" or "unauthorized"), ``tracking_uri`` (without
        credentials, :func:`redact_uri`: the dict is written to ``store.json``),
        ``experiment_id``, and a ``warning`` unless ready.
    """
    shown = redact_uri(uri)
    if not server_reachable(uri, timeout_s=timeout_s):
        log.warning("MLflow tracking server %s does not answer: runs will not be logged", shown)
        return {
            "status": "unreachable",
            "tracking_uri": shown,
            "experiment_id": None,
            "warning": f"tracking server {shown} did not answer",
        }
    from mlflow.exceptions import MlflowException

    client = _client(uri, timeout_s=timeout_s)
    try:
        found = client.get_experiment_by_name(experiment)
    except MlflowException as error:
        refused = _refusal(uri, error)
        if refused is None:
            raise
        log.warning("%s", refused)
        return {
            "status": "unauthorized",
            "tracking_uri": shown,
            "experiment_id": None,
            "warning": refused,
        }
    if found is not None:
        experiment_id = found.experiment_id
        # An experiment made before the kind was declared gets it; a kind set by hand stays.
        if EXPERIMENT_KIND_TAG not in found.tags:
            client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    else:
        local = artifact_dir is not None and not is_server_uri(uri)
        location = Path(artifact_dir).resolve().as_uri() if local else None
        try:
            experiment_id = client.create_experiment(
                experiment,
                artifact_location=location,
                tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
            )
        except MlflowException:
            # Another writer (another cluster, another user) created it a moment ago.
            found = client.get_experiment_by_name(experiment)
            if found is None:
                raise
            experiment_id = found.experiment_id
    return {"status": "ready", "tracking_uri": shown, "experiment_id": experiment_id}


def _content_hash(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def _existing_runs(client: Any, experiment_id: str, sweep: str) -> dict[str, Any]:
    return {
        run.data.tags.get(KEY_TAG, run.info.run_id): run
        for run in _existing_runs_all(client, experiment_id, sweep)
    }


def _remove_duplicates(client: Any, experiment_id: str, sweep: str) -> int:
    """Keep one run per result key of ``sweep``; return how many duplicates were deleted.

    The writer lock orders writers that share a results folder. Writers on different hosts
    that log the same sweep to one server at once can still both create a run for a key
    before either sees the other's. Every writer ends with this pass: it keeps the earliest
    run of each key (by start time, then id: the same choice in every writer), deletes the
    others once they are finished (a running one belongs to a writer that will run this pass
    itself later), and points job runs at the kept parent. The last writer's pass sees every
    run, so at most one run per key is left, and since every writer logs the same records,
    no result is lost.
    """
    by_key: dict[str, list[Any]] = {}
    for run in _existing_runs_all(client, experiment_id, sweep):
        by_key.setdefault(run.data.tags.get(KEY_TAG, run.info.run_id), []).append(run)
    removed = 0
    kept: dict[str, Any] = {}
    for key, runs in by_key.items():
        runs.sort(key=lambda run: (run.info.start_time or 0, run.info.run_id))
        kept[key] = runs[0]
        for duplicate in runs[1:]:
            if duplicate.info.status == "FINISHED":
                client.delete_run(duplicate.info.run_id)
                removed += 1
    parent = kept.get(f"sweep:{sweep}")
    if parent is not None:
        for run in kept.values():
            pointer = run.data.tags.get("mlflow.parentRunId")
            if pointer and pointer != parent.info.run_id and run.info.status == "FINISHED":
                client.set_tag(run.info.run_id, "mlflow.parentRunId", parent.info.run_id)
    if removed:
        log.warning("removed %d duplicate MLflow run(s) of sweep %s", removed, sweep)
    return removed


def _existing_runs_all(client: Any, experiment_id: str, sweep: str) -> list[Any]:
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{SWEEP_TAG}` = '{sweep}'",
            max_results=5000,
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


@dataclass
class _SweepRuns:
    """The runs of one sweep in one experiment: its parent and the runs already logged."""

    client: Any
    experiment_id: str
    sweep: str
    common: dict[str, str]
    existing: dict[str, Any]
    parent_id: str
    now: int

    @classmethod
    def open(
        cls,
        client: Any,
        experiment_id: str,
        *,
        experiment: str,
        sweep: str,
        tags: Mapping[str, str] | None,
    ) -> _SweepRuns:
        """Find the sweep's runs; create its parent (summary) run if it has none."""
        existing = _existing_runs(client, experiment_id, sweep)
        common = {SWEEP_TAG: sweep, **(tags or {})}
        parent_key = f"sweep:{sweep}"
        parent = existing.get(parent_key)
        parent_id = (
            parent.info.run_id
            if parent
            else client.create_run(
                experiment_id,
                run_name=f"{experiment}-{sweep}",
                tags={**common, KEY_TAG: parent_key, KIND_TAG: "summary"},
            ).info.run_id
        )
        now = int(time.time() * 1000)
        return cls(client, experiment_id, sweep, common, existing, parent_id, now)

    def _child(self, key: str, kind: str, run_name: str) -> str:
        return self.client.create_run(
            self.experiment_id,
            run_name=run_name,
            tags={
                **self.common,
                KEY_TAG: key,
                KIND_TAG: kind,
                "mlflow.parentRunId": self.parent_id,
            },
        ).info.run_id

    def log_jobs(
        self, records: Sequence[Mapping[str, Any]], counts: dict[str, int]
    ) -> dict[str, str]:
        """A child run per record (created, updated in place, or left alone when unchanged).

        Returns ``result_key`` -> its job run's id (the summary page links it).
        """
        from mlflow.entities import Metric, Param, RunTag

        run_ids: dict[str, str] = {}
        for record in records:
            key = str(record["result_key"])
            digest = _content_hash(record)
            run = self.existing.get(key)
            if run is not None and run.data.tags.get(HASH_TAG) == digest:
                counts["unchanged"] += 1
                run_ids[key] = run.info.run_id
                continue
            params = [Param(name, str(record[name])) for name in PARAM_COLUMNS if name in record]
            metrics = [
                Metric(name, float(value), self.now, 0)
                for name, value in record.items()
                if name not in PARAM_COLUMNS
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
            ]
            run_tags = [RunTag(HASH_TAG, digest)]
            omitted = record.get(INTERVAL_OMITTED)
            if isinstance(omitted, str) and omitted:
                run_tags.append(RunTag(INTERVAL_OMITTED_TAG, omitted))
            if run is None:
                name = "/".join(str(record[n]) for n in PARAM_COLUMNS if n in record)
                run_id = self._child(key, "job", name)
                self.client.log_batch(run_id, metrics=metrics, params=params, tags=run_tags)
                counts["created"] += 1
            else:
                # Params are immutable in MLflow and identity params never change for a
                # key; but a writer killed between creating the run and logging it left
                # none: log the ones the run lacks.
                run_id = run.info.run_id
                missing = [param for param in params if param.key not in run.data.params]
                self.client.log_batch(run_id, metrics=metrics, params=missing, tags=run_tags)
                counts["updated"] += 1
            self.client.set_terminated(run_id)
            run_ids[key] = run_id
        return run_ids

    def log_training(
        self,
        key: str,
        history: Sequence[Mapping[str, Any]],
        files: Sequence[str | os.PathLike],
        counts: dict[str, int],
    ) -> None:
        """The ``training`` run of one model: its curves stepped by epoch, and ``files``."""
        from mlflow.entities import Metric, RunTag

        training_key = f"train:{key}"
        digest = _content_hash({"history": list(history)})
        run = self.existing.get(training_key)
        if run is not None and run.data.tags.get(HASH_TAG) == digest:
            counts["unchanged"] += 1
            return
        if run is None:
            run_id = self._child(training_key, "training", f"train {key}")
            counts["created"] += 1
        else:
            run_id = run.info.run_id
            counts["updated"] += 1
        curves = [
            Metric(name, value, self.now, epoch) for name, value, epoch in history_curves(history)
        ]
        for start in range(0, len(curves), 900):  # log_batch takes <= 1000 metrics
            self.client.log_batch(run_id, metrics=curves[start : start + 900])
        for path in files:
            self.client.log_artifact(run_id, str(path))
        self.client.log_batch(run_id, tags=[RunTag(HASH_TAG, digest)])
        self.client.set_terminated(run_id)

    def close_parent(self, artifacts: Sequence[str | os.PathLike], *, n_results: int) -> None:
        """The sweep's tables and plots on the parent run, its tags and ``n_results``."""
        from mlflow.entities import Metric, RunTag

        for path in artifacts:
            path = Path(path)
            self.client.log_artifact(self.parent_id, str(path), artifact_path=path.parent.name)
        self.client.log_batch(
            self.parent_id,
            metrics=[Metric("n_results", float(n_results), self.now, 0)],
            tags=[RunTag(name, str(value)) for name, value in self.common.items()],
        )
        self.client.set_terminated(self.parent_id)

    def deduplicate(self, run_ids: dict[str, str]) -> tuple[int, dict[str, str]]:
        """Remove racing writers' duplicates; ``run_ids`` pointed at the kept runs."""
        removed = _remove_duplicates(self.client, self.experiment_id, self.sweep)
        if removed:
            # a racing writer's run may be the one kept: link the kept run of each key
            kept = _existing_runs(self.client, self.experiment_id, self.sweep)
            run_ids = {
                key: kept[key].info.run_id if key in kept else run_id
                for key, run_id in run_ids.items()
            }
        return removed, run_ids


def log_sweep(
    records: Sequence[Mapping[str, Any]],
    *,
    uri: str,
    experiment: str,
    sweep: str,
    artifacts: Sequence[str | os.PathLike] = (),
    artifact_dir: str | os.PathLike | None = None,
    lock_path: str | os.PathLike,
    tags: Mapping[str, str] | None = None,
    timeout_s: float = 5.0,
    histories: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    history_artifacts: Mapping[str, Sequence[str | os.PathLike]] | None = None,
) -> dict[str, Any]:
    """Log one child run per job record and a parent run with the sweep's tables and plots.

    ``histories`` maps a trained model's key (its folder) to its per-epoch records
    (``epoch``, ``loss``, ``lr``, ``images_per_s``, and ``eval`` where ``train.eval_every``
    scored the test split); each becomes a child run of kind ``training`` whose metrics are
    the curves, stepped by epoch (:func:`history_curves`). ``history_artifacts`` maps the
    same keys to files logged on that run (the AUC-during-training figure).

    Each record needs a ``result_key`` (its stable identity, e.g. its result path), the
    wildcard columns of :data:`PARAM_COLUMNS` and numeric metrics. A record already logged
    with the same content is left alone; a changed one updates its run in place (metrics,
    and any of its params the run lacks: a writer killed after creating a run left it
    without params and without the content hash, so the next writer completes it). Writers
    that share ``lock_path`` take turns; writers that do not (two hosts logging the same
    sweep to one server) may race, and each ends by deleting duplicates (see
    ``_remove_duplicates``), so every key keeps exactly one run.

    Returns
    -------
    dict
        ``status`` and counts of created, updated and unchanged runs and of
        ``duplicates_removed``, ``experiment_id``, ``parent_run_id`` and ``run_ids``
        (``result_key`` -> its job run's id, for links to the runs); or the warning when
        the tracking store could not be reached.
    """
    summary: dict[str, Any] = {
        "tracking_uri": redact_uri(uri),
        "sweep": sweep,
        "experiment": experiment,
    }
    try:
        # Two aggregations at once must not interleave their search-then-create steps.
        Path(lock_path).parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(lock_path):
            store = ensure_experiment(
                uri, experiment, artifact_dir=artifact_dir, timeout_s=timeout_s
            )
            if store["status"] != "ready":
                return summary | store
            sweep_runs = _SweepRuns.open(
                _client(uri, timeout_s=timeout_s),
                store["experiment_id"],
                experiment=experiment,
                sweep=sweep,
                tags=tags,
            )
            counts = {"created": 0, "updated": 0, "unchanged": 0}
            run_ids = sweep_runs.log_jobs(records, counts)
            for key, history in (histories or {}).items():
                files = (history_artifacts or {}).get(key, ())
                sweep_runs.log_training(key, history, files, counts)
            sweep_runs.close_parent(artifacts, n_results=len(records))
            counts["duplicates_removed"], run_ids = sweep_runs.deduplicate(run_ids)
            return summary | {
                "status": "logged",
                "experiment_id": sweep_runs.experiment_id,
                "parent_run_id": sweep_runs.parent_id,
                **counts,
                "run_ids": run_ids,
            }
    except Exception as error:  # noqa: BLE001 - tracking must never fail the pipeline
        refused = _refusal(uri, error)
        if refused is not None:  # e.g. a user who may read the experiment but not write
            log.warning("%s", refused)
            return summary | {"status": "unauthorized", "warning": refused}
        reason = redact_uri(f"{type(error).__name__}: {error}")  # errors quote the URI
        log.warning("MLflow logging failed (%s); the result files still hold every result", reason)
        return summary | {"status": "failed", "warning": reason}
