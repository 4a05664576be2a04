"""Heat-map figures: MVTec defect localisation and visual explanations (matplotlib, Agg).

* :func:`plot_localization` is the paper's App. E.4 figure: per defective test image, the
  input, its ground-truth mask and the up-sampled anomaly map of each representation.
* :func:`plot_explanations` is the arrangement of the paper's Fig. 5 / App. A.6: the
  input, then one column per (attribution method, representation), each heat map laid over
  the image.
* :func:`overlay_heatmap` is one image with its anomaly map laid over it, as pixels (the
  heat-map PNG that ``droc score`` writes per image of an MVTec package).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import numpy as np
from matplotlib.figure import Figure

__all__ = ["overlay_heatmap", "plot_explanations", "plot_localization"]

_CMAP = "jet"
_ALPHA = 0.5


def _grid(n_rows: int, n_cols: int, *, cell: float = 1.9) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(cell * n_cols, cell * n_rows + 0.4), layout="constrained")
    axes = np.asarray(fig.subplots(n_rows, n_cols, squeeze=False))
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    return fig, axes


def _check_rows(images: np.ndarray, maps: Mapping[str, np.ndarray]) -> None:
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"images must have shape (n, h, w, 3), got {images.shape}")
    for label, values in maps.items():
        if values.shape != images.shape[:3]:
            raise ValueError(
                f"heat maps {label!r} have shape {values.shape}, expected {images.shape[:3]}"
            )


def plot_localization(
    images: np.ndarray,
    masks: np.ndarray | None,
    anomaly_maps: Mapping[str, np.ndarray],
    *,
    value_ranges: Mapping[str, tuple[float, float]] | None = None,
    row_labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Input | mask | one anomaly map per representation, one row per test image.

    Parameters
    ----------
    images : ndarray of shape (n, h, w, 3), uint8
    masks : ndarray of shape (n, h, w) or None
        None draws "no mask" in the mask column (data without ground truth).
    anomaly_maps : mapping of str to ndarray of shape (n, h, w)
        Column title -> up-sampled anomaly maps.
    value_ranges : mapping of str to (float, float), optional
        Colour range per column; by default each column's own min and max over its rows,
        so images compare on one scale (a per-image scale would make every map look
        defective).
    row_labels : sequence of str, optional
        E.g. the test file names.
    title : str, optional
    """
    _check_rows(images, anomaly_maps)
    columns = ["input", "mask", *anomaly_maps]
    fig, axes = _grid(len(images), len(columns))
    for row in range(len(images)):
        axes[row, 0].imshow(images[row])
        if masks is None:
            axes[row, 1].text(0.5, 0.5, "no mask", ha="center", va="center", fontsize=8)
        else:
            axes[row, 1].imshow(masks[row], cmap="gray", vmin=0, vmax=1)
        for col, (label, maps) in enumerate(anomaly_maps.items(), start=2):
            low, high = (value_ranges or {}).get(label, (float(maps.min()), float(maps.max())))
            axes[row, col].imshow(images[row])
            axes[row, col].imshow(maps[row], cmap=_CMAP, alpha=_ALPHA, vmin=low, vmax=high)
        if row_labels is not None:
            axes[row, 0].set_ylabel(row_labels[row], fontsize=6)
    for col, label in enumerate(columns):
        axes[0, col].set_title(label, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def plot_explanations(
    images: np.ndarray,
    heatmaps: Mapping[str, np.ndarray],
    *,
    row_labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Input, then one column per (attribution method, representation), maps over images.

    ``heatmaps`` maps a column title (e.g. ``"IG: Contrastive (DA) + KDE"``) to maps of shape
    ``(n, h, w)`` scaled to [0, 1]; ``images``, ``row_labels`` and ``title`` as in
    :func:`plot_localization`.
    """
    _check_rows(images, heatmaps)
    fig, axes = _grid(len(images), 1 + len(heatmaps))
    for row in range(len(images)):
        axes[row, 0].imshow(images[row])
        for col, maps in enumerate(heatmaps.values(), start=1):
            axes[row, col].imshow(images[row])
            axes[row, col].imshow(maps[row], cmap=_CMAP, alpha=_ALPHA, vmin=0.0, vmax=1.0)
        if row_labels is not None:
            axes[row, 0].set_ylabel(row_labels[row], fontsize=6)
    for col, label in enumerate(["input", *heatmaps]):
        axes[0, col].set_title(label, fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def overlay_heatmap(
    image: np.ndarray, anomaly_map: np.ndarray, value_range: tuple[float, float]
) -> np.ndarray:
    """The figures' colour map (jet, half transparent) over ``image``, as uint8 pixels.

    Why a fixed ``value_range`` (not the map's own min and max): the same colour must mean
    the same score in every image of a batch, so a defect-free image stays dark instead of
    having its noise stretched to full red.

    Parameters
    ----------
    image : ndarray of shape (s, s, 3), uint8
    anomaly_map : ndarray of shape (s, s)
    value_range : (float, float)
        Scores at the bottom and top of the colour map (values outside are clipped).

    Returns
    -------
    ndarray of shape (s, s, 3), uint8
    """
    from matplotlib import colormaps

    image, anomaly_map = np.asarray(image), np.asarray(anomaly_map, dtype=np.float64)
    if image.ndim != 3 or image.shape[-1] != 3 or anomaly_map.shape != image.shape[:2]:
        raise ValueError(
            f"need an (s, s, 3) image and an (s, s) map of the same size, got {image.shape} "
            f"and {anomaly_map.shape}"
        )
    low, high = float(value_range[0]), float(value_range[1])
    if not high > low:
        raise ValueError(f"value_range must be increasing, got {value_range}")
    level = np.clip((anomaly_map - low) / (high - low), 0.0, 1.0)
    colour = colormaps[_CMAP](level)[..., :3]
    blended = (1.0 - _ALPHA) * image / 255.0 + _ALPHA * colour
    return np.clip(np.round(blended * 255.0), 0, 255).astype(np.uint8)
