"""Per-tensor summaries: what a trace stores of a tensor too large to commit whole.

A summary is a few float64 numbers per tensor (:data:`SUMMARY_FIELDS`): its sum, sum of
absolute values, norm and largest absolute entry, its projections on eight random unit
vectors (drawn by the tensor's name, so both sides project on the same ones) and its first
and last four entries.

:func:`summary_difference` turns two summaries into the norm-relative difference of their
tensors, ``||ours - released|| / ||released||``: the projections estimate it (a projection
of a difference ``d`` on a random unit vector has variance ``||d||^2 / n``, so
``sqrt(n * mean(projection^2))`` estimates ``||d||``, within a factor 5 below with
probability 1 - 1e-5 for eight projections: chi-square with 8 degrees of freedom), and the
other fields bound it from below (each moves by at most ``||d||``, the sums by
``sqrt(n) ||d||``). A transposed, swapped or mis-scaled tensor cannot pass.

NumPy only: written by the harness, read by the comparisons.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

#: Seed of the projection vectors (any fixed number: both sides draw them by name).
PROJECTION_SEED = 20210111
PROJECTIONS = 8
ENTRIES = 4

SUMMARY_FIELDS: tuple[str, ...] = (
    "sum",
    "abs_sum",
    "norm",
    "max_abs",
    *(f"projection{k}" for k in range(PROJECTIONS)),
    *(f"first{k}" for k in range(ENTRIES)),
    *(f"last{k}" for k in range(ENTRIES)),
)
_PROJECTED = slice(4, 4 + PROJECTIONS)


@functools.lru_cache(maxsize=1024)
def _projections(name: str, size: int) -> np.ndarray:
    """``(PROJECTIONS, size)`` unit vectors of ``name`` (frozen ``RandomState`` streams).

    Cached: a trace summarises one tensor at every step, and drawing is most of the cost.
    """
    stream = np.random.RandomState([PROJECTION_SEED, zlib.crc32(name.encode())])
    vectors = stream.standard_normal((PROJECTIONS, size))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def summary(name: str, tensor: np.ndarray) -> np.ndarray:
    """The float64 ``(len(SUMMARY_FIELDS),)`` summary of ``tensor`` (named ``name``).

    Raises
    ------
    ValueError
        If the tensor is empty.
    """
    flat = np.asarray(tensor, dtype=np.float64).ravel()
    if flat.size == 0:
        raise ValueError(f"cannot summarise the empty tensor {name!r}")
    ends = np.resize(flat, ENTRIES)  # repeats a tensor shorter than ENTRIES
    tail = np.resize(flat[::-1], ENTRIES)
    return np.concatenate(
        [
            [flat.sum(), np.abs(flat).sum(), np.linalg.norm(flat), np.abs(flat).max()],
            _projections(name, flat.size) @ flat,
            ends,
            tail,
        ]
    )


def summaries(tensors: dict[str, np.ndarray]) -> tuple[np.ndarray, list[list[object]]]:
    """The summaries of many tensors as one ``(len(tensors), len(SUMMARY_FIELDS))`` array,
    and the index ``[[name, shape], ...]`` of its rows."""
    index = [[name, list(np.shape(value))] for name, value in tensors.items()]
    rows = [summary(name, value) for name, value in tensors.items()]
    return np.array(rows).reshape(len(rows), len(SUMMARY_FIELDS)), index


def summary_difference(ours: np.ndarray, released: np.ndarray, size: int) -> float:
    """The norm-relative difference of two tensors from their summaries (module docstring).

    ``size`` is the tensors' number of entries. Returns the largest of the projections'
    estimate and the other fields' lower bounds, each over the released norm.

    Raises
    ------
    ValueError
        If the summaries do not have :data:`SUMMARY_FIELDS`' length.
    """
    ours, released = np.asarray(ours, np.float64), np.asarray(released, np.float64)
    if ours.shape != (len(SUMMARY_FIELDS),) or released.shape != ours.shape:
        raise ValueError(f"summaries must be ({len(SUMMARY_FIELDS)},), got {ours.shape}")
    norm = max(float(released[SUMMARY_FIELDS.index("norm")]), np.finfo(np.float64).tiny)
    difference = np.abs(ours - released)
    bounds = np.full(len(SUMMARY_FIELDS), norm)
    bounds[:2] *= np.sqrt(size)
    bounds[_PROJECTED] = np.inf  # estimated below instead
    estimate = np.sqrt(size * np.mean(difference[_PROJECTED] ** 2)) / norm
    return float(max(estimate, np.max(difference / bounds)))
