"""The rotation classifier as a detector: its one-class scores.

A model trained by rotation prediction (:mod:`pipeline_lib.ssl.tasks.rotation`: RotNet and
``rotation``) scores an image with its classifier on the four rotations of the
un-augmented image (:func:`rotation_scores`), in four forms
(:func:`scores_from_rotation_logits`; docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F

from pipeline_lib.models.proxy import ProxyModel, rotation_logits
from pipeline_lib.ssl.augment import rotate90, to_unit_float

#: The rotation classifier's scores (higher = more normal), by their feature-file names;
#: :data:`pipeline_lib.registry.ROTATION_DETECTORS` maps the detector ids onto them.
ROTATION_SCORE_NAMES: tuple[str, ...] = (
    "sum_p_rotations",
    "log_p_rotations",
    "p_rot0",
    "released_rotations",
)


def rotation_view_logits(model: ProxyModel, x: torch.Tensor) -> torch.Tensor:
    """Logits of the rotation classifier on the four rotated copies of a batch.

    Parameters
    ----------
    model : ProxyModel
        A model with a rotation classifier, already in inference mode on ``x``'s device.
    x : Tensor of shape (n, 3, h, w)
        Square images in [0, 1].

    Returns
    -------
    Tensor of shape (4, n, 4)
        ``[k, i, y]``: the logit of class ``y`` for ``rot_k(x_i)``, in the model's dtype.
    """
    return torch.stack([rotation_logits(model, rotate90(x, k)) for k in range(4)])


def scores_from_rotation_logits(logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """The rotation classifier's four one-class scores: the one definition of each.

    Every image-level detector (:func:`rotation_scores`), the per-patch maps of MVTec AD
    (:func:`pipeline_lib.mvtec.patches.rotation_anomaly_patches`) and the explanations
    (:func:`pipeline_lib.explain.rotation_anomaly_function`) call this, so they
    cannot drift apart. None is negated here (the sign flip lives in
    :mod:`pipeline_lib.detection.evaluate`).

    Parameters
    ----------
    logits : Tensor of shape (4, n, 4)
        :func:`rotation_view_logits`.

    Returns
    -------
    dict of str to Tensor of shape (n,)
        From one float64 ``log_softmax`` of the four views,
        ``d_k = log p(y = k | rot_k(x))``:

        ``"sum_p_rotations"`` (float64)
            ``sum_k p(y = k | rot_k(x))``, the paper's Table 1 score (the
            ``rotation_classifier`` detector).
        ``"log_p_rotations"`` (float64)
            ``sum_k d_k``, Golan et al.'s score (``rotation_log_p``).
        ``"p_rot0"`` (float64)
            ``p(y = 0 | x)`` (``rotation_p0``).
        ``"released_rotations"`` (float32)
            The released code's score (``util/train.py``, ``extract``: ``dscore = exp(sum_k
            log softmax(logits_k)[k])``, all in float32; its AUC ranks ``1 - dscore``),
            as a normality score ``-(1 - dscore)``, computed in float32 as there: images
            whose float32 ``1 - dscore`` rounds to the same value tie, e.g. every image with
            ``softmax = 1`` on all four views, or with ``dscore`` below 2^-25
            (``rotation_released``).

    Raises
    ------
    ValueError
        If ``logits`` is not of shape (4, n, 4).
    """
    if logits.ndim != 3 or logits.shape[0] != 4 or logits.shape[2] != 4:
        raise ValueError(f"need rotation logits of shape (4, n, 4), got {tuple(logits.shape)}")
    views = torch.arange(4, device=logits.device)
    # (4, n, 4) -> (4, n): entry [k, i] is the class-k column of view k.
    log_p = F.log_softmax(logits.double(), dim=2)[views, :, views]
    probs32 = F.softmax(logits.float(), dim=2)[views, :, views]
    # The released order: log of the float32 probabilities, summed view by view, exp, 1 - .
    log_sum32 = torch.log(probs32[0])
    for k in range(1, 4):
        log_sum32 = log_sum32 + torch.log(probs32[k])
    released = -(1.0 - torch.exp(log_sum32))
    return {
        "sum_p_rotations": log_p.exp().sum(dim=0),
        "log_p_rotations": log_p.sum(dim=0),
        "p_rot0": log_p[0].exp(),
        "released_rotations": released,
    }


def _view_logits_in_batches(
    model: ProxyModel, images: np.ndarray, *, device: torch.device | str, batch_size: int
) -> Iterator[torch.Tensor]:
    """:func:`rotation_view_logits` of ``images`` (uint8 ``(n, h, w, 3)``), batch by batch.

    The model is put in inference mode on ``device``; the batches run under
    ``torch.inference_mode``. Raises ValueError on a non-uint8 / wrongly shaped input.
    """
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"images must be uint8 of shape (n, h, w, 3), got {images.dtype} {images.shape}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = torch.device(device)
    model = model.to(device).eval()
    with torch.inference_mode():
        for start in range(0, len(images), batch_size):
            chunk = torch.from_numpy(np.ascontiguousarray(images[start : start + batch_size]))
            x = to_unit_float(chunk.to(device).permute(0, 3, 1, 2))
            yield rotation_view_logits(model, x)


def rotation_scores(
    model: ProxyModel,
    images: np.ndarray | torch.Tensor,
    *,
    device: torch.device | str = "cpu",
    batch_size: int = 256,
) -> dict[str, np.ndarray]:
    """RotNet's built-in one-class scores from the rotation classifier (higher = more normal).

    Parameters
    ----------
    model : ProxyModel
        A ``rotnet`` or ``rotation`` model; put in inference mode here.
    images : ndarray of shape (n, h, w, 3), uint8
        Square images (no augmentation is applied).
    device : torch.device or str, default="cpu"
    batch_size : int, default=256

    Returns
    -------
    dict of str to ndarray of shape (n,)
        The four scores of :func:`scores_from_rotation_logits`, by name
        (:data:`ROTATION_SCORE_NAMES`): float64, ``"released_rotations"`` float32.

    Raises
    ------
    ValueError
        On a non-uint8 / wrongly shaped input or a model without rotation classifier.
    """
    if isinstance(images, torch.Tensor):
        images = images.cpu().numpy()
    parts: dict[str, list[np.ndarray]] = {name: [] for name in ROTATION_SCORE_NAMES}
    for logits in _view_logits_in_batches(model, images, device=device, batch_size=batch_size):
        for name, values in scores_from_rotation_logits(logits).items():
            parts[name].append(values.cpu().numpy())
    return {name: np.concatenate(values) for name, values in parts.items()}


def rotation_logits_of_images(
    model: ProxyModel,
    images: np.ndarray,
    *,
    device: torch.device | str = "cpu",
    batch_size: int = 256,
) -> np.ndarray:
    """The rotation classifier's raw logits on the four rotations of every image.

    What every rotation score is computed from (``p(0 | x)``, sums of ``p`` or ``log p``
    over the rotations, the released code's product): kept so that scores can be recomputed
    and compared offline without the model (``benchmarks/fullcell_detectors.py``).

    Parameters
    ----------
    model : ProxyModel
        A ``rotnet`` or ``rotation`` model; put in inference mode here.
    images : ndarray of shape (n, h, w, 3), uint8
    device : torch.device or str, default="cpu"
    batch_size : int, default=256

    Returns
    -------
    ndarray of shape (n, 4, 4), float32
        ``[i, k, y]``: logit of class ``y`` for image ``i`` rotated by ``k`` quarter turns
        (:func:`rotation_view_logits` with the first two axes swapped).

    Raises
    ------
    ValueError
        On a non-uint8 / wrongly shaped input or a model without rotation classifier.
    """
    chunks = []
    for logits in _view_logits_in_batches(model, images, device=device, batch_size=batch_size):
        views = logits.float()  # (4 rotations, b, 4)
        chunks.append(views.permute(1, 0, 2).cpu().numpy())
    return np.concatenate(chunks)
