"""The image package (``kind: image``): a representation, a fitted detector and a threshold.

One score per whole image, for every cell but MVTec's
(:mod:`pipeline_lib.deploy.patch_package`). The eager scorer
(:meth:`PackagedDetector.normality`) is the pipeline's own code path
(:func:`~pipeline_lib.models.embed.extract_embeddings` then ``detector.score_samples``), so a
packaged cell scores exactly as the benchmark did; the exported graphs are checked against
it at packaging time (:func:`~pipeline_lib.deploy.export.check_parity`).

Threshold: an image is an anomaly when its anomaly score (``-score_samples``) exceeds the
threshold, chosen at a target false-positive rate on **held-out** inlier scores
(:mod:`pipeline_lib.deploy.threshold`); the FPR / TPR it gives on the test split are
measured and stored beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from pipeline_lib.deploy.export import ScoringGraph, detector_graph
from pipeline_lib.deploy.saved_package import SavedPackage
from pipeline_lib.detection.evaluate import to_anomaly_scores
from pipeline_lib.models.embed import extract_embeddings


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
