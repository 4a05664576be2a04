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


def read_trace(folder: Path, name: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and JSON record of trace ``name`` in ``folder`` (FileNotFoundError if absent)."""
    folder = Path(folder)
    with np.load(folder / f"{name}.npz", allow_pickle=False) as arrays:
        loaded = {key: arrays[key] for key in arrays.files}
    return loaded, json.loads((folder / f"{name}.json").read_text())


def pack(tensors: dict[str, np.ndarray]) -> tuple[np.ndarray, list[list[Any]]]:
    """Many small tensors as one flat float32 array and its index ``[[name, shape], ...]``.

    One npz member instead of hundreds: each member costs a zip and an npy header.
    """
    index = [[name, list(np.shape(value))] for name, value in tensors.items()]
    flat = [np.asarray(value, dtype=np.float32).ravel() for value in tensors.values()]
    return np.concatenate(flat) if flat else np.zeros(0, np.float32), index


def unpack(flat: np.ndarray, index: list[list[Any]]) -> dict[str, np.ndarray]:
    """The tensors of :func:`pack`, by name."""
    tensors, offset = {}, 0
    for name, shape in index:
        size = int(np.prod(shape, dtype=np.int64))
        tensors[name] = flat[offset : offset + size].reshape(shape)
        offset += size
    if offset != len(flat):
        raise ValueError(f"the index covers {offset} of {len(flat)} packed values")
    return tensors
