"""What differs between packaging an image cell and an MVTec patch cell: the cell protocol.

:func:`~pipeline_lib.deploy.packaging.package_cell` takes every step a package shares
(network, files, export, parity check); a :class:`CellProtocol` supplies the rest: how the
detector is fitted and the threshold held out, which package class scores new images, what
is measured on the test split, and how the export and its parity report are recorded. This
module holds the interface and what travels through it (:class:`FitSettings` in,
:class:`Calibration` out); the two protocols implement it:

* :class:`~pipeline_lib.deploy.image_protocol.ImageProtocol`: one score per whole image;
  the detector refitted on the stored features of the detection step (same fit rows), the
  threshold held out by fit row.
* :class:`~pipeline_lib.deploy.patch_protocol.PatchProtocol`: MVTec AD, a score and an
  anomaly map per image from its dense patches; the threshold held out by training image.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from torch import nn

from pipeline_lib.deploy.export import ParityReport


@dataclass(frozen=True)
class FitSettings:
    """The cell's detector and the threshold's target, as the benchmark configured them."""

    detector: str
    detector_params: dict[str, Any]
    target_fpr: float
    seed: int


@dataclass
class Calibration:
    """A fitted detector, its threshold and what the protocol measures the package with.

    Attributes
    ----------
    detector : sklearn estimator
        Fitted on the benchmark's fit set.
    threshold : float
        On the package's anomaly score.
    held_out : ndarray
        Held-out anomaly scores of the fit units (rows or training images).
    test_images : ndarray of shape (n, s, s, 3), uint8
        The test split at the model's input size.
    info : dict
        The protocol's entries of ``package.json`` (``threshold_rule``, ...).
    data : dict
        Whatever else :meth:`CellProtocol.measure` needs (test scores, labels, counts).
    """

    detector: Any
    threshold: float
    held_out: np.ndarray
    test_images: np.ndarray
    info: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def image_size(self) -> int:
        """Side of the model's (square) input images."""
        return int(self.test_images.shape[1])


class CellProtocol(Protocol):
    """How one kind of cell becomes a package; its inputs are the implementing dataclass's."""

    #: The benchmark's fit set (``cell.fitset`` of ``package.json``).
    fitset: str
    #: Test images of the export-time parity check (a seeded draw).
    parity_images: int

    def fit(self, representation: nn.Module, settings: FitSettings) -> Calibration:
        """Fit the detector as the benchmark did and hold out inliers for the threshold."""

    def build(self, representation: nn.Module, calibration: Calibration, info: dict) -> Any:
        """The package object (``info``: the rest of ``package.json``)."""

    def measure(
        self, package: Any, calibration: Calibration, recorded_auroc: float | None
    ) -> dict[str, Any]:
        """Threshold, held-out and test rates and AUCs of the package on the test split."""

    def export_plan(self, graph: Any) -> tuple[bool, dict[str, Any] | None]:
        """Whether to export ``graph``, and the ``export`` entry of ``package.json`` (or None)."""

    def parity_record(
        self, reports: dict[str, ParityReport], n_images: int
    ) -> tuple[dict[str, Any], dict[str, float]]:
        """The ``parity`` entry of ``package.json`` and its flat metrics, from the reports."""

    def example_images(self) -> np.ndarray:
        """Images of the input example logged with the MLflow model."""
