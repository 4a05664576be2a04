"""Writing a package: the one path that turns a benchmark cell into a package folder.

:func:`package_cell` takes every step a package shares: it rebuilds the representation,
lets the cell's protocol (:mod:`pipeline_lib.deploy.cell_protocol`) fit the detector and
hold out the threshold, measures and saves the package, exports TorchScript and ONNX, and
checks their parity with the eager scores on the saved package read back.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from pipeline_lib.deploy.cell_protocol import CellProtocol, FitSettings
from pipeline_lib.deploy.export import (
    ParityReport,
    Scorer,
    check_parity,
    export_onnx,
    export_torchscript,
    onnx_scorer,
    torchscript_scorer,
)
from pipeline_lib.deploy.package_format import PackageError
from pipeline_lib.deploy.package_kinds import Package
from pipeline_lib.deploy.representation_file import cell_representation


def package_cell(
    out_dir: str | os.PathLike,
    protocol: CellProtocol,
    *,
    model_path: str | os.PathLike | None,
    cell: dict[str, Any],
    detector_params: dict[str, Any],
    width: int,
    target_fpr: float,
    recorded_auroc: float | None = None,
) -> dict[str, Any]:
    """Package one benchmark cell into ``out_dir``; returns the package's metrics record.

    The steps every package takes: rebuild the representation (refused before any work if
    it cannot be packaged), let ``protocol`` fit the detector exactly as the benchmark did
    and choose the threshold on held-out inliers, measure the package on the test split,
    save it, export TorchScript and ONNX and check their parity with the eager scores.

    Parameters
    ----------
    out_dir : str or PathLike
        Package folder (replaced if it exists).
    protocol : CellProtocol
        How images become scores: whole images
        (:class:`~pipeline_lib.deploy.image_protocol.ImageProtocol`) or dense patches with an
        anomaly map (:class:`~pipeline_lib.deploy.patch_protocol.PatchProtocol`), and the
        cell's input files.
    model_path : str or PathLike or None
        The trained ``model.pt``; None for a frozen method.
    cell : dict
        ``dataset``, ``inlier``, ``method``, ``detector``, ``seed`` (``contamination``).
    detector_params : dict
        The detector's hyper-parameters from the config.
    width : int
        ``embed.width`` (frozen ResNet).
    target_fpr : float
        Target false-positive rate of the threshold.
    recorded_auroc : float or None
        The AUC the benchmark recorded for this cell, stored beside the package's.

    Returns
    -------
    dict
        Threshold, its held-out and test FPR / TPR, AUCs and the parity report.

    Raises
    ------
    PackageError
        If the method cannot be packaged, or the exported graphs disagree with the eager
        outputs beyond the parity tolerance.
    """
    method, seed = cell["method"], int(cell["seed"])
    representation, spec = cell_representation(method, model_path, seed=seed, width=width)
    settings = FitSettings(cell["detector"], detector_params, target_fpr, seed)
    calibration = protocol.fit(representation, settings)
    info: dict[str, Any] = {
        "cell": {**cell, "fitset": protocol.fitset},
        "detector_params": detector_params,
        "representation": spec,
        "target_fpr": float(target_fpr),
        **calibration.info,
    }
    package = protocol.build(representation, calibration, info)
    metrics = protocol.measure(package, calibration, recorded_auroc)
    info["metrics"] = metrics

    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    package.save(out_dir)
    images = calibration.test_images
    rng = np.random.default_rng(seed)
    sample = images[np.sort(rng.permutation(len(images))[: protocol.parity_images])]
    reports = _export_and_check(package, protocol, sample, out_dir, info=info, seed=seed)
    parity, flat = protocol.parity_record(reports, len(sample))
    info["parity"] = parity
    package.save(out_dir)  # with the export and parity reports
    if not all(report.ok for report in reports.values()):
        described = "; ".join(f"{part}: {r.describe()}" for part, r in reports.items())
        raise PackageError(f"exported graphs disagree with the eager model: {described}")
    return {**metrics, **flat}


def _export_and_check(
    package: Package,
    protocol: CellProtocol,
    sample: np.ndarray,
    out_dir: Path,
    *,
    info: dict[str, Any],
    seed: int,
) -> dict[str, ParityReport]:
    """Export the graphs (where the protocol allows) and compare them with the eager path.

    The reloaded package is compared too, so the saved files are checked as well as the
    exported graphs. An export record of the protocol goes to ``info["export"]``.
    """
    reloaded = type(package).load(out_dir, batch_size=package.batch_size)
    others: dict[str, Scorer] = {"package_reloaded": reloaded.graph_outputs}
    graph = package.graph()
    export, record = protocol.export_plan(graph)
    if export:
        export_torchscript(graph, sample[:2], out_dir / "model.ts")
        export_onnx(graph, sample[:2], out_dir / "model.onnx", output_names=package.outputs)
        calls = {"images_per_call": package.images_per_call}
        others["torchscript"] = torchscript_scorer(out_dir / "model.ts", **calls)
        others["onnx"] = onnx_scorer(out_dir / "model.onnx", **calls)
    if record is not None:
        info["export"] = record
    return check_parity(sample, package.graph_outputs, others, parts=package.outputs, seed=seed)
