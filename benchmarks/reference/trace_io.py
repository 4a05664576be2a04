"""Write one trace: arrays as ``<name>.npz`` and what made them as ``<name>.json``.

Shared by every trace family; imports no TensorFlow, so tests can read what it writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def write_trace(out: Path, name: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Write ``out/<name>.npz`` (compressed) and ``out/<name>.json``; return the npz path.

    ``meta`` must say what the arrays are made from (released commit, versions, seeds);
    the shapes and dtypes of the arrays are added here so a reader can check them.
    """
    out.mkdir(parents=True, exist_ok=True)
    arrays = {key: np.asarray(value) for key, value in arrays.items()}
    npz = out / f"{name}.npz"
    np.savez_compressed(npz, **arrays)
    record = dict(meta)
    record["arrays"] = {
        key: {"shape": list(value.shape), "dtype": str(value.dtype)}
        for key, value in sorted(arrays.items())
    }
    (out / f"{name}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return npz


def released_meta(released: Any, **extra: Any) -> dict[str, Any]:
    """The part of every trace's JSON that names the released code and the libraries."""
    return {
        "released_repository": "google-research/deep_representation_one_class",
        "released_commit": released.commit,
        "versions": released.versions,
        **extra,
    }
