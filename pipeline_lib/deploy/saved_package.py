"""A package folder's files, and the base class that saves a package to them and reads it back.

A package is a folder (what the MLflow pyfunc carries as its artifact, and what
``droc score --model FOLDER`` reads directly):

=====================  ===================================================================
``package.json``       format, kind, cell, preprocessing (input side), threshold, metrics,
                       parity
``representation.pt``  ``torch.save`` dict of tensors and plain values, read with
                       ``weights_only``; its network spec is checked before a network is
                       built (:mod:`pipeline_lib.deploy.representation_file`)
``detector.npz``       the fitted detector's arrays (``allow_pickle=False``)
``detector.json``      the rest of it: allow-listed class, parameters, fitted values
                       (:mod:`pipeline_lib.deploy.detector_state`)
``model.ts``           TorchScript graph uint8 images -> normality
                       (:mod:`pipeline_lib.deploy.export`)
``model.onnx``         the same graph in ONNX (onnxruntime, no torch needed)
=====================  ===================================================================

``kind`` is ``image`` (:mod:`pipeline_lib.deploy.image_package`: one score per image) or
``patch`` (:mod:`pipeline_lib.deploy.patch_package`, MVTec cells: a score and an anomaly
map per image); :class:`SavedPackage` is what both kinds share, and
:func:`pipeline_lib.deploy.package_kinds.load_package_folder` reads either. Both are
written by the one :func:`pipeline_lib.deploy.packaging.package_cell`.

Safe to open: reading a package runs no code from it and its memory is bounded. Nothing is
unpickled; each file is opened once, as a regular file (no symlink, FIFO or device), and
its size checked before it is read (:mod:`pipeline_lib.deploy.bounded_files`); the
archives' declared sizes and the JSON files' sizes are bounded
(:data:`~pipeline_lib.deploy.detector_state.MAX_STATE_BYTES`,
:data:`~pipeline_lib.deploy.bounded_files.MAX_JSON_BYTES`), and the network is no larger
than the weights the file holds, within
:data:`~pipeline_lib.deploy.representation_file.ARCH_BOUNDS`. Formats 1 and 2
held the detector as a pickle (``detector.pkl``); they are refused, with the deploy step to
re-run, and their pickle is never opened.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torch import nn

from pipeline_lib.deploy.bounded_files import read_json, resolve_package_folder
from pipeline_lib.deploy.detector_state import (
    STATE_FILE,
    open_detector_files,
    read_detector,
    save_detector,
)
from pipeline_lib.deploy.package_format import (
    PACKAGE_FORMAT,
    PICKLE_FORMATS,
    READABLE_FORMATS,
    REDEPLOY,
    PackageError,
)
from pipeline_lib.deploy.representation_file import (
    open_representation_file,
    read_representation,
    write_representation,
)
from pipeline_lib.runtime.io import atomic_path

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

        What :meth:`load` and :func:`~pipeline_lib.deploy.package_kinds.load_package_folder` do
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
            "pipeline_lib.deploy.package_kinds.load_package_folder"
        )
    return document


def document_info(document: dict[str, Any]) -> dict[str, Any]:
    """What ``package.json`` holds besides the format and the fields the classes read."""
    return {k: v for k, v in document.items() if k not in _HEADER_KEYS}
