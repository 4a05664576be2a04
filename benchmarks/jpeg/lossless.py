"""How far q75 4:2:0 JPEG moves lossless 32x32 images: the dose separating the shared copy
from the official binaries, estimated on other photographs than CIFAR's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from .doses import mean_abs_change, reencode

CALIBRATION_QUALITY = 50  # the further pass that compares CIFAR's q75 copy with a source's


def downscale(images: Iterable[np.ndarray], side: int = 32) -> np.ndarray:
    """Area-average each image to ``side`` x ``side`` (cv2.INTER_AREA, the library's
    :func:`~pipeline_lib.data.area_resize.area_resize`; an exact block mean when the side
    divides the input's)."""
    from pipeline_lib.data.area_resize import area_resize

    return np.stack([area_resize(image, side, side) for image in images])


def read_pngs(folder: Path) -> list[np.ndarray]:
    """Every ``*.png`` under ``folder`` (sorted), as uint8 RGB arrays.

    Raises
    ------
    ValueError
        If the folder holds no PNG.
    """
    paths = sorted(Path(folder).rglob("*.png"))
    if not paths:
        raise ValueError(
            f"no PNG under {folder}: pass --mvtec-root, the MVTec AD category folder "
            "(train/good, test/<defect>), or set DROC_SHARED to the folder of data/mvtec_ad/"
        )
    images = []
    for path in paths:
        with Image.open(path) as image:
            images.append(np.asarray(image.convert("RGB")))
    return images


def photo_crops(side: int = 256, stride: int = 64) -> list[np.ndarray]:
    """Crops of ``side`` pixels every ``stride`` pixels of scikit-learn's two sample photos."""
    from sklearn.datasets import load_sample_images

    crops = []
    for photo in load_sample_images().images:
        height, width = photo.shape[:2]
        for top in range(0, height - side + 1, stride):
            for left in range(0, width - side + 1, stride):
                crops.append(np.ascontiguousarray(photo[top : top + side, left : left + side]))
    return crops


@dataclass(frozen=True)
class LosslessDose:
    """What q75 4:2:0 JPEG does to one source of lossless 32x32 images."""

    n_images: int
    q75: float  # mean absolute change lossless -> q75
    further: float  # mean absolute change q75 -> a further CALIBRATION_QUALITY pass


def lossless_dose(images: np.ndarray) -> LosslessDose:
    """Mean absolute change of a q75 4:2:0 round trip, and of a further q50 pass after it."""
    q75 = reencode(images, quality=75)
    further = reencode(q75, quality=CALIBRATION_QUALITY)
    return LosslessDose(
        n_images=len(images),
        q75=mean_abs_change(images, q75),
        further=mean_abs_change(q75, further),
    )


def q75_dose_estimates(
    sources: Mapping[str, LosslessDose], cifar_further: float | None
) -> dict[str, float]:
    """Each source's q75 dose, and scaled by CIFAR's over the source's further-pass change.

    ``cifar_further`` is the dose of the shared copy's re-encoding at CALIBRATION_QUALITY
    (None when it was not measured: no calibrated estimates).
    """
    estimates = {}
    for name, source in sources.items():
        estimates[name] = source.q75
        if cifar_further is not None and source.further > 0:
            estimates[f"{name}_calibrated"] = source.q75 * cifar_further / source.further
    return estimates
