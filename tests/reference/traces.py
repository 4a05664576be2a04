"""Read the committed reference traces (benchmarks/reference/): made by the released code
under TensorFlow, read here with NumPy only. A missing trace fails the test that needs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reference"
REGENERATE = (
    "make reference-env && .venv-reference/bin/python benchmarks/reference/trace.py "
    "--released PATH --out tests/fixtures/reference/ (benchmarks/reference/README.md)"
)


def load_trace(name: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and the JSON record of trace ``name``; fails (never skips) when absent."""
    npz, record = FIXTURES / f"{name}.npz", FIXTURES / f"{name}.json"
    if not npz.is_file() or not record.is_file():
        pytest.fail(f"reference trace {name!r} is missing from {FIXTURES}: {REGENERATE}")
    with np.load(npz, allow_pickle=False) as arrays:
        loaded = {key: arrays[key] for key in arrays.files}
    meta = json.loads(record.read_text())
    for key, spec in meta.get("arrays", {}).items():
        if list(loaded[key].shape) != spec["shape"]:
            pytest.fail(f"trace {name!r}: {key} has shape {loaded[key].shape}, JSON says {spec}")
    return loaded, meta
