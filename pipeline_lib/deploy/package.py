"""The packaged model of one benchmark cell: weights, preprocessing, detector, threshold.

A package is a folder (what the MLflow pyfunc carries as its artifact, and what
``droc score --model FOLDER`` reads directly):

=====================  ===================================================================
``package.json``       format, kind, cell, preprocessing (input side), threshold, metrics,
                       parity
``representation.pt``  ``torch.save`` dict of tensors and plain values, read with
                       ``weights_only``; its network spec is checked before a network is
                       built (:mod:`.representation_file`)
``detector.npz``       the fitted detector's arrays (``allow_pickle=False``)
``detector.json``      the rest of it: allow-listed class, parameters, fitted values
                       (:mod:`pipeline_lib.deploy.detector_state`)
``model.ts``           TorchScript graph uint8 images -> normality (:mod:`.export`)
``model.onnx``         the same graph in ONNX (onnxruntime, no torch needed)
=====================  ===================================================================

``kind`` is ``image`` here (one score per image) and ``patch`` for MVTec cells
(:mod:`pipeline_lib.deploy.patch_protocol`: a score and an anomaly map per image);
:func:`pipeline_lib.deploy.packages.load_package_folder` reads either. Both are written by
the one :func:`package_cell`, which takes what differs from a
:class:`~pipeline_lib.deploy.protocols.CellProtocol`.

Safe to open: reading a package runs no code from it and its memory is bounded. Nothing is
unpickled; each file is opened once, as a regular file (no symlink, FIFO or device), and
its size checked before it is read (:mod:`pipeline_lib.deploy.package_files`); the
archives' declared sizes and the JSON files' sizes are bounded
(:data:`~pipeline_lib.deploy.detector_state.MAX_STATE_BYTES`,
:data:`~pipeline_lib.deploy.detector_state.MAX_JSON_BYTES`), and the network is no larger
than the weights the file holds, within
:data:`~pipeline_lib.deploy.representation_file.ARCH_BOUNDS`. Formats 1 and 2
held the detector as a pickle (``detector.pkl``); they are refused, with the deploy step to
re-run, and their pickle is never opened.

The eager scorer (:meth:`PackagedDetector.normality`) is the pipeline's own code path
(:func:`~pipeline_lib.models.embed.extract_embeddings` then ``detector.score_samples``), so a
packaged cell scores exactly as the benchmark did; the exported graphs are checked against
it at packaging time (:func:`~pipeline_lib.deploy.export.check_parity`).

Threshold: an image is an anomaly when its anomaly score (``-score_samples``) exceeds the
threshold, chosen at a target false-positive rate on **held-out** inlier scores
(:mod:`pipeline_lib.deploy.threshold`); the FPR / TPR it gives on the test split are
measured and stored beside it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from torch import nn

from pipeline_lib.deploy.detector_state import (
    STATE_FILE,
    open_detector_files,
    read_detector,
    read_json,
    save_detector,
)
from pipeline_lib.deploy.errors import (
    PACKAGE_FORMAT,
    PICKLE_FORMATS,
    READABLE_FORMATS,
    REDEPLOY,
    PackageError,
)
from pipeline_lib.deploy.export import (
    ParityReport,
    Scorer,
    ScoringGraph,
    check_parity,
    detector_graph,
    export_onnx,
    export_torchscript,
    onnx_scorer,
    torchscript_scorer,
)
from pipeline_lib.deploy.package_files import resolve_package_folder
from pipeline_lib.deploy.representation_file import (
    cell_representation,
    open_representation_file,
    read_representation,
    write_representation,
)
from pipeline_lib.detection.evaluate import to_anomaly_scores
from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.runtime.io import atomic_path

if TYPE_CHECKING:
    from pipeline_lib.deploy.packages import Package
    from pipeline_lib.deploy.protocols import CellProtocol

#: Keys of ``package.json`` the package classes read themselves (the rest is ``info``).
_HEADER_KEYS = frozenset(
    {
        "format",
        "kind",
        "image_size",
        "threshold",
        "resize",
        "patch_size",
        "stride",
        "sigma",
        "normalize",
    }
)


@dataclass(frozen=True)
class FitSettings:
    """The cell's detector and the threshold's target, as the benchmark configured them."""

    detector: str
    detector_params: dict[str, Any]
    target_fpr: float
    seed: int


@dataclass
class SavedPackage:
    """What every package holds, and how it is saved and read back; kinds add their settings.

    Parameters
    ----------
    representation : nn.Module
        A :class:`~pipeline_lib.models.representation.Representation` in inference mode.
    detector : sklearn estimator
        Fitted on the representation's ``f`` features.
    image_size : int
        Side of the square input images.
    threshold : float
        Anomaly scores above it are anomalies.
    info : dict
        Everything else of ``package.json`` (cell, metrics, parity).
    batch_size : int
        Images (patches) per forward pass.
    """

    representation: nn.Module
    detector: Any
    image_size: int
    threshold: float
    info: dict[str, Any] = field(default_factory=dict, kw_only=True)
    batch_size: int = field(default=64, kw_only=True)
    #: Package kind in ``package.json``.
    kind: ClassVar[str]
    #: The kind's own fields of ``package.json`` and their types.
    settings: ClassVar[dict[str, type]] = {}

    def _header(self) -> dict[str, Any]:
        own = {name: getattr(self, name) for name in self.settings}
        return {
            "kind": self.kind,
            "image_size": self.image_size,
            "threshold": self.threshold,
            **own,
        }

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``package.json``, ``representation.pt`` and the detector into ``folder``."""
        folder = Path(folder)
        write_model_files(folder, self.representation, self.info["representation"], self.detector)
        write_document(folder, self._header(), self.info)
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike, *, batch_size: int | None = None) -> Any:
        """Read a package folder written by :meth:`save` (``batch_size``: the kind's default).

        Raises
        ------
        PackageError
            If a file is missing, unreadable or of another format or kind (the message
            names it).
        """
        folder = resolve_package_folder(folder)
        document = read_document(folder, kind=cls.kind)
        return cls.from_document(folder, document, batch_size=batch_size)

    @classmethod
    def from_document(
        cls, folder: Path, document: dict[str, Any], *, batch_size: int | None = None
    ) -> Any:
        """The package of a resolved ``folder`` whose ``package.json`` is ``document``.

        What :meth:`load` and :func:`~pipeline_lib.deploy.packages.load_package_folder` do
        after reading ``package.json`` (once) and choosing the class by its kind.

        Raises
        ------
        PackageError
            As :meth:`load`.
        """
        representation, detector = read_model_files(folder)
        own = {name: kind(document[name]) for name, kind in cls.settings.items()}
        return cls(
            representation=representation,
            detector=detector,
            image_size=int(document["image_size"]),
            threshold=float(document["threshold"]),
            info=document_info(document),
            **own,
            **({} if batch_size is None else {"batch_size": batch_size}),
        )


@dataclass
class PackagedDetector(SavedPackage):
    """A representation, a fitted detector and the threshold, scoring whole uint8 images.

    Fields as :class:`SavedPackage`: ``image_size`` is the training resolution,
    ``batch_size`` (default 64) images per forward pass.
    """

    #: Package kind in ``package.json``, and how new images are resized (the training
    #: readers' way: shorter side + centre crop).
    kind: ClassVar[str] = "image"
    resize: ClassVar[str] = "crop"
    #: What the exported graph returns (ONNX output names) and how many images it takes a
    #: call (None: any number).
    outputs: ClassVar[tuple[str, ...]] = ("normality",)
    images_per_call: ClassVar[int | None] = None

    def normality(self, images: np.ndarray) -> np.ndarray:
        """``score_samples`` of uint8 images ``(n, s, s, 3)``: higher = more normal."""
        features = extract_embeddings(
            self.representation, images, batch_size=self.batch_size, device="cpu"
        )["f"]
        return np.asarray(self.detector.score_samples(features), np.float64)

    def anomaly_scores(self, images: np.ndarray) -> np.ndarray:
        """Anomaly scores (higher = more anomalous) of uint8 images ``(n, s, s, 3)``."""
        return to_anomaly_scores(self.normality(images))

    def graph_outputs(self, images: np.ndarray) -> np.ndarray:
        """What :meth:`graph` computes, the eager way (the parity check's reference)."""
        return self.normality(images)

    def graph(self) -> ScoringGraph:
        """The exportable graph: ``f`` then the detector as matrix products."""
        return ScoringGraph(self.representation.backbone, detector_graph(self.detector))


def write_model_files(
    folder: Path, representation: nn.Module, spec: dict[str, Any], detector: Any
) -> None:
    """``representation.pt`` (spec + state dict), ``detector.npz`` and ``detector.json``."""
    write_representation(folder / "representation.pt", representation, spec)
    save_detector(detector, folder)


def read_model_files(folder: Path) -> tuple[nn.Module, Any]:
    """The representation (inference mode) and the fitted detector of a package folder.

    Never unpickles: the three files are opened first, each once, as regular files of
    bounded sizes; the detector is read from ``detector.npz`` + ``detector.json``, the
    representation with ``weights_only`` after its spec is checked against its weights.

    Raises
    ------
    PackageError
        If a file is missing, too large or invalid, or the folder holds only a pickled
        ``detector.pkl`` (formats 1 and 2: refused unread).
    """
    if not os.path.lexists(folder / STATE_FILE) and os.path.lexists(folder / "detector.pkl"):
        raise PackageError(
            f"{folder} holds detector.pkl, a pickled detector of a package format before "
            f"{PACKAGE_FORMAT}; it is not loaded (unpickling can run code). {REDEPLOY}"
        )
    # Every file opened (and refused if it is not a regular file of a bounded size) before
    # any is read: a symlinked detector.npz is named before a network is built.
    with (
        open_representation_file(folder / "representation.pt") as representation_file,
        open_detector_files(folder) as (state_file, arrays_file),
    ):
        detector = read_detector(state_file, arrays_file)
        return read_representation(representation_file), detector


def write_document(folder: Path, header: dict[str, Any], info: dict[str, Any]) -> None:
    """``package.json``: the format, the package's own fields (``header``) and ``info``."""
    document = {"format": PACKAGE_FORMAT, **header, **info}
    with atomic_path(folder / "package.json") as tmp:
        Path(tmp).write_text(json.dumps(document, indent=2, sort_keys=True))


def read_document(folder: str | os.PathLike, *, kind: str | None = None) -> dict[str, Any]:
    """``package.json`` of a package folder (opened as a regular file, size-checked first).

    Raises
    ------
    PackageError
        If the file is missing, not a regular file, too large or not JSON, of an unknown or
        pickle-era format
        (1 or 2), or (with ``kind``) of another kind.
    """
    meta_path = Path(folder) / "package.json"
    if not os.path.lexists(meta_path):
        raise PackageError(
            f"{meta_path} is missing; --model must name a package folder written by the "
            "deploy step, or an MLflow model URI"
        )
    document = read_json(meta_path)
    if isinstance(document, dict) and document.get("format") in PICKLE_FORMATS:
        raise PackageError(
            f"{meta_path} is a {document['format']} package, whose detector is a pickle "
            f"(detector.pkl); this version does not load pickles (unpickling can run code). "
            f"{REDEPLOY}"
        )
    if not isinstance(document, dict) or document.get("format") not in READABLE_FORMATS:
        raise PackageError(f"{meta_path} is not a {' or '.join(READABLE_FORMATS)} file; {REDEPLOY}")
    if not isinstance(document.get("kind"), str):
        raise PackageError(f"{meta_path} has no kind; {REDEPLOY}")
    if kind is not None and document["kind"] != kind:
        raise PackageError(
            f"{meta_path} holds a {document['kind']!r} package, not {kind!r}; load it with "
            "pipeline_lib.deploy.packages.load_package_folder"
        )
    return document


def document_info(document: dict[str, Any]) -> dict[str, Any]:
    """What ``package.json`` holds besides the format and the fields the classes read."""
    return {k: v for k, v in document.items() if k not in _HEADER_KEYS}


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
        (:class:`~pipeline_lib.deploy.protocols.ImageProtocol`) or dense patches with an
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
