"""Trace the released training steps: loss, gradients and updates over a learning-rate change.

For rotation prediction, RotNet, contrastive and contrastive DA, the released trainer
(``UnsupEmbed`` / ``Contrastive`` of the released code, built as its ``config()`` builds it,
with its own ``train_step``, weight decay, cosine schedule and the legacy Keras SGD) takes
:data:`STEPS` steps at ``--net_width 0.25`` from the weights of :mod:`weights`, on fixed views
written here (uint8 images of :data:`SIDE` pixels, which the released network, built for
32-pixel inputs, takes as any side: the step reads them as ``x / 255``):

* the loss of each step (total, cross-entropy, and the L2 sum it adds ``weight_decay`` times);
* every trainable weight's gradient at each step, as the optimiser receives it (weight decay
  included, ``util/train.py``'s ``loss_l2``): recorded inside ``apply_gradients``;
* every weight's update in each step (BatchNorm moving statistics included);
* the rate each step applied.

At width 0.25 with the released stem, the scripts' heads eight layers deep but
:data:`HEAD_HIDDEN` units wide.

``--num_batch`` 2 and ``--num_epoch`` 3: the per-epoch cosine moves the rate after step 2,
so steps 3 and 4 show the momentum form. Tensors are stored as summaries (:mod:`summaries`):
the width-0.25 network with its 8 x 512 head has 2.6 M weights.

In float64 (Keras' ``floatx``), not the released float32: a float32 gradient of this network
is ill-conditioned. A ReLU input within rounding of zero, which some of the millions of a
step has, flips between two float32 computations, and BatchNorm's backward pass, which
subtracts the batch mean of the gradient, amplifies that: at the stem, each implementation's
float32 gradient of step 1 on these views is percents (norm-relative) from the float64 one,
and across steps the differences grow (a step's error moves the next step's activations). In
float64 the two agree to about 1e-12 at step 1, so the comparison sees the loss, the gradient,
the weight decay, the update rule and the schedule themselves; the float32 forward pass is
compared by the ``network`` trace. The rate, ``2^-7``, and the cosine's factors at these
steps (1 and 0.75) are exact in float32, in which the released schedule computes them.
Keras keeps the momentum in a float32 variable (0.9 is 0.8999999762 there), which the
comparison mirrors. In float64 Keras does not fuse the convolutions' BatchNorm, so their
moving variances follow the biased batch variance here (the fused float32 layers' follow the
unbiased one, as the ``network`` trace shows): the comparison leaves those out.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from networks import (
    HEADS,
    IMAGE_SIDE,
    RELEASED_STEM,
    WIDTHS,
    Head,
    fixed_images,
    unit_float,
)
from summaries import summaries
from trace_io import released_meta, write_trace
from trace_network import set_generated_weights
from weights import WEIGHT_SEED, weight_name, weight_record

WIDTH = 0.25
#: Side of the views: half CIFAR's, so the float64 steps cost a quarter (the network is
#: convolutional with a global average pool; the ``network`` trace runs 32 pixels).
SIDE = 16
#: Units of the heads' hidden layers (the scripts' 512, eight layers deep as theirs): a step's
#: arithmetic is the same at any width, the ``network`` trace runs the 512-unit heads, and
#: the float64 steps of the 2.1 M weights of a 512-unit head would be most of the cost.
HEAD_HIDDEN = 64
STEPS = 4
NUM_BATCH = 2
NUM_EPOCH = 3
VIEW_SEED = 1
SEED = 1
#: The released scripts' optimiser (script/run_*.sh), but a rate exact in float32 (module
#: docstring) near their 0.01.
LEARNING_RATE, MOMENTUM, WEIGHT_DECAY, TEMPERATURE = 2.0**-7, 0.9, 3e-4, 0.2
#: The steps run in float64 on both sides (module docstring).
DTYPE = "float64"
#: The released trainer's loss metrics: total, cross-entropy, and the L2 sum (before wd).
LOSS_COLUMNS = ("loss.train", "loss.xe", "loss.L2")


@dataclass(frozen=True)
class StepMethod:
    """One trained method: its released trainer, head and views per step."""

    trainer: str  # the released class: "UnsupEmbed" (rotations) or "Contrastive"
    head: str  # a key of networks.HEADS
    aug_list: str  # --aug_list (its length is the number of view chunks)
    images: int  # images (rotations) or instances (contrastive) per step
    expand: bool = False  # contrastive DA: instances are rotated copies (data/cifar.py)


METHODS: dict[str, StepMethod] = {
    "rotation": StepMethod("UnsupEmbed", "rotation", "x,+rotate90,+rotate180,+rotate270", 2),
    "rotnet": StepMethod("UnsupEmbed", "rotnet", "x,+rotate90,+rotate180,+rotate270", 2),
    "contrastive": StepMethod("Contrastive", "contrastive", "x,+", 4),
    "contrastive_da": StepMethod("Contrastive", "contrastive", "x,+", 4, expand=True),
}


def step_head_dims(head: Head) -> tuple[int, ...]:
    """The released head's ``--head_dims`` with its 512-unit layers :data:`HEAD_HIDDEN` wide."""
    return tuple(HEAD_HIDDEN if d == 512 else d for d in head.head_dims or ())


class _HParams(dict):
    """The flags as the released ``train_and_eval_loop.HParams`` holds them."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.__dict__ = self


def _hparams(method: StepMethod) -> _HParams:
    """The released scripts' flags for ``method`` (script/run_*.sh), at the trace's budget."""
    head = HEADS[method.head]
    return _HParams(
        model_dir="",
        root="",
        method=method.trainer,
        dataset="cifar10ood",
        category="0",
        is_validation=False,
        aug_list=method.aug_list,
        aug_list_for_test=None,
        input_shape=f"{IMAGE_SIDE},{IMAGE_SIDE},3",
        distaug_type="rot" if method.expand else "1",
        net_type="ResNet18",
        net_width=WIDTH,
        head_dims=",".join(str(d) for d in step_head_dims(head)),
        latent_dim=head.latent_dim,
        seed=SEED,
        force_init=False,
        optim_type="sgd",
        sched_type="cos",
        sched_freq="epoch",
        sched_step_size=1,
        sched_gamma=0.995,
        sched_min_rate=0.0,
        sched_level=7,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        regularize_bn=False,
        momentum=MOMENTUM,
        nesterov=False,
        num_epoch=NUM_EPOCH,
        num_batch=NUM_BATCH,
        batch_size=method.images,
        ckpt_prefix="",
        ckpt_epoch=32,
        file_path=None,
        temperature=TEMPERATURE,
    )


def _views(released: Any, method: StepMethod) -> np.ndarray:
    """uint8 views ``(2 batches, chunks, n, side, side, 3)``: steps alternate the batches.

    Rotations: chunk ``k`` is every image turned ``k`` quarter turns, as the released views
    ``+rotate90`` ... (an image flipped left-right for its 2nd view, so the views differ).
    Contrastive: chunk 0 the instances, chunk 1 their mirror images shifted by one pixel.
    Contrastive DA: the instances are the images' rotated copies, made by the released
    ``rotate_array_deterministic`` (``data/cifar.py``).
    """
    batches = []
    for batch in range(2):
        if method.trainer == "UnsupEmbed":
            images = fixed_images(VIEW_SEED + batch, method.images, SIDE)
            images[1::2] = images[1::2, :, ::-1]
            chunks = [np.rot90(images, k, axes=(1, 2)) for k in range(4)]
        else:
            count = method.images // 4 if method.expand else method.images
            images = fixed_images(VIEW_SEED + batch, count, SIDE)
            if method.expand:
                images = released.module("data.cifar").rotate_array_deterministic(images)
            chunks = [images, np.roll(images[:, :, ::-1], 1, axis=2)]
        batches.append(np.stack(chunks))
    return np.ascontiguousarray(np.stack(batches))


def _configure(released: Any, trainer: Any) -> None:
    """Configure the trainer as its ``config()`` does, without a data set (in its scope)."""
    trainer.set_random_seed()
    with contextlib.redirect_stdout(io.StringIO()):  # get_model prints the summary
        trainer.model = trainer.get_model(
            arch=trainer.net_type,
            width=trainer.net_width,
            head_dims=trainer.head_dims,
            input_shape=trainer.input_shape,
            num_class=trainer.latent_dim,
        )
    trainer.scheduler, _ = trainer.get_scheduler(
        sched_type=trainer.sched_type,
        step_per_epoch=1 if trainer.sched_freq == "step" else trainer.num_batch,
        max_step=trainer.num_epoch * trainer.num_batch,
        learning_rate=trainer.learning_rate,
        step_size=trainer.sched_step_size,
        gamma=trainer.sched_gamma,
        min_rate=trainer.sched_min_rate,
        level=trainer.sched_level,
    )
    trainer.optimizer, _ = trainer.get_optimizer(
        scheduler=trainer.scheduler,
        optim_type=trainer.optim_type,
        learning_rate=trainer.learning_rate,
        momentum=trainer.momentum,
        nesterov=trainer.nesterov,
    )
    tf = released.tf
    trainer.metrics = {  # as train_begin()
        key: tf.keras.metrics.Mean() if key.startswith("loss") else tf.keras.metrics.Accuracy()
        for key in trainer.list_of_metrics
    }


def _record_gradients(trainer: Any, tf: Any) -> dict[str, Any]:
    """Keep each gradient the optimiser is given in a variable of its own (read after a step)."""
    slots = {
        weight_name(v.name): tf.Variable(
            tf.zeros_like(v),
            trainable=False,
            aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
        )
        for v in trainer.model.trainable_weights
    }
    apply_gradients = trainer.optimizer.apply_gradients

    def recording(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
        grads_and_vars = list(grads_and_vars)
        for gradient, variable in grads_and_vars:
            slots[weight_name(variable.name)].assign(gradient)
        return apply_gradients(grads_and_vars, *args, **kwargs)

    trainer.optimizer.apply_gradients = recording
    return slots


def _dataset(released: Any, trainer: Any, views: np.ndarray) -> Any:
    """The steps' inputs as the trainer's iterator yields them: views..., label, index."""
    tf = released.tf
    order = np.arange(STEPS) % len(views)
    x = unit_float(views[order]).astype(DTYPE)  # (steps, chunks, n, h, w, 3)
    n = views.shape[2]
    labels = np.zeros((STEPS, n, 1), np.int64)
    index = np.tile(np.arange(n, dtype=np.int64)[:, None], (STEPS, 1, 1))
    elements = (*(x[:, chunk] for chunk in range(views.shape[1])), labels, index)
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    return iter(trainer.strategy.experimental_distribute_dataset(dataset))


@contextlib.contextmanager
def _float64(tf: Any) -> Iterator[None]:
    """Keras layers built inside compute in float64 (``floatx``), restored after."""
    saved = tf.keras.backend.floatx()
    tf.keras.backend.set_floatx(DTYPE)
    try:
        yield
    finally:
        tf.keras.backend.set_floatx(saved)


def _method_trace(released: Any, name: str, method: StepMethod, out: Path) -> Path:
    tf = released.tf
    with _float64(tf):
        return _write_method_trace(released, name, method, out)


def _write_method_trace(released: Any, name: str, method: StepMethod, out: Path) -> Path:
    tf = released.tf
    views = _views(released, method)
    module = released.module("contrastive" if method.trainer == "Contrastive" else "unsup_embed")
    trainer = getattr(module, method.trainer)(_hparams(method))
    arrays: dict[str, np.ndarray] = {"views": views}
    gradients, updates, index = [], [], {}
    with trainer.strategy.scope():  # as train_and_eval_loop.main
        _configure(released, trainer)
        weights = set_generated_weights(trainer.model)
        slots = _record_gradients(trainer, tf)
        iterator = _dataset(released, trainer, views)
        before = {weight_name(v.name): v.numpy().astype(np.float64) for v in trainer.model.weights}
        losses, rates = [], []
        for _ in range(STEPS):
            rates.append(float(trainer.scheduler(trainer.optimizer.iterations).numpy()))
            for metric in trainer.metrics.values():
                metric.reset_states()
            trainer.train_step(iterator)
            losses.append([float(trainer.metrics[k].result()) for k in LOSS_COLUMNS])
            rows, index["gradient"] = summaries({k: slot.numpy() for k, slot in slots.items()})
            gradients.append(rows)
            after = {
                weight_name(v.name): v.numpy().astype(np.float64) for v in trainer.model.weights
            }
            rows, index["update"] = summaries({k: after[k] - before[k] for k in after})
            updates.append(rows)
            before = after
    # Summaries stored as float32: 6e-8 of each field, below the comparisons' bounds.
    arrays["gradient"] = np.array(gradients)  # (steps, trainable weights, fields)
    arrays["update"] = np.array(updates)  # (steps, weights, fields)
    arrays["loss"] = np.array(losses)  # (steps, LOSS_COLUMNS)
    arrays["lr"] = np.array(rates)
    meta = released_meta(
        released,
        family="steps",
        method=name,
        trainer=method.trainer,
        head=method.head,
        our_method=name,
        head_depth=HEADS[method.head].head_depth,
        head_hidden=HEAD_HIDDEN,
        width=WIDTHS[WIDTH],
        stem_width=RELEASED_STEM,
        steps=STEPS,
        num_batch=NUM_BATCH,
        num_epoch=NUM_EPOCH,
        per_step=method.images,
        expanded=method.expand,
        learning_rate=LEARNING_RATE,
        momentum=MOMENTUM,
        weight_decay=WEIGHT_DECAY,
        temperature=TEMPERATURE,
        hparams=dict(_hparams(method)),
        seed=SEED,
        view_seed=VIEW_SEED,
        weight_seed=WEIGHT_SEED,
        weights=weight_record(weights),
        index=index,
        loss_columns=list(LOSS_COLUMNS),
    )
    return write_trace(out, f"steps_{name}", arrays, meta)


def trace(released: Any, out: Path) -> list[Path]:
    """Write one ``steps_<method>`` trace per method under ``out``."""
    return [_method_trace(released, name, method, out) for name, method in METHODS.items()]
