"""Our view augmentation (pipeline_lib/ssl/augment.py, color_ops.py) against the released one
(trace_augment.py): each operation on fixed inputs, the distribution of every parameter the
samplers draw, the jitter order per view stream, and the training batches of contrastive DA.

Ours is always the recipe's: the view augmentation that :func:`~pipeline_lib.ssl.run.prepare_run`
builds for the paper's ``contrastive`` row (``recipe_augment``), with at most the operations
other than the one under test switched off, so a changed default strength, probability or
crop scale shows up here.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from distribution import as_differences, continuous, discrete
from inputs import coordinates, crop_parameters
from parity import Difference, relative_difference
from trace_io import read_trace

from pipeline_lib.registry import BUILTIN_METHODS
from pipeline_lib.ssl.augment import (
    ViewAugment,
    crop_and_resize,
    distribution_copies,
    random_grayscale,
    rotate90,
)
from pipeline_lib.ssl.color_ops import (
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
    released_color_jitter,
)
from pipeline_lib.ssl.draws import GeneratorDraws
from pipeline_lib.ssl.run import prepare_run
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks.contrastive import contrastive_inputs

FAMILY = "augment"
TRACES = ("augment_ops", "augment_draws", "augment_batches")
DISTRIBUTION_SETS = (
    Path(__file__).resolve().parents[2] / "config" / "studies" / "distribution_sets.yaml"
)
EPS32 = float(np.finfo(np.float32).eps)
#: Our draws per parameter (as many as the released trace's) and their seed.
N_OURS = 10000
OUR_SEED = 45
#: The paper's methods with views, which the released recipe never blurs.
VIEW_METHODS = tuple(spec.id for spec in BUILTIN_METHODS if spec.trained and spec.views)

#: Per operation: the tolerance on ``max |ours - released| / max |released|`` and why.
OP_TOLERANCES: dict[str, tuple[float, str]] = {
    "brightness": (
        EPS32,
        "x + delta: one float32 addition of the same float32 operands on both sides",
    ),
    "contrast": (
        4 * EPS32,
        "(x - m) f + m with m the per-channel mean: TF and torch sum the 64 pixels in "
        "other orders (a few ulps in m), then the same two roundings",
    ),
    "saturation": (
        8 * EPS32,
        "TF's RGB -> HSV -> RGB kernel re-implemented in float32 torch: the same formulas, "
        "a few roundings of divisions and products in other orders",
    ),
    "hue": (
        8 * EPS32,
        "TF's adjust_hue kernel (hue sector arithmetic) re-implemented in float32 torch, "
        "as for saturation",
    ),
    "gray": (
        2 * EPS32,
        "a 3-term weighted sum (0.2989, 0.587, 0.114): TF's tensordot and torch's einsum "
        "round at most one addition differently",
    ),
    "crop": (
        8 * EPS32,
        "TF's bilinear resize (top + (bottom - top) * lerp, per axis) against the same "
        "weights as two matrix products ((1 - lerp) top + lerp bottom): a few roundings",
    ),
}


@functools.cache
def recipe_augment() -> ViewAugment:
    """The view augmentation of the paper's contrastive row (seed 1), as training builds it."""
    settings = TrainSettings(method="contrastive", epochs=1, batch_size=2, width=16)
    run, _ = prepare_run(settings, np.zeros((2, 8, 8, 3), np.uint8), seed=1)
    return run.augment


def _nchw(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)


def _nhwc(images: torch.Tensor) -> np.ndarray:
    return images.permute(0, 2, 3, 1).numpy()


class FixedDraws:
    """Draws that return given numbers (the uniforms that make a chosen crop and flip)."""

    static = False

    def __init__(self, uniforms: torch.Tensor) -> None:
        self.uniforms = uniforms

    def rand(self, *shape: int) -> torch.Tensor:
        if tuple(shape) != tuple(self.uniforms.shape):
            raise ValueError(f"asked for {shape}, holds {tuple(self.uniforms.shape)}")
        return self.uniforms

    def randn(self, *shape: int) -> torch.Tensor:
        raise NotImplementedError


def crop_uniforms(
    parameters: np.ndarray, size: int, min_scale: float, flip_p: float
) -> torch.Tensor:
    """``(n, 4)`` uniforms for which :func:`crop_and_resize` draws the given side, top, left
    and flip (each at the middle of its interval of uniforms)."""
    smallest = int(size * min_scale)
    side, top, left, flip = (parameters[:, k].astype(np.float64) for k in range(4))
    u = np.stack(
        [
            (side - smallest + 0.5) / (size - smallest + 1),
            (top + 0.5) / (size - side + 1),
            (left + 0.5) / (size - side + 1),
            np.where(flip > 0, flip_p / 2, (1 + flip_p) / 2),
        ],
        1,
    )
    return torch.from_numpy(u.astype(np.float32))


def _op_differences(trace: dict[str, np.ndarray]) -> list[Difference]:
    images = _nchw(trace["colour_images"])
    n = len(images)
    records = []
    for name, function in (
        ("brightness", adjust_brightness),
        ("contrast", adjust_contrast),
        ("saturation", adjust_saturation),
        ("hue", adjust_hue),
    ):
        values = trace[f"{name}_values"]
        ours = np.stack([_nhwc(function(images, torch.full((n,), float(v)))) for v in values])
        shown = ", ".join(f"{v:g}" for v in values)
        records.append(_op_record(name, ours, trace[name], f"parameters {shown}"))
    gray = random_grayscale(images, generator=torch.Generator().manual_seed(0), p=1.0)
    records.append(
        _op_record("gray", _nhwc(gray), trace["gray"], "tf.image.rgb_to_grayscale's weights")
    )
    augment = recipe_augment()
    parameters = trace["crop_parameters"]  # image, side, top, left, flip
    sources = _nchw(trace["crop_images"])[parameters[:, 0]]
    uniforms = crop_uniforms(parameters[:, 1:], 32, augment.crop_min_scale, augment.flip_p)
    ours = crop_and_resize(
        sources,
        generator=FixedDraws(uniforms),
        min_scale=augment.crop_min_scale,
        flip_p=augment.flip_p,
    )
    records.append(
        _op_record(
            "crop",
            _nhwc(ours),
            trace["crop_outputs"],
            f"RandomCropAndResize + RandomFlipLeftRight, (side, top, left, flip) = "
            f"{[tuple(p) for p in parameters[:, 1:].tolist()]}",
        )
    )
    for k in (1, 2, 3):
        ours = _nhwc(rotate90(images, k))
        records.append(
            Difference(
                FAMILY,
                f"rotate{90 * k} on fixed images (rotation prediction's views)",
                relative_difference(ours, trace[f"rotate{90 * k}"]),
                0.0,
                "max |ours - released| / max |released|",
                "tf.image.rot90 and torch.rot90 move pixels, both counter-clockwise",
            )
        )
    released_blur = float(np.max(np.abs(trace["blur_training"] - trace["colour_images"])))
    records.append(
        Difference(
            FAMILY,
            "blur in training (released RandomBlur, our recipe's views)",
            max(released_blur, _our_blur_change()),
            0.0,
            "max |output - input| of the released RandomBlur, and max change our recipes' "
            "view augmentation makes by its blur stage",
            "the released RandomBlur returns the image when training (augment_ops.py), so "
            "blur0.5 never blurs; ours must not blur either",
        )
    )
    return records


def _op_record(name: str, ours: np.ndarray, released: np.ndarray, detail: str) -> Difference:
    tolerance, why = OP_TOLERANCES[name]
    return Difference(
        FAMILY,
        f"{name} on fixed images ({detail})",
        relative_difference(ours, released),
        tolerance,
        "max |ours - released| / max |released|",
        why,
    )


def _our_blur_change() -> float:
    """How much each paper recipe's views change if their blur stage is dropped (0: none)."""
    images = torch.from_numpy(
        np.random.default_rng(0).integers(0, 256, (4, 3, 16, 16), dtype=np.uint8)
    )
    change = 0.0
    for method in VIEW_METHODS:
        settings = TrainSettings(method=method, epochs=1, batch_size=4, width=16)
        run, _ = prepare_run(settings, np.zeros((4, 16, 16, 3), np.uint8), seed=1)
        augment = run.augment
        unblurred = dataclasses.replace(augment, blur_p=0.0)
        views = augment(images, torch.Generator().manual_seed(3))
        reference = unblurred(images, torch.Generator().manual_seed(3))
        change = max(change, float((views - reference).abs().max()))
    return change


def _in_chunks(n: int, size: int = 2500) -> list[int]:
    return [min(size, n - start) for start in range(0, n, size)]


def our_crop_draws(generator: torch.Generator) -> np.ndarray:
    """``(N_OURS, 4)``: side, top, left, flip of the recipe's crop and flip on 32 x 32."""
    augment = recipe_augment()
    ramps = np.concatenate([coordinates(32), np.zeros((32, 32, 1), np.float32)], -1)
    rows = []
    for n in _in_chunks(N_OURS):
        probe = _nchw(np.broadcast_to(ramps, (n, 32, 32, 3)))
        out = _nhwc(
            crop_and_resize(
                probe, generator=generator, min_scale=augment.crop_min_scale, flip_p=augment.flip_p
            )
        )
        rows.extend(crop_parameters(image[..., :2], 32) for image in out)
    return np.array(rows, dtype=np.int64)


def _only(augment: ViewAugment, **kept: float) -> ViewAugment:
    """The augmentation with an identity crop, no flip, grey or blur, and only ``kept`` jitter."""
    off = dict.fromkeys(("brightness", "contrast", "saturation", "hue"), 0.0)
    return dataclasses.replace(
        augment, crop_min_scale=1.0, flip_p=0.0, grayscale_p=0.0, blur_p=0.0, **{**off, **kept}
    )


def our_colour_draws(generator: torch.Generator) -> dict[str, np.ndarray]:
    """The recipe's jitter parameters and grey decisions, read back from probes as the trace
    reads the released ones."""
    augment = recipe_augment()
    n = N_OURS
    single = functools.partial(torch.full, (n, 3, 1, 1))
    brightness = _only(augment, brightness=augment.brightness)(single(0.0), generator)[:, 0, 0, 0]
    contrast_probe = torch.tensor([[0.0, 1.0], [0.0, 1.0]]).expand(n, 3, 2, 2)
    out = _only(augment, contrast=augment.contrast)(contrast_probe, generator)
    contrast = out[:, 0, 0, 1] - out[:, 0, 0, 0]
    saturation_probe = torch.tensor([1.0, 0.75, 0.5]).view(1, 3, 1, 1).expand(n, 3, 1, 1)
    out = _only(augment, saturation=augment.saturation)(saturation_probe, generator)
    saturation = 2.0 * (1.0 - out[:, 2, 0, 0])  # S = 0.5 f on a pixel of V = 1
    red = torch.tensor([1.0, 0.0, 0.0]).view(1, 3, 1, 1).expand(n, 3, 1, 1).contiguous()
    out = _only(augment, hue=augment.hue)(red, generator)[:, :, 0, 0].numpy()
    hue = np.array([_signed_hue(pixel) for pixel in out])
    grey = dataclasses.replace(_only(augment), grayscale_p=augment.grayscale_p)(red, generator)
    return {
        "brightness": brightness.numpy(),
        "contrast": contrast.numpy(),
        "saturation": saturation.numpy(),
        "hue": hue,
        "gray": (grey.amax(dim=1) - grey.amin(dim=1)).flatten() == 0,
    }


def _signed_hue(pixel: np.ndarray) -> float:
    import colorsys

    hue = colorsys.rgb_to_hsv(*(float(v) for v in pixel))[0]
    return hue if hue < 0.5 else hue - 1.0


PERMUTATIONS = list(itertools.permutations(range(4)))


def _permutation_index(orders: np.ndarray) -> np.ndarray:
    return np.array([PERMUTATIONS.index(tuple(int(v) for v in row)) for row in orders])


def our_stream_orders() -> np.ndarray:
    """``(N_OURS, 4)``: the jitter order of view streams 1 and 2 over ``N_OURS / 2`` runs."""
    augment = recipe_augment()
    orders = [
        dataclasses.replace(augment, order_seed=seed).stream_orders(2).numpy()
        for seed in range(N_OURS // 2)
    ]
    return np.concatenate(orders)


def _draw_differences(trace: dict[str, np.ndarray]) -> list[Difference]:
    generator = torch.Generator().manual_seed(OUR_SEED)
    crops = our_crop_draws(generator)
    colours = our_colour_draws(generator)
    released_crop, released_jitter = trace["crop"].astype(np.int64), trace["jitter"]
    tests = [
        discrete("crop side", released_crop[:, 0], crops[:, 0]),
        discrete("crop top offset", released_crop[:, 1], crops[:, 1]),
        discrete("crop left offset", released_crop[:, 2], crops[:, 2]),
        discrete("horizontal flip", trace["flip"], crops[:, 3].astype(bool)),
        continuous("brightness delta", released_jitter[:, 0], colours["brightness"]),
        continuous("contrast factor", released_jitter[:, 1], colours["contrast"]),
        continuous("saturation factor", released_jitter[:, 2], colours["saturation"]),
        continuous("hue delta", released_jitter[:, 3], colours["hue"]),
        discrete("grayscale", trace["gray"], colours["gray"]),
        discrete(
            "jitter order (one of 24)",
            _permutation_index(trace["jitter_order"]),
            _permutation_index(our_stream_orders()),
        ),
    ]
    return as_differences(FAMILY, tests)


class RecordingDraws(GeneratorDraws):
    """The run's draws, each remembered (shape and numbers) in the order they were made."""

    def __init__(self, generator: torch.Generator) -> None:
        super().__init__(generator)
        self.made: list[torch.Tensor] = []

    def rand(self, *shape: int) -> torch.Tensor:
        numbers = super().rand(*shape)
        self.made.append(numbers)
        return numbers


def orders_used(
    augment: ViewAugment, images: torch.Tensor, streams: int, seed: int
) -> list[set[int]]:
    """For each image, the jitter orders (indices into :data:`PERMUTATIONS`) that reproduce
    its view: the view made with an identity crop, no flip, grey or blur, and the jitter
    re-applied in each of the 24 orders with the uniforms the view drew (the last ``(n, 4)``
    draw before grey's ``(n,)``)."""
    augment = dataclasses.replace(
        augment, crop_min_scale=1.0, flip_p=0.0, grayscale_p=0.0, blur_p=0.0
    )
    draws = RecordingDraws(torch.Generator().manual_seed(seed))
    views = augment(images, draws, streams=streams)
    n = len(images)
    uniforms = [d for d in draws.made if tuple(d.shape) == (n, 4)][-1]
    x = images.float() / 255.0
    used = []
    for i in range(n):
        candidates = torch.stack(
            [
                released_color_jitter(
                    x[i : i + 1], order=torch.tensor([order]), uniforms=uniforms[i : i + 1]
                )[0]
                for order in PERMUTATIONS
            ]
        )
        error = (candidates - views[i]).flatten(1).abs().amax(1)
        used.append({int(k) for k in torch.nonzero(error <= 1e-5).flatten()})
    return used


def _stream_differences(trace: dict[str, np.ndarray]) -> list[Difference]:
    """One jitter order per view stream for the whole run, on both sides."""
    augment = recipe_augment()
    released_asked = len(trace["da/jitter_orders_asked"])
    images = torch.from_numpy(
        np.random.default_rng(1).integers(0, 256, (2 * 12, 3, 4, 4), dtype=np.uint8)
    )
    extra = 0
    for seed in (0, 1, 2):  # three steps of one run: the same order each step
        used = orders_used(augment, images, streams=2, seed=seed)
        for stream in range(2):
            sets = used[stream * 12 : (stream + 1) * 12]
            common = set.intersection(*sets)
            expected = PERMUTATIONS.index(tuple(augment.stream_orders(2)[stream].tolist()))
            extra += 0 if expected in common else len(set.union(*sets))
    return [
        Difference(
            FAMILY,
            "jitter orders per view stream and run",
            abs(released_asked - 2) + extra,
            0.0,
            f"released: ColorJitter asked {released_asked} times for 2 streams over 3 epochs; "
            "ours: orders other than the stream's that its images were jittered in",
            "the released pipeline shuffles the order once per view stream when tf.data "
            "traces it (augment_ops.py: random.shuffle in _get_transforms): one order per "
            "stream for every image and step",
        )
    ]


def _repeats(ids: np.ndarray) -> int:
    """Instances seen more than once within an epoch, over ``(epochs, instances)`` ids."""
    return sum(len(epoch) - len(np.unique(epoch)) for epoch in ids)


def _equal_views(first: np.ndarray, second: np.ndarray) -> int:
    """Instances whose two views are identical."""
    return int((np.abs(first - second).reshape(len(first), -1).max(1) == 0).sum())


def _our_epochs(run: Any, state: Any, epochs: int) -> tuple[np.ndarray, int]:
    """Our run's instance ids per epoch and the equal view pairs of each epoch's first batch."""
    data = run.data
    orders, equal = [], 0
    for _ in range(epochs):
        order = run.order.draw(state.shuffle_generator)[: data.steps_per_epoch * data.per_step]
        orders.append(order.numpy())
        batch = data.images[order[: data.per_step]]
        views = contrastive_inputs(
            batch, generator=state.augment_generator, augment=recipe_augment()
        )
        equal += _equal_views(*(view.numpy() for view in views.chunk(2)))
    return np.stack(orders), equal


def _figure_sets_difference(trace: dict[str, np.ndarray]) -> Difference:
    """The distribution sets of the paper's figure (config/studies/distribution_sets.yaml)
    against the released ``geotrans_array_deterministic``: the first ``1 + m`` transforms."""
    variants = yaml.safe_load(DISTRIBUTION_SETS.read_text())["variants"]
    images = _nchw(trace["da/images"])
    released = trace["da/geotrans8"]
    largest = 0.0
    for variant in variants.values():
        distributions = variant["train"]["distributions"]
        ours = _nhwc(distribution_copies(images, distributions).images)
        wanted = released[: len(ours)]
        same = ours.shape == wanted.shape
        largest = max(
            largest, float(np.abs(ours.astype(np.int16) - wanted).max()) if same else np.inf
        )
    return Difference(
        FAMILY,
        "distribution sets of the paper's figure (pixels)",
        largest,
        0.0,
        f"grey levels over the {len(variants)} sets of config/studies/distribution_sets.yaml",
        "geotrans_array_deterministic: original, hflip, rot90, rot90 + hflip, rot180, ...; "
        "each copy a pixel permutation",
    )


def _batch_differences(trace: dict[str, np.ndarray]) -> list[Difference]:
    records = [_figure_sets_difference(trace)]
    for name, method in (("da", "contrastive_da"), ("plain", "contrastive")):
        label = "contrastive DA" if name == "da" else "plain contrastive"
        ids = trace[f"{name}/batch_ids"].astype(np.int64)  # (epochs, steps, batch)
        released_expanded = trace[f"{name}/expanded"]
        settings = TrainSettings(method=method, epochs=3, batch_size=32, width=16)
        run, state = prepare_run(settings, trace[f"{name}/images"], seed=1)
        data = run.data
        expanded = _nhwc(data.images)
        same_shape = expanded.shape == released_expanded.shape
        records.append(
            Difference(
                FAMILY,
                f"{label}: the training instances (the expanded set, pixels)",
                float(np.abs(expanded.astype(np.int16) - released_expanded).max())
                if same_shape
                else float("inf"),
                0.0,
                f"grey levels; instances: released {len(released_expanded)}, ours {len(expanded)}",
                "data/cifar.py expands the set once, transform-major (identity, rot90, rot180, "
                "rot270: np.rot90 on (h, w)); plain contrastive: the identity expansion",
            )
        )
        steps, batch = ids.shape[1], ids.shape[2]
        records.append(
            Difference(
                FAMILY,
                f"{label}: instances per step and steps per epoch",
                abs(data.per_step - batch) + abs(data.steps_per_epoch - steps),
                0.0,
                f"released {batch} x {steps}, ours {data.per_step} x {data.steps_per_epoch}",
                "batches of 32 instances of the expanded set, the last partial batch dropped",
            )
        )
        ours, ours_equal = _our_epochs(run, state, len(ids))
        repeats = _repeats(ids.reshape(len(ids), -1))
        released_equal = _equal_views(*trace[f"{name}/first_views"])
        records.append(
            Difference(
                FAMILY,
                f"{label}: repeated instances in an epoch, equal view pairs",
                repeats + _repeats(ours) + ours_equal + released_equal,
                0.0,
                f"count: released {repeats} repeats and {released_equal} equal view pairs; "
                f"ours {_repeats(ours)} and {ours_equal}",
                "each epoch visits every instance at most once; each instance gets two "
                "independent augmentation chains",
            )
        )
    return records


def compare(
    traces: dict[str, dict[str, np.ndarray]], metas: dict[str, dict[str, Any]]
) -> list[Difference]:
    """``traces`` and ``metas`` by trace name: ``augment_ops``, ``augment_draws``,
    ``augment_batches``."""
    del metas
    return [
        *_op_differences(traces["augment_ops"]),
        *_draw_differences(traces["augment_draws"]),
        *_stream_differences(traces["augment_batches"]),
        *_batch_differences(traces["augment_batches"]),
    ]


def differences(folder: Path) -> list[Difference]:
    """:func:`compare` on the ``augment_ops``, ``augment_draws`` and ``augment_batches``
    traces in ``folder``."""
    loaded = {name: read_trace(folder, name) for name in TRACES}
    return compare(
        {name: arrays for name, (arrays, _) in loaded.items()},
        {name: meta for name, (_, meta) in loaded.items()},
    )
