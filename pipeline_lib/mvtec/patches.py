"""The MVTec patch protocol, torch side: patch sampling, dense patch embedding, scoring.

Paper, Sec. 4.4 and App. E.2 (docs/protocol.md, "MVTec AD"): representations are learned on
32x32 patches of 256x256 images. At test time the patches of every image are embedded
densely with stride 4, which gives a ``(256 - 32) / 4 + 1 = 57`` by 57 map of patch scores
per image (the appendix prints ``256 - 224`` for ``256 - 32``, a typo: only 32 gives 57).
Image score, up-sampling and metrics are in :mod:`pipeline_lib.mvtec.localize` (numpy only).

Speed: patches are cut on the compute device from one uint8 copy of the images (an
``unfold`` view, so only the current batch of patches is ever materialised) and embedded in
large batches; nothing is copied per patch on the host.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from pipeline_lib.data.mvtec import MVTecCategory
from pipeline_lib.detection.auroc_intervals import auroc_interval_record
from pipeline_lib.detection.detectors import DETECTORS
from pipeline_lib.detection.evaluate import score_with_detector, to_anomaly_scores
from pipeline_lib.models.proxy import ProxyModel
from pipeline_lib.models.representation import Representation
from pipeline_lib.mvtec.localize import (
    DEFAULT_SIGMA,
    PATCH_SIZE,
    STRIDE,
    evaluate_score_maps,
    grid_side,
    image_scores,
)
from pipeline_lib.mvtec.pixel_intervals import LOCALIZATION_INTERVAL_FIELDS
from pipeline_lib.mvtec.pro import DEFAULT_MAX_FPR
from pipeline_lib.registry import ROTATION_DETECTORS
from pipeline_lib.ssl.rotation import rotation_view_logits, scores_from_rotation_logits
from pipeline_lib.ssl.settings import DEFAULT_EXECUTION, Execution, TrainSettings

__all__ = [
    "PatchOptions",
    "dense_positions",
    "embed_category_patches",
    "embed_patches",
    "map_patches",
    "patch_score_maps",
    "random_patches",
    "rotation_anomaly_patches",
    "sample_positions",
    "score_category",
    "train_on_patches",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PatchOptions:
    """How :func:`map_patches` cuts and batches patches: the grid and the execution settings.

    One object for the five settings every patch pass (embedding, RotNet scores) hands down
    unchanged, so a caller states them once.

    Parameters
    ----------
    patch_size, stride : int, default=32, 4
        The dense grid (the paper's 57x57 on 256x256 images).
    batch_size : int, default=4096
        Patches per forward pass.
    device : torch.device or str, default="cpu"
    progress : bool, default=False
        A progress bar over the batches.
    """

    patch_size: int = PATCH_SIZE
    stride: int = STRIDE
    batch_size: int = 4096
    device: torch.device | str = "cpu"
    progress: bool = False


DEFAULT_OPTIONS = PatchOptions()


def _check_images(images: np.ndarray) -> int:
    if (
        not isinstance(images, np.ndarray)
        or images.dtype != np.uint8
        or images.ndim != 4
        or images.shape[-1] != 3
    ):
        raise ValueError(
            "images must be a uint8 array of shape (n, size, size, 3), got "
            f"{getattr(images, 'dtype', type(images))} {getattr(images, 'shape', '')}"
        )
    if images.shape[1] != images.shape[2]:
        raise ValueError(f"images must be square, got {images.shape[1]}x{images.shape[2]}")
    if len(images) == 0:
        raise ValueError("no images")
    return images.shape[1]


def random_patches(
    images: np.ndarray, *, per_image: int, patch_size: int = PATCH_SIZE, seed: int
) -> np.ndarray:
    """Random square crops, ``per_image`` from every image, positions uniform (seeded).

    The training set of a patch representation: the paper learns on 32x32 patches cropped
    from the 256x256 training images. Positions are any pixel offset (not only the dense
    grid), drawn from ``np.random.default_rng(seed)``.

    Parameters
    ----------
    images : ndarray of shape (n, size, size, 3), uint8
    per_image : int
        Crops per image.
    patch_size : int, default=32
    seed : int

    Returns
    -------
    ndarray of shape (n * per_image, patch_size, patch_size, 3), uint8
        Image by image, in the order drawn.
    """
    size = _check_images(images)
    grid_side(size, patch_size, 1)
    if per_image < 1:
        raise ValueError(f"per_image must be >= 1, got {per_image}")
    rng = np.random.default_rng(seed)
    n = len(images)
    image_index = np.repeat(np.arange(n), per_image)
    rows, cols = rng.integers(0, size - patch_size + 1, size=(2, n * per_image))
    windows = np.lib.stride_tricks.sliding_window_view(
        images, (patch_size, patch_size), axis=(1, 2)
    )
    # windows: (n, size - p + 1, size - p + 1, 3, p, p) view -> gather (k, 3, p, p)
    patches = windows[image_index, rows, cols]
    return np.ascontiguousarray(patches.transpose(0, 2, 3, 1))


def dense_positions(n_images: int, grid: int) -> np.ndarray:
    """Every ``(image, row, col)`` of the dense grid, image-major, shape ``(n * grid^2, 3)``."""
    image, row, col = np.meshgrid(
        np.arange(n_images), np.arange(grid), np.arange(grid), indexing="ij"
    )
    return np.stack([image.ravel(), row.ravel(), col.ravel()], axis=1).astype(np.int64)


def sample_positions(n_images: int, grid: int, *, max_patches: int | None, seed: int) -> np.ndarray:
    """Dense grid positions, or a seeded random subset of ``max_patches`` of them (sorted).

    The detector's fit set: the paper fits the KDE on all dense training patches
    (``max_patches=None``); a cap trades accuracy for time and memory.
    """
    positions = dense_positions(n_images, grid)
    if max_patches is None or max_patches >= len(positions):
        return positions
    if max_patches < 1:
        raise ValueError(f"max_patches must be >= 1 or None, got {max_patches}")
    keep = np.random.default_rng(seed).choice(len(positions), size=max_patches, replace=False)
    return positions[np.sort(keep)]


def map_patches(
    fn: Callable[[torch.Tensor], torch.Tensor],
    images: np.ndarray,
    *,
    positions: np.ndarray | None = None,
    options: PatchOptions = DEFAULT_OPTIONS,
) -> torch.Tensor:
    """Apply ``fn`` to patches of ``images`` in large batches on ``device``.

    The images are copied once to the device as uint8; ``unfold`` gives a
    ``(n, 3, grid, grid, p, p)`` view of every patch without copying, and each batch
    gathers ``batch_size`` patches from it, so memory beyond the images is one batch.

    Parameters
    ----------
    fn : callable
        Float patches ``(b, 3, p, p)`` in [0, 1] -> Tensor ``(b, ...)``; runs under
        ``torch.inference_mode``.
    images : ndarray of shape (n, size, size, 3), uint8
    positions : ndarray of shape (k, 3), int, optional
        ``(image, row, col)`` grid positions; None = the dense grid, image-major.
    options : PatchOptions, default=PatchOptions()
        Grid, batch size, device and progress bar.

    Returns
    -------
    Tensor of shape (k, ...)
        ``fn``'s outputs in ``positions`` order, float32 unless ``fn`` returns float64,
        on the CPU.
    """
    patch_size, stride, batch_size = options.patch_size, options.stride, options.batch_size
    size = _check_images(images)
    grid = grid_side(size, patch_size, stride)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if positions is None:
        positions = dense_positions(len(images), grid)
    positions = np.asarray(positions, dtype=np.int64)
    if positions.ndim != 2 or positions.shape[1] != 3:
        raise ValueError(f"positions must have shape (k, 3), got {positions.shape}")
    if len(positions) and (
        positions.min() < 0
        or positions[:, 0].max() >= len(images)
        or positions[:, 1:].max() >= grid
    ):
        raise ValueError(f"positions outside {len(images)} images x {grid}x{grid} grid")
    device = torch.device(options.device)
    data = torch.from_numpy(np.ascontiguousarray(images)).to(device).permute(0, 3, 1, 2)
    windows = data.unfold(2, patch_size, stride).unfold(3, patch_size, stride)
    index = torch.from_numpy(positions).to(device)
    outputs: list[torch.Tensor] = []
    starts = range(0, len(index), batch_size)
    with torch.inference_mode():
        for start in tqdm(starts, desc="patches", unit="batch", disable=not options.progress):
            where = index[start : start + batch_size]
            # Advanced indices around a slice put the batch first: (b, 3, p, p) uint8.
            batch = windows[where[:, 0], :, where[:, 1], where[:, 2]].float().div_(255.0)
            if device.type == "cuda":
                batch = batch.contiguous(memory_format=torch.channels_last)
            out = fn(batch)
            outputs.append(out.double().cpu() if out.dtype == torch.float64 else out.float().cpu())
    return torch.cat(outputs)


def _prepare(model: torch.nn.Module, device: torch.device | str) -> torch.nn.Module:
    model = model.to(device).eval()
    if torch.device(device).type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    return model


def embed_patches(
    model: Representation,
    images: np.ndarray,
    *,
    positions: np.ndarray | None = None,
    options: PatchOptions = DEFAULT_OPTIONS,
    space: str = "f",
) -> np.ndarray:
    """Features of patches (dense grid or given positions), in inference mode.

    Returns
    -------
    ndarray of shape (k, d), float32
        ``f`` (or ``g`` with ``space="g"``) of each patch, in ``positions`` order; for the
        dense grid ``reshape(n, grid, grid, d)`` gives the feature maps.
    """
    model = _prepare(model, options.device)

    def features(batch: torch.Tensor) -> torch.Tensor:
        out = model(batch)
        if space not in out:
            raise ValueError(f"the representation has no {space!r} output (has {sorted(out)})")
        return out[space]

    return map_patches(
        features,
        images,
        positions=positions,
        options=options,
    ).numpy()


def rotation_anomaly_patches(
    model: ProxyModel,
    images: np.ndarray,
    *,
    positions: np.ndarray | None = None,
    options: PatchOptions = DEFAULT_OPTIONS,
) -> np.ndarray:
    """RotNet's own anomaly score per patch: ``-sum_k p(y = k | rot_k(patch))``.

    The ``rotation_classifier`` detector's score (the paper's Table 1 form, as the
    image-level detector computes it with :func:`pipeline_lib.ssl.rotation.
    scores_from_rotation_logits`) per patch, turned into an anomaly score (higher = more
    anomalous) by :func:`pipeline_lib.detection.evaluate.to_anomaly_scores`, the pipeline's
    one sign flip; the feature file stores it so.

    Returns
    -------
    ndarray of shape (k,), float64
    """
    model = _prepare(model, options.device)
    name = ROTATION_DETECTORS["rotation_classifier"]

    def normality_of(batch: torch.Tensor) -> torch.Tensor:
        return scores_from_rotation_logits(rotation_view_logits(model, batch))[name]

    normality = map_patches(
        normality_of,
        images,
        positions=positions,
        options=options,
    ).numpy()
    return to_anomaly_scores(normality)  # the pipeline's one sign flip


def patch_score_maps(
    fit_features: np.ndarray,
    test_features: np.ndarray,
    *,
    n_images: int,
    detector: str,
    **detector_params: Any,
) -> np.ndarray:
    """Fit a detector on training-patch features and score every test patch into maps.

    The sign flip to anomaly scores happens in
    :func:`pipeline_lib.detection.evaluate.score_with_detector`, the pipeline's one place for
    it. KDE memory (the paper's detector): the fit features live on the compute device
    (``n_fit * d * 4`` bytes, float32) plus about three
    ``chunk_size^2`` float32 blocks and one ``chunk_size * d`` test slice, whatever the
    number of test patches
    (:class:`~pipeline_lib.detection.detectors.kde.KernelDensityScore`; at the
    paper's 680,000 x 512 fit set and ``chunk_size=2048`` that is 1.4 GB + 52 MB). On the
    host the detector holds float64 copies of both feature sets for the duration.

    Parameters
    ----------
    fit_features : ndarray of shape (n_fit, d)
    test_features : ndarray of shape (n_images * grid * grid, d)
        Dense test features, image-major (as :func:`embed_patches` returns them).
    n_images : int
    detector : str
        A key of :data:`pipeline_lib.detection.detectors.DETECTORS`.
    **detector_params

    Returns
    -------
    ndarray of shape (n_images, grid, grid), float32
        Anomaly scores, higher = more anomalous.
    """
    per_image, remainder = divmod(len(test_features), n_images)
    grid = int(round(per_image**0.5))
    if remainder or grid * grid != per_image:
        raise ValueError(
            f"{len(test_features)} test features do not form {n_images} square score maps"
        )
    scores = score_with_detector(fit_features, test_features, detector=detector, **detector_params)
    return scores.reshape(n_images, grid, grid).astype(np.float32)


def train_on_patches(
    settings: TrainSettings,
    train_images: np.ndarray,
    *,
    per_image: int,
    patch_size: int = PATCH_SIZE,
    seed: int,
    execution: Execution = DEFAULT_EXECUTION,
    checkpoint_path: str | os.PathLike | None = None,
    progress: bool = False,
) -> tuple[ProxyModel, list[dict[str, float]]]:
    """Train a representation on ``per_image`` random patches of every training image.

    The patches are drawn once (:func:`random_patches` with ``seed``) and form the training
    set of :func:`pipeline_lib.ssl.train.train_representation`, which applies the method's own
    view augmentations to them every step; ``settings``, ``execution``, ``checkpoint_path``
    and ``progress`` are its own.

    Returns
    -------
    model, history
        As :func:`~pipeline_lib.ssl.train.train_representation`.
    """
    from pipeline_lib.ssl.train import train_representation  # the training loop is heavy to import

    patches = random_patches(train_images, per_image=per_image, patch_size=patch_size, seed=seed)
    log.info(
        "%s: %d training patches of %dx%d from %d images",
        settings.method,
        len(patches),
        patch_size,
        patch_size,
        len(train_images),
    )
    return train_representation(
        settings,
        patches,
        seed=seed,
        execution=execution,
        checkpoint_path=checkpoint_path,
        progress=progress,
    )


def embed_category_patches(
    model: Representation,
    train_images: np.ndarray,
    test_images: np.ndarray,
    *,
    options: PatchOptions = DEFAULT_OPTIONS,
    max_fit_patches: int | None = None,
    seed: int = 0,
    rotation: bool = False,
) -> dict[str, np.ndarray]:
    """The feature file of one category and model: fit patches and dense test patches.

    Returns
    -------
    dict of str to ndarray
        ``f_fit`` (n_fit, d) and ``fit_positions`` (n_fit, 3): the detector's fit set, every
        dense training patch or a seeded subset of ``max_fit_patches``; ``f_test``
        (n_test * grid^2, d), image-major; ``grid``; with ``rotation``,
        ``rotation_anomaly_test`` (n_test, grid, grid) from :func:`rotation_anomaly_patches`.
    """
    grid = grid_side(_check_images(train_images), options.patch_size, options.stride)
    fit_positions = sample_positions(
        len(train_images), grid, max_patches=max_fit_patches, seed=seed
    )
    started = time.perf_counter()
    f_fit = embed_patches(model, train_images, positions=fit_positions, options=options)
    f_test = embed_patches(model, test_images, options=options)
    seconds = time.perf_counter() - started
    n_patches = len(f_fit) + len(f_test)
    log.info(
        "embedded %d fit + %d test patches (%d-d, grid %dx%d) in %.1f s, %.0f patches/s on %s",
        len(f_fit),
        len(f_test),
        f_fit.shape[1],
        grid,
        grid,
        seconds,
        n_patches / seconds,
        options.device,
    )
    features = {
        "f_fit": f_fit,
        "fit_positions": fit_positions,
        "f_test": f_test,
        "grid": np.array(grid),
    }
    if rotation:
        anomaly = rotation_anomaly_patches(model, test_images, options=options)
        features["rotation_anomaly_test"] = anomaly.reshape(len(test_images), grid, grid)
    return features


def _detector_maps(
    features: dict[str, np.ndarray],
    n_test: int,
    detector: str,
    detector_params: dict[str, Any] | None,
    device: torch.device | str | None,
) -> tuple[np.ndarray, int]:
    """:func:`score_category`'s score maps ``(n_test, grid, grid)`` and fitted patches."""
    if detector == "rotation_classifier":
        if "rotation_anomaly_test" not in features:
            raise ValueError(
                "the patch features hold no rotation_anomaly_test: only RotNet / rotation "
                "models have them, embedded with detect.rotation_classifier on (a feature "
                "file from before the score became sum_k p(k | rot_k x) holds "
                "rotation_nll_test instead: delete it to embed again)"
            )
        return np.asarray(features["rotation_anomaly_test"], dtype=np.float32), 0
    params = dict(detector_params or {})
    accepted = inspect.signature(DETECTORS[detector].__init__).parameters
    if device is not None and "device" in accepted and "device" not in params:
        params["device"] = str(device)
    maps = patch_score_maps(
        features["f_fit"], features["f_test"], n_images=n_test, detector=detector, **params
    )
    return maps, len(features["f_fit"])


def score_category(
    category: MVTecCategory,
    features: dict[str, np.ndarray],
    *,
    detector: str,
    detector_params: dict[str, Any] | None = None,
    device: torch.device | str | None = None,
    patch_size: int = PATCH_SIZE,
    stride: int = STRIDE,
    sigma: float = DEFAULT_SIGMA,
    normalize: bool = True,
    pro_max_fpr: float = DEFAULT_MAX_FPR,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Score maps of one detector on one category, and their metrics.

    ``detector="rotation_classifier"`` reads RotNet's per-patch scores from ``features``
    (nothing is fitted); any other id is fitted on ``f_fit`` (:func:`patch_score_maps`),
    on ``device`` when the detector takes one and ``detector_params`` does not set it.

    Returns
    -------
    record : dict
        The job's identity in the pipeline's result columns (``dataset="mvtec"``,
        ``inlier`` = category, ``contamination=0``, ``fitset="train"``), ``auroc`` (= image
        AUC), ``image_auroc``, ``pixel_auroc`` and ``aupro`` (None without masks), sizes
        and timings. The caller adds ``method`` and ``seed``.
    maps : dict of str to ndarray
        ``score_maps`` (n_test, grid, grid), ``image_score`` and ``is_defective`` (n_test,).
    """
    started = time.perf_counter()
    n_test = len(category.test_images)
    maps, n_fit = _detector_maps(features, n_test, detector, detector_params, device)
    score_seconds = time.perf_counter() - started
    metrics = evaluate_score_maps(
        maps,
        category.test_labels,
        category.test_masks,
        patch_size=patch_size,
        stride=stride,
        sigma=sigma,
        normalize=normalize,
        pro_max_fpr=pro_max_fpr,
    )
    log.info(
        "%s on %s: %s (%d fit patches, %.1f s)",
        detector,
        category.name,
        ", ".join(f"{k} {v:.2f}" for k, v in metrics.items()),
        n_fit,
        score_seconds,
    )
    record = {
        "dataset": "mvtec",
        "inlier": category.name,
        "category": category.name,
        "group": category.group,
        "contamination": 0.0,
        "fitset": "train",
        "detector": detector,
        "auroc": metrics["image_auroc"],
        "image_auroc": metrics["image_auroc"],
        "pixel_auroc": metrics.get("pixel_auroc"),
        "aupro": metrics.get("aupro"),
        # their intervals over the test images (None without masks)
        **{field: metrics.get(field) for field in LOCALIZATION_INTERVAL_FIELDS},
        "has_masks": category.has_masks,
        "n_train_images": int(len(category.train_images)),
        "n_test": int(n_test),
        "n_test_outliers": int(category.test_labels.sum()),
        "n_fit": int(n_fit),
        "feature_dim": int(features["f_fit"].shape[1]),
        "grid": int(maps.shape[1]),
        "score_seconds": float(score_seconds),
        "seconds": float(time.perf_counter() - started),
    }
    # The image AUC's interval over the test set (auroc_low / auroc_high), as image jobs have.
    image = image_scores(maps)
    record |= auroc_interval_record(image, category.test_labels)
    arrays = {
        "score_maps": maps,
        "image_score": image,
        "is_defective": category.test_labels.astype(np.int8),
    }
    return record, arrays
