"""One comparison of this project's implementation with a reference trace, as a record.

Each family's ``compare_<family>.py`` (torch and NumPy, no TensorFlow) returns a list of
``Difference``: ``tests/reference/`` asserts each within its tolerance, and the parity section
of docs/reproduction.md is generated from the same records, so the page shows exactly what
the tests check.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Difference:
    """The largest difference of one quantity between the released code and ours.

    ``tolerance`` bounds ``largest`` (in the unit ``measure`` names); ``why`` says where the
    tolerance comes from (float32 rounding, summation order) or what is compared instead.
    """

    family: str
    quantity: str
    largest: float
    tolerance: float
    measure: str
    why: str

    @property
    def within(self) -> bool:
        return bool(self.largest <= self.tolerance)

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "within": self.within}


def relative_difference(ours: np.ndarray, released: np.ndarray) -> float:
    """``max|ours - released| / max(max|released|, tiny)``: norm-relative, one number a tensor."""
    ours = np.asarray(ours, dtype=np.float64)
    released = np.asarray(released, dtype=np.float64)
    if ours.shape != released.shape:
        raise ValueError(f"shapes differ: ours {ours.shape}, released {released.shape}")
    scale = max(float(np.max(np.abs(released), initial=0.0)), np.finfo(np.float64).tiny)
    return float(np.max(np.abs(ours - released), initial=0.0) / scale)
