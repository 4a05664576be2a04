"""Rotation prediction (Gidaris et al.; RotNet of Golan et al. is the depth-0 head variant).

Training: four independently augmented views of every image, rotated by 0/90/180/270
degrees, and cross-entropy of the 4-way classifier ``proxy(g(f(view)))`` against the rotation.
RotNet's own one-class score (:func:`rotation_scores`) uses that classifier on the
un-augmented image.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from pipeline_lib.models.proxy import ProxyModel, rotation_logits
from pipeline_lib.ssl.augment import rotate90, rotation_views, to_unit_float
from pipeline_lib.ssl.draws import Draws


def rotation_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``(n, 4)`` rotation logits against labels in 0..3 (float32)."""
    if logits.ndim != 2 or logits.shape[1] != 4 or labels.shape != logits.shape[:1]:
        raise ValueError(
            f"need logits (n, 4) and labels (n,), got {tuple(logits.shape)}, {tuple(labels.shape)}"
        )
    return F.cross_entropy(logits.float(), labels)


def rotation_step(
    model: ProxyModel,
    batch: torch.Tensor,
    *,
    generator: torch.Generator | Draws,
    augment: Callable[..., torch.Tensor],
) -> torch.Tensor:
    """One rotation-prediction loss on a uint8 batch ``(n, 3, h, w)`` (``4 n`` views).

    Returns the scalar float32 cross-entropy.
    """
    views, labels = rotation_views(batch, augment, generator)
    return rotation_loss(rotation_logits(model, views), labels)


def rotation_log_likelihoods(
    model: ProxyModel, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-likelihoods of the rotation classifier on a batch: the one definition of the score.

    Both the image-level detector (:func:`rotation_scores`) and the per-patch maps of MVTec
    AD (:func:`pipeline_lib.mvtec.patches.rotation_nll_patches`) call this, so the two cannot
    drift apart; neither negates it here (the sign flip lives in
    :mod:`pipeline_lib.detection.evaluate`).

    Parameters
    ----------
    model : ProxyModel
        A model with a rotation classifier, already in inference mode on ``x``'s device.
    x : Tensor of shape (n, 3, h, w)
        Square images in [0, 1].

    Returns
    -------
    log_p_rot0 : Tensor of shape (n,), float64
        ``log p(y = 0 | x)``.
    log_p_rotations : Tensor of shape (n,), float64
        ``sum_k log p(y = k | rot_k(x))`` over the four rotations (higher = more normal).
    """
    total = torch.zeros(len(x), dtype=torch.float64, device=x.device)
    log_p_rot0 = total
    for k in range(4):
        log_probs = F.log_softmax(rotation_logits(model, rotate90(x, k)).double(), dim=1)
        if k == 0:
            log_p_rot0 = log_probs[:, 0]
        total += log_probs[:, k]
    return log_p_rot0, total


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
    dict of str to ndarray of shape (n,), float64
        ``"p_rot0"``: ``p(y = 0 | x)``, the probability that the un-rotated image is
        un-rotated; ``"log_p_rotations"``: ``sum_k log p(y = k | rot_k(x))`` over the four
        rotations (Golan et al.'s score for this transformation set).

    Raises
    ------
    ValueError
        On a non-uint8 / wrongly shaped input or a model without rotation classifier.
    """
    if isinstance(images, torch.Tensor):
        images = images.cpu().numpy()
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"images must be uint8 of shape (n, h, w, 3), got {images.dtype} {images.shape}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = torch.device(device)
    model = model.to(device).eval()
    p_rot0, log_p = [], []
    with torch.inference_mode():
        for start in range(0, len(images), batch_size):
            chunk = torch.from_numpy(np.ascontiguousarray(images[start : start + batch_size]))
            x = to_unit_float(chunk.to(device).permute(0, 3, 1, 2))
            rot0, total = rotation_log_likelihoods(model, x)
            p_rot0.append(rot0.exp().cpu().numpy())
            log_p.append(total.cpu().numpy())
    return {"p_rot0": np.concatenate(p_rot0), "log_p_rotations": np.concatenate(log_p)}


def rotation_view_logits(
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
        (the view :func:`rotation_log_likelihoods` scores with ``y = k``).

    Raises
    ------
    ValueError
        On a non-uint8 / wrongly shaped input or a model without rotation classifier.
    """
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"images must be uint8 of shape (n, h, w, 3), got {images.dtype} {images.shape}"
        )
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = torch.device(device)
    model = model.to(device).eval()
    chunks = []
    with torch.inference_mode():
        for start in range(0, len(images), batch_size):
            chunk = torch.from_numpy(np.ascontiguousarray(images[start : start + batch_size]))
            x = to_unit_float(chunk.to(device).permute(0, 3, 1, 2))
            views = [rotation_logits(model, rotate90(x, k)).float() for k in range(4)]
            chunks.append(torch.stack(views, dim=1).cpu().numpy())  # (b, 4 rotations, 4)
    return np.concatenate(chunks)
