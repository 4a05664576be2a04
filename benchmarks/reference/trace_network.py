"""Trace the released network: outputs and BatchNorm moving statistics on a fixed batch.

For each released head (:data:`networks.HEADS`) at ``--net_width`` 1 and 0.25, with every
weight set from :mod:`weights` by its Keras name:

* ``pools``, ``embeds`` and ``logits`` in inference mode, then in training mode (batch
  statistics), one call each;
* every BatchNorm's moving mean and variance after that one training-mode call;
* width 0.25: the full tensors; width 1: their summaries (:mod:`summaries`);
* the released initialisers' per-tensor mean and standard deviation (width 0.25, a fresh
  model of each head, seeded): compared by distribution only, since TF 2.21's Keras does not
  draw what TF 2.3's did.

One trace, ``network``: the batch itself is stored, the weights only by their Keras names,
shapes and sums (:func:`weights.weight_record`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from networks import HEADS, WIDTHS, fixed_images, released_network, unit_float
from summaries import summaries
from trace_io import pack, released_meta, write_trace
from weights import WEIGHT_SEED, generated_weights, weight_name, weight_record

#: Seed of the fixed batch and of the released initialisers.
INPUT_SEED = 1
INIT_SEED = 1
BATCH = 8
OUTPUTS = ("pools", "embeds", "logits")
MOVING = ("moving_mean", "moving_variance")


def set_generated_weights(model: Any) -> dict[str, np.ndarray]:
    """Assign every weight of ``model`` from :mod:`weights`; return them by name."""
    weights = generated_weights({w.name: tuple(w.shape) for w in model.weights})
    for variable in model.weights:
        variable.assign(weights[weight_name(variable.name)])
    return weights


def _network(
    released: Any, name: str, width: float, images: np.ndarray, meta: dict[str, Any]
) -> dict[str, np.ndarray]:
    """One (head, width): outputs in both modes and the moving statistics after.

    Width 0.25: ``<prefix>/<mode>/<output>`` whole and ``<prefix>/moving`` packed
    (:func:`trace_io.pack`); width 1: ``<prefix>/summaries``, one row per tensor.
    """
    model = released_network(released, HEADS[name], width)
    weights = set_generated_weights(model)
    prefix = f"w{width:g}/{name}"
    tensors: dict[str, np.ndarray] = {}
    for mode, training in (("inference", False), ("training", True)):
        outputs = model(images, training=training)
        for output in OUTPUTS:
            tensors[f"{mode}/{output}"] = outputs[output].numpy()
    moving = {
        weight_name(v.name): v.numpy()
        for v in model.weights
        if weight_name(v.name).rsplit("/", 1)[-1] in MOVING
    }
    meta["weights"][prefix] = weight_record(weights)
    if width == 1.0:
        rows, meta["index"][prefix] = summaries({**tensors, **moving})
        return {f"{prefix}/summaries": rows}
    flat, meta["index"][prefix] = pack(moving)
    return {f"{prefix}/{key}": value for key, value in tensors.items()} | {f"{prefix}/moving": flat}


def _init_distributions(released: Any, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """``(mean, std)`` of every trainable weight of a fresh width-0.25 model of each head.

    First in the process, after ``tf.keras.utils.set_random_seed``: tf-keras draws an
    unseeded initialiser's seed from that generator when it is first used, and the released
    convolutions share one default-argument instance (``model/resnet_util.py``), so only the
    order of the models built since the seed decides their weights.
    """
    released.tf.keras.utils.set_random_seed(INIT_SEED)
    moments = {}
    for name in HEADS:
        model = released_network(released, HEADS[name], 0.25)
        values = {weight_name(v.name): v.numpy() for v in model.trainable_weights}
        meta["index"][f"init/{name}"] = [[key, list(value.shape)] for key, value in values.items()]
        moments[f"init/{name}"] = np.array(
            [
                [value.mean(dtype=np.float64), value.std(dtype=np.float64)]
                for value in values.values()
            ]
        )
    return moments


def trace(released: Any, out: Path) -> list[Path]:
    """Write the ``network`` trace under ``out``; return its path."""
    images = unit_float(fixed_images(INPUT_SEED, BATCH))
    arrays: dict[str, np.ndarray] = {"images": images}
    meta = released_meta(
        released,
        family="network",
        input_seed=INPUT_SEED,
        init_seed=INIT_SEED,
        weight_seed=WEIGHT_SEED,
        widths={f"{width:g}": ours for width, ours in WIDTHS.items()},
        heads={name: vars(head) for name, head in HEADS.items()},
        weights={},
        index={},
    )
    arrays.update(_init_distributions(released, meta))
    for width in WIDTHS:
        for name in HEADS:
            arrays.update(_network(released, name, width, images, meta))
    return [write_trace(out, "network", arrays, meta)]
