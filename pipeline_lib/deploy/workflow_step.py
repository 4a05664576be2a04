"""The workflow's deploy step: choose the cell, package it, log and register it in MLflow.

Two rules, two functions. ``deploy_model`` (:func:`package_deploy_cell`) chooses and
packages the cell; it writes no MLflow store, so it may run on a compute node.
``register_model`` (:func:`register_package`) logs the package folder as a pyfunc model and
registers it; it is a local rule that runs after the loggers (``log_to_mlflow``,
``log_mvtec_to_mlflow``) and takes their writer lock, so it is the only MLflow writer at
its time (SQLite allows one writer, and only on the host that holds the file).
"""

from __future__ import annotations

import base64
import fcntl
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.deploy.cell_protocol import CellProtocol
from pipeline_lib.deploy.image_protocol import ImageProtocol
from pipeline_lib.deploy.packaging import package_cell
from pipeline_lib.deploy.patch_protocol import PatchProtocol
from pipeline_lib.registry import detector_spec
from pipeline_lib.results.tidy_table import load_results_csv

#: MVTec detectors the deploy step cannot package: RotNet's own classifier fits nothing on
#: features (it is the network's rotation head), so ``best`` never picks it.
UNPACKABLE_DETECTORS = ("rotation_classifier",)


def choose_cell(results: pd.DataFrame, deploy: Mapping[str, Any], *, contamination: float) -> dict:
    """The (method, detector) of ``deploy``, or with ``best`` the highest mean AUC over seeds.

    Only rows of the deployed data set and class, fit set ``train``, space ``f`` and the
    given contamination count. Ties go to the first pair in sorted order.

    Raises
    ------
    ValueError
        If no result matches (the message names the filter).
    """
    rows = results[
        (results["dataset"] == deploy["dataset"])
        & (results["inlier"].astype(str) == str(deploy["inlier"]))
        & (results["fitset"] == "train")
        & np.isclose(results["contamination"].astype(float), contamination)
    ]
    if "space" in rows:
        rows = rows[rows["space"].fillna("f") == "f"]
    if not deploy["best"]:
        return {"method": deploy["method"], "detector": deploy["detector"]}
    if rows.empty:
        raise ValueError(
            f"no results for {deploy['dataset']} class {deploy['inlier']} (fit set train, "
            f"contamination {contamination:g}) to choose the best cell from"
        )
    means = rows.groupby(["method", "detector"])["auroc"].mean().sort_index()
    method, detector = means.idxmax()
    return {"method": method, "detector": detector, "best_mean_auroc": float(means.max())}


def recorded_auroc(results: pd.DataFrame, cell: Mapping[str, Any]) -> float:
    """The AUC the detection step recorded for ``cell`` (fit set train, space f)."""
    match = results[
        (results["dataset"] == cell["dataset"])
        & (results["inlier"].astype(str) == str(cell["inlier"]))
        & (results["method"] == cell["method"])
        & (results["detector"] == cell["detector"])
        & (results["seed"].astype(int) == int(cell["seed"]))
        & (results["fitset"] == "train")
        & np.isclose(results["contamination"].astype(float), float(cell["contamination"]))
    ]
    if "space" in match:
        match = match[match["space"].fillna("f") == "f"]
    if len(match) != 1:
        raise ValueError(f"expected one recorded result for {dict(cell)}, found {len(match)}")
    return float(match["auroc"].iloc[0])


def input_example(images: np.ndarray, n: int = 2) -> pd.DataFrame:
    """A request of the first ``n`` images as base64 PNG, logged with the model as its example."""
    from PIL import Image

    images = images[:n]
    encoded = []
    for image in images:
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="PNG")
        encoded.append(base64.b64encode(buffer.getvalue()).decode())
    return pd.DataFrame({"name": [f"example{i}" for i in range(n)], "image": encoded})


def cell_protocol(
    paths: Mapping[str, str | None], *, max_fit: int, patches: Mapping[str, Any] | None
) -> CellProtocol:
    """The protocol of a cell: MVTec's patches (``patches`` given) or whole images.

    Parameters
    ----------
    paths : mapping
        The method's files: ``dataset``, ``split`` and ``features``; MVTec: ``category``.
    max_fit : int
        ``detect.max_fit`` (image cells).
    patches : mapping or None
        MVTec's ``patch_size``, ``stride``, ``sigma``, ``normalize``, ``max_fit_patches``
        and ``batch_size``.
    """
    if patches is not None:
        return PatchProtocol(category_path=paths["category"], **patches)
    return ImageProtocol(
        dataset_path=paths["dataset"],
        split_path=paths["split"],
        features_path=paths["features"],
        max_fit=max_fit,
    )


def package_deploy_cell(
    out_dir: str | os.PathLike,
    *,
    cell: Mapping[str, Any],
    results_csv: str | os.PathLike,
    files: Mapping[str, Mapping[str, str | None]],
    detector_params: Mapping[str, Mapping[str, Any]],
    width: int,
    max_fit: int,
    target_fpr: float,
    patches: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Package the configured cell into ``out_dir``; no MLflow.

    Every cell goes through :func:`~pipeline_lib.deploy.packaging.package_cell`; an MVTec
    cell (``patches`` given) with the patch protocol from its ``category`` and ``model``
    files, any other with the image protocol (:func:`cell_protocol`).

    Parameters
    ----------
    out_dir : str or PathLike
        Package folder.
    cell : mapping
        ``deploy`` settings resolved by the workflow: ``dataset``, ``inlier``, ``seed``,
        ``contamination``, ``best``, ``method``, ``detector``.
    results_csv : str or PathLike
        The sweep's tidy results (for ``best`` and the recorded AUC).
    files : mapping
        Method -> its ``dataset``, ``split``, ``features`` and ``model`` (None if frozen);
        MVTec: its ``category`` and ``model``.
    detector_params : mapping
        Detector id -> hyper-parameters (the config's ``detectors``).
    width, max_fit : int
        ``embed.width``, ``detect.max_fit``.
    target_fpr : float
    patches : mapping or None
        MVTec cells: ``patch_size``, ``stride``, ``sigma``, ``normalize``,
        ``max_fit_patches`` and ``batch_size`` (the config's ``mvtec`` settings).

    Returns
    -------
    record : dict
        The cell, the package's metrics and folder (``best_mean_auroc`` with ``best``).
    example : DataFrame
        The request logged with the model as its input example (:func:`input_example` of
        the cell's first test images).
    """
    results = load_results_csv(results_csv)
    if patches is not None:
        results = results[~results["detector"].isin(UNPACKABLE_DETECTORS)]
    # A plugin's detector scores with its package's code, which no package holds.
    results = results[[detector_spec(name) is None for name in results["detector"]]]
    chosen = choose_cell(results, cell, contamination=float(cell["contamination"]))
    full = {
        "dataset": cell["dataset"],
        "inlier": str(cell["inlier"]),
        "method": chosen["method"],
        "detector": chosen["detector"],
        "seed": int(cell["seed"]),
        "contamination": float(cell["contamination"]),
    }
    recorded = recorded_auroc(results, full)
    paths = files[full["method"]]
    protocol = cell_protocol(paths, max_fit=max_fit, patches=patches)
    metrics = package_cell(
        out_dir,
        protocol,
        model_path=paths.get("model"),
        cell=full if patches is None else {k: v for k, v in full.items() if k != "contamination"},
        detector_params=dict(detector_params[full["detector"]] or {}),
        width=width,
        target_fpr=target_fpr,
        recorded_auroc=recorded,
    )
    record: dict[str, Any] = {"cell": full, "metrics": metrics, "package": str(out_dir)}
    if "best_mean_auroc" in chosen:
        record["best_mean_auroc"] = chosen["best_mean_auroc"]
    return record, input_example(protocol.example_images())


def register_package(
    package_dir: str | os.PathLike,
    record: Mapping[str, Any],
    *,
    example: pd.DataFrame,
    registered_name: str,
    target_fpr: float,
    best: bool,
    tracking: Mapping[str, Any],
) -> dict[str, Any]:
    """Log the package folder as a pyfunc model and register it, under the writer lock.

    Parameters
    ----------
    package_dir : str or PathLike
        The folder :func:`package_deploy_cell` wrote.
    record : mapping
        Its record (``cell`` and ``metrics`` become the run's params and metrics).
    example : DataFrame
        The input example logged with the model.
    registered_name : str
    target_fpr : float
    best : bool
        Whether the cell was chosen as the best (a param of the run).
    tracking : mapping
        ``tracking_uri``, ``experiment_id`` and ``lock_path`` (the loggers' writer lock).

    Returns
    -------
    dict
        ``record`` with ``registry``: ``status`` "registered" and the registry entry.
    """
    from pipeline_lib.deploy.mlflow_model import log_and_register

    lock_path = Path(tracking["lock_path"])
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:  # the pipeline's MLflow writer lock
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            registry = log_and_register(
                package_dir,
                tracking_uri=tracking["tracking_uri"],
                experiment_id=tracking["experiment_id"],
                registered_name=registered_name,
                run_name=f"deploy {registered_name}",
                params={**record["cell"], "target_fpr": target_fpr, "best": bool(best)},
                metrics={k: v for k, v in record["metrics"].items() if np.isfinite(v)},
                tags={"droc.kind": "deploy"},
                input_example=example,
            )
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return {**record, "registry": {"status": "registered", **registry}}
