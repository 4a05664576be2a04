"""Our network against the ``network`` trace (trace_network.py): outputs, moving statistics,
initialisers. Torch and NumPy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from networks import RELEASED_STEM
from ours import nchw, our_network, released_outputs
from parity import Difference, relative_difference
from summaries import summary, summary_difference
from trace_io import read_trace, unpack
from weights import regenerated_weights

from pipeline_lib.models.keras_weights import hidden_layers, torch_name
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.settings import TrainSettings

FAMILY = "network"

#: float32 forward passes in two libraries: each of up to 27 layers (18 convolutions, 9 Dense)
#: sums K <= 9 * 512 = 4,608 products in another order than TensorFlow's kernels, off by about
#: sqrt(K) * 2^-24 = 4e-6 of its magnitude; over 27 layers about 1e-4. In training mode
#: BatchNorm divides by the batch's deviations, which amplify that where a channel varies
#: little across the 8 images: 3x. Norm-relative: of the largest released entry (whole
#: tensors, width 0.25) or of the norm (summaries, width 1). Measured: at most 6e-5.
OUTPUT_TOLERANCE = 3e-4
#: A moving statistic is 0.9 old + 0.1 batch statistic: the batch mean and variance of the
#: layer's input carry the forward pass's error above (the variance twice, as a square), so
#: the same bound holds; a biased against unbiased variance moves it by 0.1 / (n - 1) of
#: the batch variance, 1.4e-2 at this trace's 8 images.
MOVING_TOLERANCE = 3e-4
#: Weight sums: float64 sums of the same float32 draws, so only float64 rounding.
WEIGHTS_TOLERANCE = 1e-12
#: Init: per-tensor mean and standard deviation of n draws on each side (the released init
#: under TF 2.21 is not TF 2.3's draws, so only the distribution is compared). The sample
#: standard deviation's relative standard error is about 1 / sqrt(2 n) (normal and
#: truncated-normal draws), the mean's std / sqrt(n); 6 standard errors of the difference of
#: two samples keep a false alarm below 1e-8 per tensor, while a fan-in rule moves the
#: stem's standard deviation by a factor sqrt(576 / 27) = 4.6 and every stage's first
#: convolution's by sqrt(2).
INIT_STANDARD_ERRORS = 6.0


def _released(
    arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], prefix: str
) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """The released tensors of ``prefix`` by name (``mode/output`` or a Keras moving
    statistic): whole, or their summaries at width 1; and each tensor's size."""
    index = meta["index"][prefix]
    sizes = {name: int(np.prod(shape, dtype=np.int64)) for name, shape in index}
    if f"{prefix}/summaries" in arrays:
        rows = arrays[f"{prefix}/summaries"]
        return {name: row for (name, _), row in zip(index, rows, strict=True)}, sizes
    tensors = unpack(arrays[f"{prefix}/moving"], index)
    for key in (k for k in arrays if k.startswith(f"{prefix}/") and k != f"{prefix}/moving"):
        name = key.removeprefix(f"{prefix}/")
        tensors[name], sizes[name] = arrays[key], arrays[key].size
    return tensors, sizes


def _difference(ours: np.ndarray, released: np.ndarray, name: str, size: int) -> float:
    """Whole tensors: max-abs relative; a summary (width 1): norm-relative."""
    if released.shape == ours.shape:
        return relative_difference(ours, released)
    return summary_difference(summary(name, ours), released, size)


def _width_differences(
    arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], width: str
) -> list[Difference]:
    """Every head at ``width``: one forward pass of the backbone per mode, shared by the heads.

    The weights are drawn by Keras name and shape, so the three released models share their
    backbone's weights (and the harness computed the same backbone three times): ours is
    built for each head and checked to hold the same backbone, then run once.
    """
    models, weights, found = {}, {}, {}
    for name, head in meta["heads"].items():
        weights[name], error = regenerated_weights(meta["weights"][f"w{width}/{name}"])
        models[name] = our_network(head, int(meta["widths"][width]), weights[name])
        found[name] = {"weights": error}
    first = next(iter(models.values()))
    shared = first.backbone.state_dict()
    for name, model in models.items():
        own = model.backbone.state_dict()
        if any(not torch.equal(own[key], shared[key]) for key in shared):
            raise ValueError(f"width {width}: the {name} model's backbone is not the others'")
        model.backbone = first.backbone  # one computation serves every head
    released = {name: _released(arrays, meta, f"w{width}/{name}") for name in models}
    x = nchw(arrays["images"])
    for mode in ("inference", "training"):
        with torch.no_grad():
            first.train(mode == "training")
            pools = first.backbone(x)
            for name, model in models.items():
                model.train(mode == "training")
                tensors, sizes = released[name]
                for output, value in released_outputs(model, x, pools=pools).items():
                    key = f"{mode}/{output}"
                    found[name][f"{mode} {output}"] = _difference(
                        value.numpy(), tensors[key], key, sizes[key]
                    )
    for name, model in models.items():
        tensors, sizes = released[name]
        state, hidden = model.state_dict(), hidden_layers(weights[name])
        for keras_name in (k for k in tensors if "/moving_" in k):
            ours = state[torch_name(keras_name, hidden_layers=hidden)].numpy()
            part = "head" if keras_name.startswith("proj_") else "convolutions"
            label = f"{keras_name.rsplit('/', 1)[-1]} ({part})"
            difference = _difference(ours, tensors[keras_name], keras_name, sizes[keras_name])
            found[name][label] = max(found[name].get(label, 0.0), difference)
    measure = "max-abs relative" if width != "1" else "norm-relative (summaries)"
    return [
        Difference(
            FAMILY,
            f"width {width} {name}: {what}",
            value,
            _tolerance(what),
            "relative sum" if what == "weights" else measure,
            _why(what),
        )
        for name in models
        for what, value in found[name].items()
    ]


def _tolerance(what: str) -> float:
    if what == "weights":
        return WEIGHTS_TOLERANCE
    return MOVING_TOLERANCE if what.startswith("moving") else OUTPUT_TOLERANCE


def _why(what: str) -> str:
    if what == "weights":
        return "the same RandomState draws on both sides: float64 summation rounding"
    if what.startswith("moving"):
        return "0.9 old + 0.1 batch statistic: the forward pass's float32 rounding"
    return "float32 sums in another order over 20 layers (K <= 4,608 terms each)"


def _init_differences(
    arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]
) -> list[Difference]:
    """Our initialisers' per-tensor mean and std against the released ones, in standard errors."""
    found: list[Difference] = []
    for name, head in meta["heads"].items():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(meta["init_seed"])
            model = build_proxy_model(
                head["method"],
                width=int(meta["widths"]["0.25"]),
                stem_width=RELEASED_STEM,
                head_depth=head["head_depth"],
                init=TrainSettings.init,  # the recipe's initialisers, as the trainer's
            )
        state = model.state_dict()
        index = meta["index"][f"init/{name}"]
        hidden = hidden_layers(keras_name for keras_name, _ in index)
        worst = {"kernels": 0.0, "constants": 0.0}
        for (keras_name, _), moments in zip(index, arrays[f"init/{name}"], strict=True):
            ours = state[torch_name(keras_name, hidden_layers=hidden)].numpy().astype(np.float64)
            released_mean, released_std = moments
            n = ours.size
            if released_std == 0:
                worst["constants"] = max(
                    worst["constants"], abs(ours.mean() - released_mean) + ours.std()
                )
                continue
            # Standard errors of the difference of two samples of n draws each.
            std_error = released_std * np.sqrt(2.0 / (2 * n))
            mean_error = released_std * np.sqrt(2.0 / n)
            worst["kernels"] = max(
                worst["kernels"],
                abs(ours.std() - released_std) / std_error,
                abs(ours.mean() - released_mean) / mean_error,
            )
        found += [
            Difference(
                FAMILY,
                f"init {name}: kernels' mean and standard deviation",
                worst["kernels"],
                INIT_STANDARD_ERRORS,
                "standard errors",
                "two samples of the same distribution: 6 standard errors",
            ),
            Difference(
                FAMILY,
                f"init {name}: constant tensors (BatchNorm, biases)",
                worst["constants"],
                0.0,
                "absolute",
                "the same constants (1 and 0) on both sides",
            ),
        ]
    return found


def compare(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> list[Difference]:
    """Every quantity of the ``network`` trace, ours against the released code's."""
    found: list[Difference] = []
    for width in meta["widths"]:
        found += _width_differences(arrays, meta, width)
    return found + _init_differences(arrays, meta)


def differences(folder) -> list[Difference]:
    """:func:`compare` on the ``network`` trace in ``folder``."""
    return compare(*read_trace(folder, FAMILY))
