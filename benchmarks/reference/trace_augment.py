"""Trace the released view augmentation ``cnr0.5+hflip+jitter_b0.4_c0.4_s0.4_h0.4+gray0.2+blur0.5``.

Three traces:

``augment_ops``
    Each operation on fixed images with fixed parameters. The colour operations are the TF
    functions the released random ones call with their drawn parameter
    (``random_brightness`` -> ``tf.image.adjust_brightness(x, delta)``, ``random_contrast``
    -> ``adjust_contrast``, ``random_saturation`` -> ``adjust_saturation``, ``random_hue`` ->
    ``adjust_hue``), on images in [0, 1] and on the same images stretched to [-0.25, 1.25]
    (values an unclipped earlier jitter operation leaves). Grey, blur and the rotations of
    rotation prediction are the released ``RandomGrayScale(prob=1)``, ``RandomBlur``
    (training) and ``Rotate90``, ``Rotate180``, ``Rotate270``. The crop is the released
    ``RandomCropAndResize(32, 0.5)`` followed by ``RandomFlipLeftRight``, run on images with
    two more channels holding each pixel's row and column, from which the drawn side, offsets
    and flip are read back exactly.
``augment_draws``
    ``N_DRAWS`` draws of every parameter each released sampler draws, read back from probe
    images: crop side and offsets, flip, the four jitter parameters (the partials of
    ``ColorJitter._get_transforms()``, whose list order is the jitter order: one
    ``random.shuffle`` per call) and grey.
``augment_batches``
    The released contrastive DA training loader (``load_dataset(distaug_type='rot')``, batch
    32, the two-view ``--aug_list`` of ``script/run_contrastive_da.sh``) and the plain
    contrastive one (``distaug_type=1``, the flag's default, the identity expansion) on small
    images: the instance ids of every batch, the expanded training set, the two views of the
    first batch and how often the loader asked ``ColorJitter`` for an order; and
    ``geotrans_array_deterministic(images, 8)``, the distribution sets of the paper's figure.
"""

from __future__ import annotations

import colorsys
import random
from pathlib import Path
from typing import Any

import numpy as np
from inputs import colour_images, coordinates, crop_parameters
from trace_io import released_meta, write_trace
from trace_order import released_train_loader

AUG_LIST = "cnr0.5+hflip+jitter_b0.4_c0.4_s0.4_h0.4+gray0.2+blur0.5"
N_DRAWS = 10000
SEED = 1
#: Fixed parameters of the colour operations (the released ranges' ends and inner points).
BRIGHTNESS = (-0.4, -0.173, 0.25, 0.4)
CONTRAST = (0.6, 0.87, 1.13, 1.4)
SATURATION = (0.6, 0.91, 1.22, 1.4)
HUE = (-0.4, -0.21, 0.05, 0.4)
N_CROPS = 8
JITTER_NAMES = ("random_brightness", "random_contrast", "random_saturation", "random_hue")


def _ops(released: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
    tf = released.tf
    ops = released.module("data.augment_ops")
    images = colour_images(rng)
    x = tf.constant(images)
    arrays: dict[str, np.ndarray] = {"colour_images": images}
    for name, function, values in (
        ("brightness", tf.image.adjust_brightness, BRIGHTNESS),
        ("contrast", tf.image.adjust_contrast, CONTRAST),
        ("saturation", tf.image.adjust_saturation, SATURATION),
        ("hue", tf.image.adjust_hue, HUE),
    ):
        outputs = [np.stack([function(image, value).numpy() for image in x]) for value in values]
        arrays[name] = np.stack(outputs)
        arrays[f"{name}_values"] = np.array(values, np.float32)
    gray = ops.RandomGrayScale(prob=1.0)
    arrays["gray"] = np.stack([gray(image).numpy() for image in x])
    for k, rotate in ((1, ops.Rotate90()), (2, ops.Rotate180()), (3, ops.Rotate270())):
        arrays[f"rotate{90 * k}"] = np.stack([rotate(image).numpy() for image in x])
    blur = ops.RandomBlur(prob=0.5)
    arrays["blur_training"] = np.stack([blur(image, is_training=True).numpy() for image in x])
    # Crop and flip: the released objects on [image | row | column] stacks of two images.
    crop_images = rng.integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    crop, flip = ops.RandomCropAndResize(size=32, min_scale=0.5), ops.RandomFlipLeftRight()
    outputs, parameters = [], []
    stacks = [
        np.concatenate([image / np.float32(255.0), coordinates(32)], -1) for image in crop_images
    ]
    while len(outputs) < N_CROPS:  # distinct sides, both ends of the range (16, 32) included
        index = len(outputs) % 2
        out = flip(crop(tf.constant(stacks[index].astype(np.float32)))).numpy()
        side, top, left, flipped = crop_parameters(out[..., 3:], 32)
        sides = {p[1] for p in parameters}
        inner = sum(p[1] not in (16, 32) for p in parameters)
        if side in sides or (side not in (16, 32) and inner == N_CROPS - 2):
            continue
        outputs.append(out[..., :3])
        parameters.append((index, side, top, left, int(flipped)))
    arrays["crop_images"] = crop_images
    arrays["crop_outputs"] = np.stack(outputs).astype(np.float32)
    arrays["crop_parameters"] = np.array(parameters, np.int64)  # image, side, top, left, flip
    return arrays


def _hue_of(pixel: np.ndarray) -> float:
    return colorsys.rgb_to_hsv(*(float(v) for v in pixel))[0]


def _draws(released: Any) -> dict[str, np.ndarray]:
    tf = released.tf
    ops = released.module("data.augment_ops")
    ramps = tf.constant(np.concatenate([coordinates(32), np.zeros((32, 32, 1), np.float32)], -1))
    crop, flip = ops.RandomCropAndResize(size=32, min_scale=0.5), ops.RandomFlipLeftRight()
    gray = ops.RandomGrayScale(prob=0.2)
    jitter = ops.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.4)
    probes = {  # each jitter parameter read back from a probe image (see augment_draws)
        "random_brightness": tf.zeros((1, 1, 3)),
        "random_contrast": tf.constant([[[0.0] * 3], [[1.0] * 3]]),
        "random_saturation": tf.constant([[[1.0, 0.75, 0.5]]]),
        "random_hue": tf.constant([[[1.0, 0.0, 0.0]]]),
    }
    by_name = {t.func.__name__: t for t in jitter._get_transforms()}
    red = tf.constant([[[1.0, 0.0, 0.0]]])

    @tf.function
    def draw_once() -> tuple[Any, ...]:
        return (
            crop(ramps),
            flip(ramps),
            *(by_name[name](probes[name]) for name in JITTER_NAMES),
            gray(red),
        )

    crops, flips, jitters, grays = [], [], [], []
    for _ in range(N_DRAWS):
        out = [o.numpy() for o in draw_once()]
        side, top, left, _ = crop_parameters(out[0][..., :2], 32)
        crops.append((side, top, left))
        flips.append(out[1][0, 0, 1] > out[1][0, -1, 1])
        brightness = out[2][0, 0, 0]
        contrast = out[3][1, 0, 0] - out[3][0, 0, 0]
        saturation = 2.0 * (1.0 - out[4][0, 0, 2])  # S = 0.5 f on a pixel of V = 1
        hue = _hue_of(out[5][0, 0])
        jitters.append((brightness, contrast, saturation, hue if hue < 0.5 else hue - 1.0))
        grays.append(np.ptp(out[6]) == 0)
    orders = [
        [JITTER_NAMES.index(t.func.__name__) for t in jitter._get_transforms()]
        for _ in range(N_DRAWS)
    ]
    return {
        "crop": np.array(crops, np.int8),
        "flip": np.array(flips),
        "jitter": np.array(jitters, np.float32),
        "gray": np.array(grays),
        "jitter_order": np.array(orders, np.int8),
    }


def _batches(released: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
    ops = released.module("data.augment_ops")
    cifar = released.module("data.cifar")
    asked = []
    get_transforms = ops.ColorJitter._get_transforms

    def recording(self: Any) -> list:
        transforms = get_transforms(self)
        asked.append([JITTER_NAMES.index(t.func.__name__) for t in transforms])
        return transforms

    ops.ColorJitter._get_transforms = recording
    arrays = {}
    try:
        for name, n, distaug in (("da", 20, "rot"), ("plain", 40, 1)):
            images = rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)
            asked.clear()
            dataset, steps = released_train_loader(
                released,
                images,
                aug_list=[AUG_LIST, "+"],
                batch_size=32,
                distaug_type=distaug,
                seed=SEED,
            )
            iterator = iter(dataset)
            ids, first = [], None
            for _ in range(3 * steps):
                batch = next(iterator)
                ids.append(np.asarray(batch[-1]).ravel())
                if first is None:
                    first = [np.asarray(view) for view in batch[:2]]
            expanded = cifar.rotate_array_deterministic(images) if distaug == "rot" else images
            if distaug == "rot":  # the figure's sets: original, hflip, rot90, rot90 + hflip, ...
                arrays["da/geotrans8"] = cifar.geotrans_array_deterministic(images, 8)
            arrays.update(
                {
                    f"{name}/images": images,
                    f"{name}/expanded": expanded,
                    f"{name}/batch_ids": np.stack(ids).reshape(3, steps, -1).astype(np.int16),
                    f"{name}/first_views": np.stack(first).astype(np.float32),
                    f"{name}/jitter_orders_asked": np.array(asked, np.int8),
                }
            )
    finally:
        ops.ColorJitter._get_transforms = get_transforms
    return arrays


DRAWS_WHAT = (
    "released sampler draws read back from probes: crop (side, top, left), flip, jitter "
    "(brightness delta, contrast factor, saturation factor, hue delta), gray, jitter order "
    "(operation indices, in jitter_names order, of each ColorJitter._get_transforms() call)"
)
BATCHES_WHAT = (
    "released training loaders, contrastive DA (distaug_type rot, 20 images) and plain "
    "contrastive (distaug_type 1, 40 images): each step's instance ids over 3 epochs, the "
    "expanded training set, the first batch's two views, and the jitter order of every "
    "ColorJitter._get_transforms() call the loader made"
)


def trace(released: Any, out: Path) -> list[Path]:
    tf = released.tf
    meta = {"family": "augment", "seed": SEED, "aug_list": AUG_LIST}
    ops_what = __doc__.split("``augment_ops``")[1].split("``augment_draws``")[0]
    random.seed(SEED)
    tf.random.set_seed(SEED)
    rng = np.random.default_rng(SEED)
    written = [
        write_trace(
            out,
            "augment_ops",
            _ops(released, rng),
            released_meta(released, **meta, what=" ".join(ops_what.split())),
        )
    ]
    random.seed(SEED)
    tf.random.set_seed(SEED)
    names = list(JITTER_NAMES)
    draws_meta = released_meta(
        released, **meta, n_draws=N_DRAWS, jitter_names=names, what=DRAWS_WHAT
    )
    written.append(write_trace(out, "augment_draws", _draws(released), draws_meta))
    batches_meta = released_meta(
        released, **meta, batch_size=32, epochs=3, jitter_names=names, what=BATCHES_WHAT
    )
    written.append(write_trace(out, "augment_batches", _batches(released, rng), batches_meta))
    return written
