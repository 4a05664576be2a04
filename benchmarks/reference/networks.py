"""The released networks the traces use, named once for the harness and the comparisons.

The released scripts build ``ResNet18(width, head_dims, num_class=latent_dim)``
(``util/train.py``, ``get_model``) with one of three heads; :data:`HEADS` names each with
the flags that build it and this project's method and head depth that match it. Released
``--net_width`` 1 and 0.25 are this project's ``width`` 64 and 16 with a 64-channel stem.

NumPy only at import: :func:`released_network` imports TensorFlow through the released code,
inside the reference environment; the rest is read by the comparisons too.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The released stem's channels at every width (``model/resnet_util.py``, ``ResNet``).
RELEASED_STEM = 64

#: Released ``--net_width`` -> this project's ``width`` (``int(64 * width)``).
WIDTHS: dict[float, int] = {1.0: 64, 0.25: 16}

#: Side of the traces' images (CIFAR-10's).
IMAGE_SIDE = 32


@dataclass(frozen=True)
class Head:
    """A released head: its flags, and the method and head depth that build ours."""

    head_dims: tuple[int, ...] | None  # --head_dims (None: '')
    latent_dim: int  # --latent_dim (the classifier's classes; 0: none)
    method: str  # this project's method with this head
    head_depth: int


#: The heads of the released scripts (script/run_rotation.sh, run_contrastive*.sh) and
#: RotNet's classifier on ``pools`` (``--head_dims=''``).
HEADS: dict[str, Head] = {
    "rotation": Head((512,) * 8, 4, "rotation", 8),
    "contrastive": Head((512,) * 8 + (128,), 0, "contrastive", 8),
    "rotnet": Head(None, 4, "rotnet", 0),
}


def released_network(released: Any, head: Head, width: float) -> Any:
    """The released Keras model, built as its trainer builds it (``BaseTrain.get_model``).

    ``get_model`` prints the model's summary; it is kept out of the harness's output.
    """
    trainer = released.module("util.train")
    with contextlib.redirect_stdout(io.StringIO()):
        return trainer.BaseTrain.get_model(
            arch="ResNet18",
            width=width,
            head_dims=head.head_dims,
            input_shape=(IMAGE_SIDE, IMAGE_SIDE, 3),
            num_class=head.latent_dim,
        )


def fixed_images(seed: int, count: int, side: int = IMAGE_SIDE) -> np.ndarray:
    """``count`` uint8 images ``(count, side, side, 3)`` that differ as photographs do.

    A random 4 x 4 colour layout per image (``side / 4`` pixel blocks) plus pixel noise: each
    image's pooled features differ from the others'. Independent noise images would not:
    their pooled features are nearly equal, so the head's BatchNorm divides by a tiny batch
    deviation and a step becomes ill-conditioned (a rounding error grows without bound).
    """
    stream = np.random.RandomState(seed)
    layout = stream.uniform(0.0, 1.0, (count, 4, 4, 3))
    blocks = np.kron(layout, np.ones((1, side // 4, side // 4, 1)))
    noise = stream.uniform(-0.15, 0.15, blocks.shape)
    return np.round(255.0 * np.clip(blocks + noise, 0.0, 1.0)).astype(np.uint8)


def unit_float(images: np.ndarray) -> np.ndarray:
    """uint8 images -> float32 in [0, 1], as the released input pipeline (``x / 255``)."""
    return np.asarray(images).astype(np.float32) / np.float32(255.0)
