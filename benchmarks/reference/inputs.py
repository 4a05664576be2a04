"""Fixed inputs that both sides of a trace make from a NumPy seed (NumPy only, no TensorFlow).

A trace records the digest of what it was made from; the comparison makes the inputs again
and checks the digest first, so a changed generator cannot pass as a parity failure (or hide
one).
"""

from __future__ import annotations

import hashlib

import numpy as np

#: The detector inputs: fit and test features of a 128-d representation, 4 rotation views.
DETECTOR_SEED = 45
N_FIT, N_INLIERS, N_OUTLIERS, N_FEATURES = 400, 150, 150, 128


def digest(*arrays: np.ndarray) -> str:
    """sha256 of the arrays' dtypes, shapes and bytes (C order)."""
    h = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        h.update(f"{array.dtype.str}{array.shape}".encode())
        h.update(array.tobytes())
    return h.hexdigest()


def detector_inputs(seed: int = DETECTOR_SEED) -> dict[str, np.ndarray]:
    """Fit features, test features, test labels (1 = outlier) and rotation logits, float32.

    Features are non-negative (a ReLU network's pooled output), inliers and outliers drawn
    around two overlapping centres, so every detector's AUC is neither 0.5 nor 1. The
    rotation logits ``(4 views, n_test, 4 classes)`` favour the view's own rotation, more
    for inliers; a few rows are so confident that float32's softmax is exactly 1 on every
    view (ties in the released float32 score) and a few so unsure that the product of the
    four probabilities underflows float32's normal range.
    """
    rng = np.random.default_rng(seed)
    centre_in = rng.gamma(2.0, 0.5, N_FEATURES)
    centre_out = centre_in + rng.normal(0.0, 0.6, N_FEATURES)

    def features(centre: np.ndarray, n: int) -> np.ndarray:
        return np.maximum(centre + rng.normal(0.0, 0.9, (n, N_FEATURES)), 0.0).astype(np.float32)

    fit = features(centre_in, N_FIT)
    test = np.concatenate([features(centre_in, N_INLIERS), features(centre_out, N_OUTLIERS)])
    labels = np.repeat(np.array([0, 1], dtype=np.int64), [N_INLIERS, N_OUTLIERS])
    n_test = len(labels)
    margin = np.where(labels == 0, 3.0, 1.2)
    logits = rng.normal(0.0, 1.0, (4, n_test, 4))
    for view in range(4):
        logits[view, :, view] += margin + rng.normal(0.0, 1.5, n_test)
    # Ties of the released float32 score, inliers and outliers among them: softmax = 1 on
    # every view, and an own-class probability of about 1e-18 on every view (the product
    # underflows float32).
    for view in range(4):
        for rows, own in ((np.r_[0:3, N_INLIERS : N_INLIERS + 2], 40.0), (np.r_[3:5, -2:0], -40.0)):
            logits[view, rows] = 0.0
            logits[view, rows, view] = own
    return {
        "fit_features": fit,
        "test_features": test,
        "test_labels": labels,
        "rotation_logits": logits.astype(np.float32),
    }


def colour_images(rng: np.random.Generator) -> np.ndarray:
    """(6, 8, 8, 3) float32: three images in [0, 1] (random pixels; a smooth field; pure and
    grey colours, ties between channels, zeros and ones), then the same stretched to
    [-0.25, 1.25]."""
    noise = rng.integers(0, 256, (8, 8, 3)) / 255.0
    ramp = np.linspace(0.0, 1.0, 8)
    smooth = np.stack(
        [ramp[:, None] * np.ones(8), np.ones(8)[:, None] * ramp, np.outer(ramp, ramp[::-1])], -1
    )
    palette = np.array(
        [
            [1, 0, 0],
            [0, 1, 0],
            [0, 0, 1],
            [1, 1, 0],
            [0, 1, 1],
            [1, 0, 1],
            [0, 0, 0],
            [1, 1, 1],
            [0.5, 0.5, 0.5],
            [0.2, 0.2, 0.7],
            [0.7, 0.2, 0.2],
            [0.3, 0.6, 0.6],
            [0.9, 0.1, 0.9],
            [0.25, 0.75, 0.75],
            [0.6, 0.6, 0.1],
            [0.1, 0.4, 0.4],
        ]
    )
    special = palette[rng.integers(0, len(palette), 64)].reshape(8, 8, 3)
    base = np.stack([noise, smooth, special]).astype(np.float32)
    stretched = (base * np.float32(1.5) - np.float32(0.25)).astype(np.float32)
    return np.concatenate([base, stretched])


def coordinates(side: int) -> np.ndarray:
    """(side, side, 2) float32: each pixel's row and column."""
    rows, cols = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    return np.stack([rows, cols], -1).astype(np.float32)


def crop_parameters(ramps: np.ndarray, size: int) -> tuple[int, int, int, bool]:
    """Side, top, left and flip of a crop resized to ``size``, read from its ``(size, size,
    2)`` coordinate channels (:func:`coordinates` of the source, cropped and resized).

    TF's half-pixel bilinear reads output pixel ``j`` at crop position
    ``(j + 0.5) s / size - 0.5``, clamped at 0: output 0 reads the crop's first pixel
    exactly (``s <= size``), output ``size - 1`` reads ``(size - 0.5) s / size - 0.5`` on
    the linear coordinate ramp, so ``s`` follows from the two ends' difference. A flip swaps
    the two ends of the column channel.
    """
    rows, cols = ramps[..., 0], ramps[..., 1]
    span = float(rows[-1, 0] - rows[0, 0])
    side = round((span + 0.5) * size / (size - 0.5))
    flipped = bool(cols[0, 0] > cols[0, -1])
    left = cols[0, -1] if flipped else cols[0, 0]
    return side, round(float(rows[0, 0])), round(float(left)), flipped
