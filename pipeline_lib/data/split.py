"""One-class splits of a labelled data set, and a fixed train/test hold-out for unsplit data.

:func:`one_class_split` builds the paper's one-vs-rest protocol (docs/protocol.md, "Datasets and
splits"): the training set holds one class, optionally contaminated with outliers from the
other classes at unchanged size (the "unsupervised anomaly detection" study), plus clean
inlier subsets for the semi-supervised study; the whole test split is scored with that class
as inlier and every other class as outlier.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline_lib.data.base import DataError

__all__ = [
    "OneClassSplit",
    "holdout_split",
    "load_split",
    "one_class_split",
    "save_split",
    "training_subset",
]

# Contamination enters the seed as parts per million; this tag is outside that range, so the
# clean-subset stream never coincides with a contamination stream.
_CLEAN_STREAM = 2**32 - 1


# eq=False: field-wise == on arrays is ambiguous; compare the arrays themselves.
@dataclass(frozen=True, eq=False)
class OneClassSplit:
    """Index arrays of one one-class experiment into a data set's own train and test splits.

    Parameters
    ----------
    inlier : int
        Label of the inlier class.
    contamination : float
        Fraction of the training set replaced by outliers.
    seed : int
        Seed the split was drawn with.
    train_index : ndarray of shape (n_inliers_of_class,), dtype int64
        Sorted indices into the training split: the representation's training set.
    n_outliers_in_train : int
        How many entries of ``train_index`` are outliers (``round(contamination * n)``).
    test_index : ndarray of shape (n_test,), dtype int64
        ``arange(n_test)``: every test image is scored.
    test_is_outlier : ndarray of shape (n_test,), dtype int8
        0 for a test image of the inlier class, 1 for an outlier.
    clean_index : dict of int to ndarray, default={}
        ``clean_index[n]``: sorted int64 indices of ``n`` clean training inliers; the subsets
        are nested (a smaller one is contained in every larger one).
    """

    inlier: int
    contamination: float
    seed: int
    train_index: np.ndarray
    n_outliers_in_train: int
    test_index: np.ndarray
    test_is_outlier: np.ndarray
    clean_index: dict[int, np.ndarray] = field(default_factory=dict)


def _check_labels(labels: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(labels)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be a 1-D integer array, got {array.dtype} {array.shape}")
    return array


def _check_int(value: object, name: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def one_class_split(
    train_labels: np.ndarray,
    test_labels: np.ndarray,
    *,
    inlier: int,
    contamination: float = 0.0,
    seed: int,
    clean_inliers: Sequence[int] = (),
) -> OneClassSplit:
    """Draw the one-class split for inlier class ``inlier``.

    The training set has as many images as the class has training images; a fraction
    ``contamination`` of it (``round(contamination * n)`` images) is replaced by outliers
    drawn uniformly without replacement from the other classes' training images, and the
    same number of the class's images, chosen at random, is left out.

    Parameters
    ----------
    train_labels : ndarray of shape (n_train,)
        Integer labels of the data set's training split.
    test_labels : ndarray of shape (n_test,)
        Integer labels of the data set's test split.
    inlier : int
        Label of the inlier class.
    contamination : float, default=0.0
        Fraction of outliers in the training set, in [0, 1).
    seed : int
        Experiment seed (>= 0). The draw is a deterministic function of
        ``(seed, inlier, contamination)``: ``np.random.default_rng([seed, inlier,
        round(contamination * 1e6)])``.
    clean_inliers : sequence of int, default=()
        Sizes ``n`` of the clean inlier subsets to draw for the semi-supervised setting.
        The subsets come from one permutation of the class's training images seeded by
        ``(seed, inlier)`` only, so they are nested and the same for every contamination.

    Returns
    -------
    OneClassSplit
        Index arrays into the training and test splits.

    Raises
    ------
    ValueError
        If ``contamination`` is outside [0, 1), ``seed`` or ``inlier`` is not a
        non-negative integer, the class has no training images, there are too few outliers
        for the contamination, or a clean subset size exceeds the class's training images.
    """
    train_labels = _check_labels(train_labels, "train_labels")
    test_labels = _check_labels(test_labels, "test_labels")
    inlier = _check_int(inlier, "inlier")
    seed = _check_int(seed, "seed")
    if isinstance(contamination, bool) or not isinstance(contamination, numbers.Real):
        raise ValueError(f"contamination must be a number in [0, 1), got {contamination!r}")
    if not 0.0 <= float(contamination) < 1.0:
        raise ValueError(f"contamination must be in [0, 1), got {contamination!r}")
    contamination = float(contamination)

    inliers = np.flatnonzero(train_labels == inlier).astype(np.int64)
    outliers = np.flatnonzero(train_labels != inlier).astype(np.int64)
    n = len(inliers)
    if n == 0:
        raise ValueError(f"inlier class {inlier} has no training images")
    n_out = round(contamination * n)
    if n_out > len(outliers):
        raise ValueError(
            f"contamination {contamination} needs {n_out} outliers, only {len(outliers)} exist"
        )

    rng = np.random.default_rng([seed, inlier, round(contamination * 1e6)])
    kept = rng.choice(inliers, size=n - n_out, replace=False)
    added = rng.choice(outliers, size=n_out, replace=False)
    train_index = np.sort(np.concatenate([kept, added])).astype(np.int64)

    clean_index: dict[int, np.ndarray] = {}
    if len(clean_inliers):
        order = np.random.default_rng([seed, inlier, _CLEAN_STREAM]).permutation(inliers)
        for size in clean_inliers:
            size = _check_int(size, "clean_inliers entry", minimum=1)
            if size > n:
                raise ValueError(
                    f"clean_inliers entry {size} exceeds the {n} training images of class {inlier}"
                )
            clean_index[size] = np.sort(order[:size]).astype(np.int64)

    return OneClassSplit(
        inlier=inlier,
        contamination=contamination,
        seed=seed,
        train_index=train_index,
        n_outliers_in_train=int(n_out),
        test_index=np.arange(len(test_labels), dtype=np.int64),
        test_is_outlier=(test_labels != inlier).astype(np.int8),
        clean_index=clean_index,
    )


def holdout_split(
    labels: np.ndarray, *, test_fraction: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Split a labelled set into train and test, stratified by class, deterministically.

    Used for data sets that come without a standard test split (sklearn digits, image
    folders). The seed is fixed by the data set, independent of the experiment seed.

    Parameters
    ----------
    labels : ndarray of shape (n_samples,)
        Integer class labels.
    test_fraction : float
        Fraction of each class put in the test split (``round(test_fraction * n_class)``).
    seed : int, default=0
        Seed of ``np.random.default_rng``.

    Returns
    -------
    train_index : ndarray of shape (n_train,), dtype int64
        Sorted indices of the training samples.
    test_index : ndarray of shape (n_test,), dtype int64
        Sorted indices of the test samples.

    Raises
    ------
    ValueError
        If ``test_fraction`` is not strictly between 0 and 1.
    """
    labels = _check_labels(labels, "labels")
    if isinstance(test_fraction, bool) or not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    rng = np.random.default_rng(seed)
    test_parts = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        test_parts.append(members[: round(test_fraction * len(members))])
    test_index = np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *test_parts]))
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[test_index] = True
    return np.flatnonzero(~is_test).astype(np.int64), test_index


def training_subset(train_index: np.ndarray, size: int | None, *, seed: int) -> np.ndarray:
    """At most ``size`` of the training indices, a seeded random subset in sorted order.

    The data-efficiency study learns representations from 50..5000 images of a class; the
    subset depends only on the split and the seed, so a re-run trains on the same images.

    Raises
    ------
    ValueError
        If ``size`` is not positive.
    """
    if size is None or size >= len(train_index):
        return np.asarray(train_index)
    if size < 1:
        raise ValueError(f"training subset size must be >= 1, got {size}")
    rng = np.random.default_rng([seed, size])
    return np.sort(rng.choice(np.asarray(train_index), size=size, replace=False))


def save_split(path: str | os.PathLike, split: OneClassSplit) -> None:
    """Write a split to an ``.npz`` file at exactly ``path``.

    Parameters
    ----------
    path : str or PathLike
        Output file (no suffix is added).
    split : OneClassSplit
        The split to save; ``clean_index[n]`` is stored as ``clean_<n>``.
    """
    arrays = {
        "inlier": np.int64(split.inlier),
        "contamination": np.float64(split.contamination),
        "seed": np.int64(split.seed),
        "train_index": split.train_index,
        "n_outliers_in_train": np.int64(split.n_outliers_in_train),
        "test_index": split.test_index,
        "test_is_outlier": split.test_is_outlier,
    }
    arrays.update({f"clean_{n}": index for n, index in split.clean_index.items()})
    with Path(path).open("wb") as fh:
        np.savez(fh, **arrays)


def load_split(path: str | os.PathLike) -> OneClassSplit:
    """Read a split written by :func:`save_split`.

    Parameters
    ----------
    path : str or PathLike
        The ``.npz`` file.

    Returns
    -------
    OneClassSplit
        The saved split.

    Raises
    ------
    DataError
        If the file is not a readable ``.npz`` or lacks one of the split's arrays.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"cannot read split file {path}: {err}") from err
    required = (
        "inlier",
        "contamination",
        "seed",
        "train_index",
        "n_outliers_in_train",
        "test_index",
        "test_is_outlier",
    )
    missing = [key for key in required if key not in arrays]
    if missing:
        raise DataError(f"split file {path} lacks {', '.join(missing)}")
    clean = {
        int(key.removeprefix("clean_")): arrays[key].astype(np.int64)
        for key in arrays
        if key.startswith("clean_")
    }
    return OneClassSplit(
        inlier=int(arrays["inlier"]),
        contamination=float(arrays["contamination"]),
        seed=int(arrays["seed"]),
        train_index=arrays["train_index"].astype(np.int64),
        n_outliers_in_train=int(arrays["n_outliers_in_train"]),
        test_index=arrays["test_index"].astype(np.int64),
        test_is_outlier=arrays["test_is_outlier"].astype(np.int8),
        clean_index=dict(sorted(clean.items())),
    )
