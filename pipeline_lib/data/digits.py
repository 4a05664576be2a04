"""scikit-learn's 8x8 digits as a small 32x32 RGB data set (ships with scikit-learn)."""

from __future__ import annotations

import logging

import numpy as np

from pipeline_lib.data.base import ImageDataset
from pipeline_lib.data.split import holdout_split

__all__ = ["DIGITS_CLASSES", "DIGITS_SIZE", "DIGITS_TEST_FRACTION", "read_digits"]

logger = logging.getLogger(__name__)

DIGITS_CLASSES: tuple[str, ...] = tuple(str(d) for d in range(10))
DIGITS_SIZE = 32
# Fixed hold-out: one third of each class is the test split, drawn with seed 0 whatever
# the experiment seed, so every experiment sees the same train/test partition.
DIGITS_TEST_FRACTION = 1 / 3
_HOLDOUT_SEED = 0


def _upsample(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of (N, h, w) float images to (N, size, size) uint8."""
    import torch
    import torch.nn.functional as F

    batch = torch.from_numpy(images.astype(np.float32))[:, None]  # (N, 1, h, w)
    resized = F.interpolate(batch, size=(size, size), mode="bilinear", align_corners=False)
    return resized[:, 0].round().clamp(0, 255).to(torch.uint8).numpy()  # (N, size, size)


def read_digits(root: object = None) -> ImageDataset:
    """Load ``sklearn.datasets.load_digits()`` as 32x32 RGB images with a fixed split.

    The 8x8 values 0..16 are scaled to 0..255 (``round(v * 255 / 16)``), resized to 32x32
    bilinearly (``torch.nn.functional.interpolate``, ``align_corners=False``) and replicated
    to 3 channels. The train/test split is stratified by class, about 2/3 train, seed 0.

    Parameters
    ----------
    root : object, default=None
        Ignored: the data ships inside scikit-learn. Present so that every reader shares
        the signature ``reader(root, **options)``.

    Returns
    -------
    ImageDataset
        1,198 training and 599 test images of shape (32, 32, 3), classes ``"0"`` ... ``"9"``.
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    labels = np.asarray(bunch.target, dtype=np.int64)
    images = np.round(np.asarray(bunch.images, dtype=np.float64) * (255.0 / 16.0))
    images = _upsample(images, DIGITS_SIZE)
    rgb = np.repeat(images[..., None], 3, axis=-1)  # (N, 32, 32) -> (N, 32, 32, 3)
    train, test = holdout_split(labels, test_fraction=DIGITS_TEST_FRACTION, seed=_HOLDOUT_SEED)
    logger.info("loaded sklearn digits: %d train, %d test", len(train), len(test))
    return ImageDataset(
        name="digits",
        train_images=rgb[train],
        train_labels=labels[train],
        test_images=rgb[test],
        test_labels=labels[test],
        class_names=DIGITS_CLASSES,
    )
