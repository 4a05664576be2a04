"""MLflow logging of ``pipeline_lib.tracking.mlflow_store`` against a real SQLite store."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline_lib.mvtec.tables import mvtec_result_records
from pipeline_lib.tracking.loggers import log_benchmark
from pipeline_lib.tracking.mlflow_store import (
    EXPERIMENT_KIND,
    EXPERIMENT_KIND_TAG,
    HASH_TAG,
    INTERVAL_OMITTED_TAG,
    KEY_TAG,
    KIND_TAG,
    PARAM_COLUMNS,
    SWEEP_TAG,
    default_tracking_uri,
    ensure_experiment,
    log_sweep,
    redact_uri,
    server_reachable,
)
from tests.tracking_cases import job_records

#: Set by log_sweep with os.environ.setdefault; restored after this module.
_HTTP_ENV = ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """One SQLite store per module: MLflow's first open runs its migrations (seconds)."""
    root = tmp_path_factory.mktemp("mlflow")
    saved = {name: os.environ.get(name) for name in _HTTP_ENV}
    try:
        uri = f"sqlite:///{root.as_posix()}/mlflow.db"
        status = ensure_experiment(uri, "warmup", artifact_dir=root / "artifacts")
        assert status["status"] == "ready"
        table = root / "tables" / "main_table.csv"
        table.parent.mkdir()
        table.write_text("method,auroc\nraw,90.0\n")
        yield {"uri": uri, "root": root, "client": MlflowClient(tracking_uri=uri), "table": table}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _log(store: dict, records: list[dict], experiment: str, sweep: str = "abc123", **kwargs):
    return log_sweep(
        records,
        uri=store["uri"],
        experiment=experiment,
        sweep=sweep,
        artifact_dir=store["root"] / "artifacts",
        lock_path=store["root"] / "writer.lock",
        **kwargs,
    )


def _runs(store: dict, experiment_id: str) -> list:
    return list(store["client"].search_runs([experiment_id], max_results=1000))


def test_ensure_experiment_creates_it_once(store: dict) -> None:
    artifacts = store["root"] / "artifacts"
    first = ensure_experiment(store["uri"], "once", artifact_dir=artifacts)
    second = ensure_experiment(store["uri"], "once", artifact_dir=artifacts)
    assert first["status"] == second["status"] == "ready"
    assert first["tracking_uri"] == store["uri"]
    assert first["experiment_id"] == second["experiment_id"]
    experiment = store["client"].get_experiment_by_name("once")
    assert experiment.experiment_id == first["experiment_id"]
    assert experiment.artifact_location == artifacts.resolve().as_uri()
    names = [e.name for e in store["client"].search_experiments() if e.name == "once"]
    assert names == ["once"]
    # MLflow 3's UI opens an experiment of this kind on its runs (the value its UI writes).
    assert experiment.tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND == "custom_model_development"


def test_ensure_experiment_declares_the_kind_of_an_older_experiment_only_once(store: dict) -> None:
    client = store["client"]
    older = client.create_experiment("older", artifact_location=(store["root"] / "a").as_uri())
    assert EXPERIMENT_KIND_TAG not in client.get_experiment(older).tags
    assert ensure_experiment(store["uri"], "older", artifact_dir=None)["experiment_id"] == older
    assert client.get_experiment(older).tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
    # A kind someone chose in the UI is theirs.
    chosen = client.create_experiment("chosen", tags={EXPERIMENT_KIND_TAG: "genai_development"})
    ensure_experiment(store["uri"], "chosen", artifact_dir=None)
    assert client.get_experiment(chosen).tags[EXPERIMENT_KIND_TAG] == "genai_development"


def test_log_sweep_creates_children_and_one_parent(store: dict) -> None:
    records = job_records(3)
    summary = _log(store, records, "children", tags={"git_commit": "deadbeef"})
    assert summary["status"] == "logged"
    assert (summary["created"], summary["updated"], summary["unchanged"]) == (3, 0, 0)
    runs = _runs(store, summary["experiment_id"])
    assert len(runs) == 4
    parents = [run for run in runs if run.data.tags[KIND_TAG] == "summary"]
    children = [run for run in runs if run.data.tags[KIND_TAG] == "job"]
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.info.run_id == summary["parent_run_id"]
    assert parent.data.tags[SWEEP_TAG] == "abc123"
    assert parent.data.tags["git_commit"] == "deadbeef"
    assert parent.data.metrics["n_results"] == 3.0
    assert parent.info.status == "FINISHED"
    by_key = {run.data.tags[KEY_TAG]: run for run in children}
    assert set(by_key) == {record["result_key"] for record in records}
    for record in records:
        run = by_key[record["result_key"]]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags[SWEEP_TAG] == "abc123"
        assert run.data.tags[HASH_TAG]
        assert run.info.status == "FINISHED"
        assert run.data.metrics == {"auroc": record["auroc"], "n_fit": 60.0}
        assert run.data.params == {
            "dataset": "digits",
            "inlier": record["inlier"],
            "method": "raw",
            "seed": "0",
            "contamination": "0.0",
            "fitset": "train",
            "detector": "knn",
        }
    # every job's run id, by result key: what the summary page links
    assert summary["run_ids"] == {key: run.info.run_id for key, run in by_key.items()}


def test_a_job_without_an_interval_says_why_on_its_run(store: dict) -> None:
    reason = "the test split has 9 outlier(s) and 1 inlier(s); ..."
    with_interval, without = job_records(2)
    with_interval |= {"auroc_low": 88.0, "auroc_high": 92.0, "auroc_interval_omitted": ""}
    without |= {"auroc_low": float("nan"), "auroc_high": float("nan")}
    without["auroc_interval_omitted"] = reason
    summary = _log(store, [with_interval, without], "omitted")
    runs = {
        run.data.tags[KEY_TAG]: run
        for run in _runs(store, summary["experiment_id"])
        if run.data.tags[KIND_TAG] == "job"
    }
    assert runs[without["result_key"]].data.tags[INTERVAL_OMITTED_TAG] == reason
    assert INTERVAL_OMITTED_TAG not in runs[with_interval["result_key"]].data.tags
    assert runs[with_interval["result_key"]].data.metrics["auroc_low"] == 88.0


def test_mvtec_results_log_what_was_measured_under_their_benchmark_tag(
    store: dict, tmp_path: Path
) -> None:
    """MVTec AD's tidy table as its logger reads it: a category without masks has no pixel
    metrics, so its run has none (not NaN); a category named by digits keeps its name; every
    run carries the rule's tags. The image benchmarks' NaN interval: the test above."""
    table = tmp_path / "results.csv"
    table.write_text(
        "category,group,method,detector,seed,image_auroc,pixel_auroc,aupro,dataset,inlier,"
        "contamination,fitset,result_key\n"
        "007,object,rotnet,kde,0,91.5,88.0,70.25,mvtec,007,0.0,train,mvtec/007/seed0/rotnet/kde\n"
        "plain,texture,rotnet,kde,0,80.0,,,mvtec,plain,0.0,train,mvtec/plain/seed0/rotnet/kde\n"
    )
    summary = log_benchmark(
        mvtec_result_records(table),
        store_dir=store["root"],
        experiment="mvtec-lane",
        sweep="s1-mvtec",
        timeout_s=5.0,
        code_dir=tmp_path,
        artifacts=[table],
        tags={"benchmark": "mvtec"},
    )
    assert summary["status"] == "logged" and summary["created"] == 2 and "studies" not in summary
    runs = _runs(store, summary["experiment_id"])
    assert {run.data.tags["benchmark"] for run in runs} == {"mvtec"} and len(runs) == 3
    jobs = {run.data.tags[KEY_TAG]: run for run in runs if run.data.tags[KIND_TAG] == "job"}
    masked, plain = jobs["mvtec/007/seed0/rotnet/kde"], jobs["mvtec/plain/seed0/rotnet/kde"]
    identity = {"dataset": "mvtec", "inlier": "007", "contamination": "0.0", "seed": "0"}
    identity |= {"method": "rotnet", "fitset": "train", "detector": "kde"}
    assert masked.data.params == {name: identity[name] for name in PARAM_COLUMNS}
    assert masked.info.run_name == "/".join(identity[name] for name in PARAM_COLUMNS)
    assert masked.data.metrics == {"image_auroc": 91.5, "pixel_auroc": 88.0, "aupro": 70.25}
    assert plain.data.metrics == {"image_auroc": 80.0}
    (parent,) = [run for run in runs if run.data.tags[KIND_TAG] == "summary"]
    assert parent.info.run_name == "mvtec-lane-s1-mvtec"
    assert parent.data.metrics == {"n_results": 2.0}
    artifacts = store["client"].list_artifacts(parent.info.run_id, tmp_path.name)
    assert [item.path for item in artifacts] == [f"{tmp_path.name}/results.csv"]


def test_log_sweep_is_idempotent_and_updates_changedjob_records(store: dict) -> None:
    records = job_records(3)
    first = _log(store, records, "idempotent")
    assert first["created"] == 3
    experiment_id = first["experiment_id"]

    again = _log(store, records, "idempotent")
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 3)
    assert again["run_ids"] == first["run_ids"]  # unchanged runs are still listed
    assert again["parent_run_id"] == first["parent_run_id"]
    assert len(_runs(store, experiment_id)) == 4

    changed = [dict(record) for record in records]
    changed[1]["auroc"] = 42.5
    time.sleep(0.01)  # a later metric timestamp than the first log
    update = _log(store, changed, "idempotent")
    assert (update["created"], update["updated"], update["unchanged"]) == (0, 1, 2)
    runs = _runs(store, experiment_id)
    assert len(runs) == 4
    by_key = {run.data.tags[KEY_TAG]: run for run in runs}
    assert by_key[records[1]["result_key"]].data.metrics["auroc"] == 42.5
    assert by_key[records[0]["result_key"]].data.metrics["auroc"] == 90.0
    assert by_key[records[2]["result_key"]].data.metrics["auroc"] == 92.0


def test_another_sweep_gets_its_own_runs(store: dict) -> None:
    records = job_records(2)
    first = _log(store, records, "two-sweeps", sweep="s1")
    second = _log(store, records, "two-sweeps", sweep="s2")
    assert first["created"] == second["created"] == 2
    assert first["parent_run_id"] != second["parent_run_id"]
    runs = _runs(store, first["experiment_id"])
    assert len(runs) == 6
    assert sorted(run.data.tags[SWEEP_TAG] for run in runs) == ["s1"] * 3 + ["s2"] * 3


def test_artifacts_land_on_the_parent_run(store: dict, tmp_path: Path) -> None:
    summary = _log(store, job_records(1), "artifacts", artifacts=[store["table"]])
    client = store["client"]
    parent = summary["parent_run_id"]
    assert [info.path for info in client.list_artifacts(parent)] == ["tables"]
    assert [info.path for info in client.list_artifacts(parent, "tables")] == [
        "tables/main_table.csv"
    ]
    local = client.download_artifacts(parent, "tables/main_table.csv", str(tmp_path))
    assert Path(local).name == "main_table.csv"
    assert Path(local).is_relative_to(tmp_path)
    assert Path(local).read_text() == "method,auroc\nraw,90.0\n"
    children = [r for r in _runs(store, summary["experiment_id"]) if r.info.run_id != parent]
    assert len(children) == 1
    assert client.list_artifacts(children[0].info.run_id) == []


def test_training_runs_carry_test_auroc_curves_and_the_eval_figure(
    store: dict, tmp_path: Path
) -> None:
    """train.eval_every: test_auroc/<detector> stepped by the evaluated epochs, beside loss."""
    history = [
        {"epoch": 1, "loss": 1.2, "lr": 0.01, "images_per_s": 100.0},
        {
            "epoch": 2,
            "loss": 0.9,
            "lr": 0.005,
            "images_per_s": 110.0,
            "eval": {"kde": 71.5, "rotation_classifier": 64.0},
        },
        {
            "epoch": 3,
            "loss": 0.7,
            "lr": 0.0,
            "images_per_s": 105.0,
            "eval": {"kde": 74.0, "rotation_classifier": 66.5},
        },
    ]
    figure = tmp_path / "eval_curve.png"
    figure.write_bytes(b"\x89PNG not really")
    key = "digits/3/contam0/seed0/rotnet"
    summary = _log(
        store,
        job_records(1),
        "eval-curves",
        histories={key: history},
        history_artifacts={key: [figure]},
    )
    client = store["client"]
    (run,) = [
        r for r in _runs(store, summary["experiment_id"]) if r.data.tags[KIND_TAG] == "training"
    ]
    assert run.data.tags[KEY_TAG] == f"train:{key}"

    def curve(name: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, name))

    assert curve("loss") == [(1, 1.2), (2, 0.9), (3, 0.7)]
    assert curve("test_auroc/kde") == [(2, 71.5), (3, 74.0)]
    assert curve("test_auroc/rotation_classifier") == [(2, 64.0), (3, 66.5)]
    assert [info.path for info in client.list_artifacts(run.info.run_id)] == ["eval_curve.png"]


def test_a_bad_record_fails_softly(store: dict, caplog: pytest.LogCaptureFixture) -> None:
    record = job_records(1)[0]
    del record["result_key"]
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.tracking.mlflow_store"):
        summary = _log(store, [record], "bad-record")
    assert summary["status"] == "failed"
    assert summary["warning"].startswith("KeyError")
    assert "the result files still hold every result" in caplog.text


def test_unreachable_server_warns_quickly(tmp_path: Path, caplog) -> None:
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.tracking.mlflow_store"):
        summary = log_sweep(
            job_records(2),
            uri="http://127.0.0.1:9",
            experiment="droc",
            sweep="abc",
            lock_path=tmp_path / "writer.lock",
            timeout_s=1,
        )
    elapsed = time.perf_counter() - start
    assert elapsed < 10
    assert summary["status"] == "unreachable"
    assert summary["experiment_id"] is None
    assert "http://127.0.0.1:9" in summary["warning"]
    assert "does not answer" in caplog.text


def test_server_reachable() -> None:
    assert server_reachable("sqlite:////tmp/x/mlflow.db", timeout_s=1) is True
    assert server_reachable("file:///tmp/mlruns", timeout_s=1) is True
    assert server_reachable("http://127.0.0.1:9", timeout_s=1) is False


def test_default_tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert default_tracking_uri(tmp_path) == f"sqlite:///{tmp_path.resolve().as_posix()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert default_tracking_uri(tmp_path) == "http://tracking.example:5000"


def test_a_run_left_without_params_gets_them_when_logged_again(store: dict) -> None:
    records = job_records(2)
    first = _log(store, records, "half-logged")
    client = store["client"]
    # A writer killed between create_run and log_batch: the run exists with its identity
    # tags, but no params, no metrics and no content hash.
    orphan_key = "digits/7/contam0/seed0/raw/train/knn"
    orphan = client.create_run(
        first["experiment_id"],
        tags={
            SWEEP_TAG: "abc123",
            KEY_TAG: orphan_key,
            KIND_TAG: "job",
            "mlflow.parentRunId": first["parent_run_id"],
        },
    ).info.run_id
    assert client.get_run(orphan).data.params == {}
    records.append(dict(records[0], result_key=orphan_key, inlier="7", auroc=77.0))
    again = _log(store, records, "half-logged")
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 1, 2)
    run = client.get_run(orphan)
    assert run.data.params == {
        "dataset": "digits",
        "inlier": "7",
        "method": "raw",
        "seed": "0",
        "contamination": "0.0",
        "fitset": "train",
        "detector": "knn",
    }
    assert run.data.metrics["auroc"] == 77.0 and HASH_TAG in run.data.tags
    # An update of a complete run logs no param again (MLflow refuses changed ones anyway).
    records[0] = dict(records[0], auroc=11.0)
    assert _log(store, records, "half-logged")["updated"] == 1


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("http://alice:s3cret@mlflow.example:5000", "http://***@mlflow.example:5000"),
        ("https://ghp_TOKEN123@mlflow.example/", "https://***@mlflow.example/"),
        (
            "postgresql://droc:p@ss@db.example:5432/mlflow?sslmode=require",
            "postgresql://***@db.example:5432/mlflow?sslmode=require",
        ),
        (
            "mysql+pymysql://db.example/mlflow?user=droc&password=hunter2&charset=utf8",
            "mysql+pymysql://db.example/mlflow?user=droc&password=***&charset=utf8",
        ),
        (
            "https://acct.blob.core.windows.net/c?sv=2022&sig=AbC%2Bd&api_key=k1",
            "https://acct.blob.core.windows.net/c?sv=2022&sig=***&api_key=***",
        ),
        ("sqlite:////work/results/mlflow/mlflow.db", "sqlite:////work/results/mlflow/mlflow.db"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
        (
            "ConnectionError: request to http://bob:pw@h:1/api failed; retry http://bob:pw@h:1",
            "ConnectionError: request to http://***@h:1/api failed; retry http://***@h:1",
        ),
    ],
)
def test_redact_uri_strips_credentials(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown
    assert redact_uri(shown) == shown  # idempotent


def test_credentials_in_the_tracking_uri_are_never_logged_or_returned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = "http://alice:s3cret@127.0.0.1:9/?token=t0ken"
    with caplog.at_level(logging.WARNING, logger="pipeline_lib.tracking.mlflow_store"):
        store = ensure_experiment(uri, "droc", artifact_dir=None, timeout_s=1)
        summary = log_sweep(
            job_records(1),
            uri=uri,
            experiment="droc",
            sweep="abc",
            lock_path=tmp_path / "writer.lock",
            timeout_s=1,
        )
    assert store["status"] == summary["status"] == "unreachable"
    assert summary["tracking_uri"] == "http://***@127.0.0.1:9/?token=***"
    written = json.dumps([store, summary]) + caplog.text
    assert "s3cret" not in written and "alice" not in written and "t0ken" not in written
    assert "http://***@127.0.0.1:9/" in caplog.text
