"""Weights of the released network, generated from a NumPy seed by Keras weight name.

The harness (TensorFlow) and the comparisons (torch) both call :func:`generated_weights` with
the released model's Keras names and shapes, so the two networks start from the same numbers
and no random number enters a comparison: nothing of the weights is stored in a trace but
their shapes and per-tensor sums (:func:`weight_record`), which a comparison checks first.

Scales are the released initialisers' where they exist (``model/resnet_util.py``), with the
BatchNorm parameters, moving statistics and biases moved off their initial 1 / 0 so that a
swapped or missing tensor shows in the outputs:

* convolution kernel ``(kh, kw, in, out)``: normal, standard deviation ``sqrt(2 / fan_out)``
  (``VarianceScaling(2, 'fan_out')``), cut at 2 standard deviations;
* Dense kernel ``(in, out)``: uniform in ``+-sqrt(6 / (in + out))`` (``glorot_uniform``);
* bias, BatchNorm ``beta`` and ``moving_mean``: normal, standard deviation 0.1;
* BatchNorm ``gamma`` and ``moving_variance``: uniform in [0.5, 1.5].

NumPy only: importable in the reference environment and in the project's.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping

import numpy as np

#: The seed every committed trace draws its weights from.
WEIGHT_SEED = 1


def weight_name(name: str) -> str:
    """``layer/weight`` without TensorFlow's ``:0`` suffix (the key used on both sides)."""
    return name.split(":", 1)[0]


def name_stream(seed: int, name: str) -> np.random.RandomState:
    """A generator of its own for ``name``, so a weight does not depend on the others.

    ``RandomState`` because NumPy freezes its streams (NEP 19): the reference environment's
    NumPy and the project's draw the same numbers from the same seed.
    """
    return np.random.RandomState([seed, zlib.crc32(weight_name(name).encode())])


def generated_weight(name: str, shape: Iterable[int], seed: int = WEIGHT_SEED) -> np.ndarray:
    """The float32 weight of Keras weight ``name`` (``conv1_conv/kernel``) and ``shape``.

    Raises
    ------
    ValueError
        If the name's last part is not a kernel, bias or BatchNorm weight, or a kernel is
        neither 2-D nor 4-D.
    """
    shape = tuple(int(s) for s in shape)
    kind = weight_name(name).rsplit("/", 1)[-1]
    stream = name_stream(seed, name)
    if kind == "kernel" and len(shape) == 4:
        std = np.sqrt(2.0 / (shape[0] * shape[1] * shape[3]))
        values = np.clip(stream.standard_normal(shape), -2.0, 2.0) * std
    elif kind == "kernel" and len(shape) == 2:
        limit = np.sqrt(6.0 / (shape[0] + shape[1]))
        values = stream.uniform(-limit, limit, shape)
    elif kind in ("bias", "beta", "moving_mean"):
        values = 0.1 * stream.standard_normal(shape)
    elif kind in ("gamma", "moving_variance"):
        values = stream.uniform(0.5, 1.5, shape)
    else:
        raise ValueError(f"no generated weight for {name!r} of shape {shape}")
    return values.astype(np.float32)


def generated_weights(
    shapes: Mapping[str, Iterable[int]], seed: int = WEIGHT_SEED
) -> dict[str, np.ndarray]:
    """:func:`generated_weight` of every ``{keras_name: shape}``, keyed by :func:`weight_name`."""
    return {
        weight_name(name): generated_weight(name, shape, seed) for name, shape in shapes.items()
    }


def weight_record(weights: Mapping[str, np.ndarray]) -> dict[str, dict[str, object]]:
    """What a trace stores of the weights it used: each one's shape and float64 sum.

    The shapes let the comparison generate the same weights; the sums show that it did.
    """
    return {
        name: {"shape": list(value.shape), "sum": float(np.sum(value, dtype=np.float64))}
        for name, value in weights.items()
    }


def regenerated_weights(
    record: Mapping[str, Mapping[str, object]], seed: int = WEIGHT_SEED
) -> tuple[dict[str, np.ndarray], float]:
    """The weights of a :func:`weight_record`, and the largest relative error of their sums.

    The error is 0 up to float64 summation rounding when this NumPy draws what the harness's
    did (NEP 19 keeps ``RandomState`` streams fixed); anything more means other weights.
    """
    weights = generated_weights({name: entry["shape"] for name, entry in record.items()}, seed)
    errors = [
        abs(float(np.sum(weights[name], dtype=np.float64)) - float(entry["sum"]))
        / max(float(np.sum(np.abs(weights[name]), dtype=np.float64)), 1e-300)
        for name, entry in record.items()
    ]
    return weights, max(errors, default=0.0)
