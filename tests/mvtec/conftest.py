"""A synthetic category in the MVTec AD layout, with easy defects and their masks.

Normal images are a smooth diagonal colour gradient with a fine stripe pattern and a
little noise; a defect is a solid square of an off colour at a random place, and its mask
is that square. Every representation, even random weights, separates such patches.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.threads import one_torch_thread


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The networks here are tiny: one thread avoids OpenMP's spin-waiting, which makes
    them many times slower on a busy 2-core machine than on an idle one."""
    with one_torch_thread():
        yield


def _normal_image(rng: np.random.Generator, size: int) -> np.ndarray:
    rows, cols = np.mgrid[0:size, 0:size] / size
    base = np.stack([0.3 + 0.3 * rows, 0.4 + 0.2 * cols, 0.5 - 0.2 * rows], axis=-1)
    stripes = 0.05 * np.sin(2 * np.pi * 6 * (rows + cols))[..., None]
    noise = rng.normal(0.0, 0.02, size=(size, size, 3))
    return (np.clip(base + stripes + noise, 0, 1) * 255).astype(np.uint8)


def write_category(
    root: Path,
    name: str = "widget",
    *,
    size: int = 64,
    n_train: int = 12,
    n_good: int = 4,
    defects: Mapping[str, int] | None = None,
    masks: bool = True,
    defect_side: int | None = None,
    seed: int = 0,
) -> Path:
    """Write ``root/name`` in the MVTec layout and return the category folder.

    Defective test images get an off-colour square of side ``defect_side`` (default
    ``size // 5``); with ``masks`` its mask goes to ``ground_truth/<defect>/<stem>_mask.png``.
    """
    rng = np.random.default_rng(seed)
    defects = dict(defects or {"scratch": 3, "spot": 3})
    side = defect_side or max(2, size // 5)
    folder = root / name
    for sub in ["train/good", "test/good"]:
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for i in range(n_train):
        Image.fromarray(_normal_image(rng, size)).save(folder / "train/good" / f"{i:03d}.png")
    for i in range(n_good):
        Image.fromarray(_normal_image(rng, size)).save(folder / "test/good" / f"{i:03d}.png")
    for defect, count in defects.items():
        (folder / "test" / defect).mkdir(parents=True, exist_ok=True)
        if masks:
            (folder / "ground_truth" / defect).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image = _normal_image(rng, size)
            top, left = rng.integers(0, size - side, size=2)
            image[top : top + side, left : left + side] = (230, 40, 200)
            Image.fromarray(image).save(folder / "test" / defect / f"{i:03d}.png")
            if masks:
                mask = np.zeros((size, size), dtype=np.uint8)
                mask[top : top + side, left : left + side] = 255
                Image.fromarray(mask).save(folder / "ground_truth" / defect / f"{i:03d}_mask.png")
    return folder


@pytest.fixture
def mvtec_category(tmp_path: Path):
    """Factory writing a synthetic category under ``tmp_path`` (see :func:`write_category`)."""

    def make(name: str = "widget", **options) -> Path:
        return write_category(tmp_path, name, **options)

    return make
