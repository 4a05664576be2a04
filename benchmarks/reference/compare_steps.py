"""Our training steps against the ``steps_<method>`` traces (trace_steps.py). Torch and NumPy.

Our side is the trainer itself: :func:`pipeline_lib.ssl.run.prepare_run` with the
recipe's defaults (optimiser groups and their weight decay, cosine schedule, momentum form,
loss form) and the trace's budget, the converted weights loaded, the model in float64 (as the
trace: trace_steps.py says why), and the eager loop (:func:`pipeline_lib.ssl.loop.
train_epoch`) stepping through it, with one change: the run's step reads the trace's fixed
views instead of drawing views from the images. Before each step the fixed step records the
model and the previous step's gradients. A gradient "with weight decay" is ``grad +
weight_decay * w`` with each parameter's group's decay, what torch's SGD adds (the released
loss adds ``wd * sum(v^2) / 2``, the same gradient); the loss "with wd * L2" is the
cross-entropy plus ``weight_decay * sum(w^2) / 2`` over the decayed groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from networks import unit_float
from ours import load_keras_weights, nchw
from parity import Difference
from summaries import summary, summary_difference
from trace_io import read_trace
from weights import regenerated_weights

from pipeline_lib.models.keras_weights import hidden_layers, keras_layout, torch_name
from pipeline_lib.registry import method_spec
from pipeline_lib.ssl.loop import train_epoch
from pipeline_lib.ssl.run import prepare_run
from pipeline_lib.ssl.settings import Execution, TrainSettings

FAMILY = "steps"
METHODS = ("rotation", "rotnet", "contrastive", "contrastive_da")

#: The loss: the released trainer reports it through a float32 Keras ``Mean`` (2^-24
#: relative), the float64 arithmetic of both sides differs by summation order (1e-15): 8
#: float32 half-ulps.
LOSS_TOLERANCE = 8 * 2.0**-24
#: Gradients, updates and moving statistics, float64 on both sides: each of the 20 layers'
#: sums of K <= 4,608 terms in another order is off by about sqrt(K) 2^-53 = 8e-15 of its
#: magnitude, forward and backward (80 such sums), so 1e-12 at step 1; a step's difference
#: moves the next step's activations, which has multiplied it by at most 100 a step in these
#: traces (measured: about 1e-12, 1e-11, 1e-9, 4e-8 at steps 1-4), so 1e-6 after four.
#: Keras makes BatchNorm's ``1 - momentum`` a float32 tensor (0.1 off by 1.5e-8), which the
#: moving statistics carry. A change of the recipe moves these by 4e-3 (BatchNorm exempt
#: from weight decay: step 1's gradients) to 0.35 (torch's momentum form: the update after
#: the rate moved).
STEP_TOLERANCE = 1e-6
#: The rate: exact in float32 at every traced step (trace_steps.py), so only float64's
#: rounding of ours: a few float64 ulps.
RATE_TOLERANCE = 8 * 2.0**-53
#: Weight sums: float64 sums of the same float32 draws.
WEIGHTS_TOLERANCE = 1e-12
#: The released trainer's loss metrics, the columns of the trace's ``loss``.
LOSS_COLUMNS = ("loss.train", "loss.xe", "loss.L2")

LossFunction = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]


def _views(arrays: Mapping[str, np.ndarray], batch: int) -> torch.Tensor:
    """The network input of one step: the trace's chunks of views, concatenated (NCHW)."""
    views = arrays["views"][batch]  # (chunks, n, h, w, 3) uint8
    return nchw(unit_float(views.reshape(-1, *views.shape[2:]))).double()


def _loss_function(run: Any, chunks: int, n: int) -> LossFunction:
    """The loss of the run's step on given views: its task's forward and loss.

    The rotation task's loss reads the rotation of each view (as rotation_views: chunk k
    is rotated k times), the contrastive loss nothing besides the views.
    """
    labels = torch.arange(chunks).repeat_interleave(n)
    extra = labels if method_spec(run.method).rotation_classifier else None

    def loss(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return run.step.loss(run.step.forward(model, x), extra)

    return loss


class _FixedViewSteps:
    """The run's step on the trace's views; records what each step started from."""

    def __init__(self, run: Any, state: Any, arrays: Mapping[str, np.ndarray]) -> None:
        chunks, n = arrays["views"].shape[1:3]
        self.inputs = [_views(arrays, batch) for batch in range(len(arrays["views"]))]
        self.loss = _loss_function(run, chunks, n)
        self.optimizer = state.optimizer
        self.decay = {
            id(p): float(group["weight_decay"])
            for group in state.optimizer.param_groups
            for p in group["params"]
        }
        self.before: list[dict[str, torch.Tensor]] = []  # the model before each step
        self.gradients: list[dict[str, torch.Tensor]] = []  # with weight decay, per step
        self.losses: list[list[float]] = []  # LOSS_COLUMNS of each step
        self.rates: list[float] = []

    def record_gradients(self, model: torch.nn.Module) -> None:
        """The gradients of the step just taken (the loop zeroes them after the next loss)."""
        before = self.before[len(self.gradients)]
        self.gradients.append(
            {
                name: p.grad.detach() + self.decay[id(p)] * before[name]
                for name, p in model.named_parameters()
            }
        )

    def __call__(self, model: torch.nn.Module, batch: torch.Tensor, **_: Any) -> torch.Tensor:
        if self.before:
            self.record_gradients(model)
        state = {name: t.detach().clone() for name, t in model.state_dict().items()}
        self.before.append(state)
        self.rates.append(float(self.optimizer.param_groups[0]["lr"]))
        loss = self.loss(model, self.inputs[(len(self.before) - 1) % len(self.inputs)])
        squares = {n: float(state[n].square().sum()) / 2 for n, _ in model.named_parameters()}
        decayed = sum(self.decay[id(p)] * squares[n] for n, p in model.named_parameters())
        xe = float(loss.detach())
        self.losses.append([xe + decayed, xe, sum(squares.values())])
        return loss


def _our_steps(
    arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any], weights: dict[str, np.ndarray]
) -> tuple[_FixedViewSteps, dict[str, torch.Tensor]]:
    """Run the trace's steps through our trainer: the recorder and the final model."""
    per_step, num_batch = int(meta["per_step"]), int(meta["num_batch"])
    method = meta["our_method"]
    options: dict[str, Any] = {
        "epochs": int(meta["num_epoch"]),
        "batch_size": per_step,
        "lr": float(meta["learning_rate"]),
        # Keras keeps the momentum in a float32 variable (trace_steps.py).
        "momentum": float(np.float32(meta["momentum"])),
        "weight_decay": float(meta["weight_decay"]),
        "width": int(meta["width"]),
        "stem_width": int(meta["stem_width"]),
        "amp": None,
    }
    spec = method_spec(method)
    if spec.has_mlp_head:
        options["head_depth"] = int(meta["head_depth"])
        options["head_hidden"] = int(meta["head_hidden"])
    if spec.reads_setting("temperature"):
        options["temperature"] = float(meta["temperature"])
    # Blank images, as many as make the trace's steps an epoch (DA expands them 4 times).
    sources = per_step * num_batch // (4 if meta["expanded"] else 1)
    side = arrays["views"].shape[3]
    images = np.zeros((sources, side, side, 3), np.uint8)
    run, state = prepare_run(
        TrainSettings(method, **options),
        images,
        seed=int(meta["seed"]),
        execution=Execution(step_mode="eager"),
    )
    if run.data.steps_per_epoch != num_batch:
        raise ValueError(f"{run.data.steps_per_epoch} steps an epoch, the trace has {num_batch}")
    load_keras_weights(state.model, weights)
    state.model.double()  # in place: the optimiser keeps its parameters
    steps = _FixedViewSteps(run, state, arrays)
    run = dataclasses.replace(run, step=steps)
    for _ in range(-(-int(meta["steps"]) // num_batch)):
        train_epoch(run, state)
    steps.record_gradients(state.model)
    final = {name: t.detach().clone() for name, t in state.model.state_dict().items()}
    return steps, final


def _worst(
    rows: np.ndarray, index: list[list[Any]], ours: Callable[[str], np.ndarray | None]
) -> float:
    """The largest norm-relative difference of the tensors ``ours(name)`` names (None: skip)."""
    worst = 0.0
    for (name, shape), row in zip(index, rows, strict=True):
        value = ours(name)
        if value is not None:
            size = int(np.prod(shape, dtype=np.int64))
            worst = max(worst, summary_difference(summary(name, value), row, size))
    return worst


def compare(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> list[Difference]:
    """Every quantity of one ``steps_<method>`` trace, ours against the released code's."""
    method = meta["method"]
    weights, weights_error = regenerated_weights(meta["weights"])
    steps, final = _our_steps(arrays, meta, weights)
    hidden = hidden_layers(weights)
    key = {name: torch_name(name, hidden_layers=hidden) for name in weights}
    count = int(meta["steps"])
    models = [*steps.before[1:count], final]  # the model after each step

    def difference(quantity: str, largest: float, tolerance: float, measure: str, why: str):
        return Difference(FAMILY, f"{method}: {quantity}", largest, tolerance, measure, why)

    losses = np.array(steps.losses[:count])
    rates = np.array(steps.rates[:count])
    found = [
        difference("weights", weights_error, WEIGHTS_TOLERANCE, "relative sum", "same draws"),
        difference(
            "loss of each step, with wd * L2 over every weight (BatchNorm and biases too)",
            float(np.max(np.abs(losses - arrays["loss"]) / np.abs(arrays["loss"]))),
            LOSS_TOLERANCE,
            "relative",
            "a float32 Keras Mean reports the released loss",
        ),
        difference(
            "rate of each step",
            float(np.max(np.abs(rates - arrays["lr"]) / arrays["lr"])),
            RATE_TOLERANCE,
            "relative",
            "exact in float32: float64 rounding",
        ),
    ]
    for step in range(count):
        before, after = steps.before[step], models[step]

        def gradient(name: str, step: int = step) -> np.ndarray:
            return keras_layout(steps.gradients[step][key[name]].numpy())

        def update(name: str, moving: bool, before=before, after=after) -> np.ndarray | None:
            if ("/moving_" in name) != moving:
                return None
            if moving and not name.startswith("proj_") and name.endswith("moving_variance"):
                return None  # Keras' float64 BatchNorm is not fused (trace_steps.py)
            return keras_layout((after[key[name]] - before[key[name]]).numpy())

        moved = " (the rate moved)" if step and rates[step] != rates[step - 1] else ""
        rows = arrays["update"][step]
        found += [
            difference(
                f"step {step + 1} gradients with weight decay",
                _worst(arrays["gradient"][step], meta["index"]["gradient"], gradient),
                STEP_TOLERANCE,
                "norm-relative (summaries)",
                "float64 sums in another order, grown by the steps before",
            ),
            difference(
                f"update of step {step + 1}{moved}",
                _worst(rows, meta["index"]["update"], lambda n, u=update: u(n, moving=False)),
                STEP_TOLERANCE,
                "norm-relative (summaries)",
                "float64 sums in another order, grown by the steps before",
            ),
            difference(
                f"BatchNorm moving statistics' change in step {step + 1}",
                _worst(rows, meta["index"]["update"], lambda n, u=update: u(n, moving=True)),
                STEP_TOLERANCE,
                "norm-relative (summaries)",
                "the batch statistics of float64 forward passes",
            ),
        ]
    return found


def differences(folder: Path) -> list[Difference]:
    """:func:`compare` on every ``steps_<method>`` trace in ``folder``."""
    found: list[Difference] = []
    for method in METHODS:
        found += compare(*read_trace(folder, f"{FAMILY}_{method}"))
    return found
