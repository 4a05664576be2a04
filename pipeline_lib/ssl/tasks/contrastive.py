"""Contrastive learning, plain and distribution-augmented (paper Sec. 3.2, Eq. 2): the task
of ``contrastive`` and ``contrastive_da``.

Three loss forms (``form``), all on ``phi = normalize(g(f(.)))`` and temperature ``tau``,
for a batch of ``M`` instances with views ``z1 = phi(A(x))`` and ``z2 = phi(A'(x))``:

``"released"`` (default; the recipe)
    Cross-entropy of the ``M x M`` logits ``z1 z2^T / tau`` with the diagonal as target,
    one direction (view-1 anchors), as the released ``contrastive.py``: for anchor ``z1[a]``
    the positive is ``z2[a]`` and the negatives are the *other view* of the other ``M - 1``
    instances, ``z2[i], i != a``. This is Eq. 2 read with the sentence after it ("different
    instances (A(x), A'(x')) to be unlike") and with Sohn (2016)'s N-pair loss, whose
    negatives are the other pairs' positives.
``"same_view"`` (a variant)
    Eq. 2 read with same-view negatives ``z1[i], i != a``: ``-log exp(z1[a].z2[a]/tau) /
    (exp(z1[a].z2[a]/tau) + sum_{i != a} exp(z1[a].z1[i]/tau))``, symmetrised: the mean of
    this term over all anchors of view 1 and the mirror term over all anchors of view 2
    (anchor ``z2[a]``, positive ``z1[a]``, negatives ``z2[i]``). Each anchor has exactly
    ``M - 1`` negatives. (The value ``paper`` is refused with this name: see
    :data:`RENAMED_LOSS_FORMS`.)
``"ntxent"`` (a variant)
    SimCLR's symmetric NT-Xent over the ``2M`` views: every view is an anchor, its partner
    view is the positive and all other ``2M - 2`` views are negatives.

With distribution augmentation (``distributions``) every transformed copy ``t(x)`` of a
batch image is its own instance (``M = n (1 + T)``); both of its views are augmentations of
that same copy, and the other copies of the same image are negatives like any other
instance.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from pipeline_lib.registry import LOSS_FORMS, RENAMED_TRAIN_VALUES
from pipeline_lib.ssl.augment import ViewAugment, distribution_copies, two_views
from pipeline_lib.ssl.draws import Draws
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks.base import ProxyTask, StepParts, at_least_float32

__all__ = [
    "TASK",
    "contrastive_inputs",
    "contrastive_loss",
    "contrastive_outputs_loss",
    "cross_view_contrastive_loss",
    "nt_xent_loss",
    "projection",
    "same_view_contrastive_loss",
]

#: Former names of loss forms -> the form that computes the same loss.
RENAMED_LOSS_FORMS: dict[str, str] = RENAMED_TRAIN_VALUES["loss_form"]


def _check(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> None:
    if z1.ndim != 2 or z1.shape != z2.shape:
        raise ValueError(f"z1 and z2 must both be (M, d), got {tuple(z1.shape)}, {tuple(z2.shape)}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")


def same_view_contrastive_loss(
    z1: torch.Tensor, z2: torch.Tensor, *, temperature: float = 0.2
) -> torch.Tensor:
    """Eq. 2 with same-view negatives, symmetrised over the two views (module docstring).

    Parameters
    ----------
    z1, z2 : Tensor of shape (M, d)
        Head outputs of the two views of ``M`` instances (normalised here).
    temperature : float, default=0.2

    Returns
    -------
    Tensor
        Scalar float32 loss.
    """
    _check(z1, z2, temperature)
    z1, z2 = F.normalize(at_least_float32(z1), dim=1), F.normalize(at_least_float32(z2), dim=1)
    targets = torch.arange(len(z1), device=z1.device)
    eye = torch.eye(len(z1), dtype=torch.bool, device=z1.device)
    losses = []
    for anchor, partner in ((z1, z2), (z2, z1)):
        positive = (anchor * partner).sum(1)  # (M,)
        logits = torch.where(eye, torch.diag_embed(positive), anchor @ anchor.T) / temperature
        losses.append(F.cross_entropy(logits, targets))
    return 0.5 * (losses[0] + losses[1])


def cross_view_contrastive_loss(
    z1: torch.Tensor, z2: torch.Tensor, *, temperature: float = 0.2
) -> torch.Tensor:
    """One-directional cross-view loss ``CE(z1 z2^T / tau, diagonal)``; scalar float32.

    The released code's form (the recipe). With all ``2M`` embeddings collinear every logit
    is equal and it is ``log(M)``.
    """
    _check(z1, z2, temperature)
    z1, z2 = F.normalize(at_least_float32(z1), dim=1), F.normalize(at_least_float32(z2), dim=1)
    logits = z1 @ z2.T / temperature  # (M, M)
    return F.cross_entropy(logits, torch.arange(len(z1), device=z1.device))


def nt_xent_loss(z1: torch.Tensor, z2: torch.Tensor, *, temperature: float = 0.2) -> torch.Tensor:
    """SimCLR's symmetric NT-Xent over ``2M`` views; scalar float32.

    With all ``2M`` embeddings collinear it equals ``log(2M - 1)``.
    """
    _check(z1, z2, temperature)
    m = len(z1)
    z = F.normalize(at_least_float32(torch.cat([z1, z2])), dim=1)  # (2M, d)
    eye = torch.eye(2 * m, dtype=torch.bool, device=z.device)
    logits = (z @ z.T / temperature).masked_fill(eye, float("-inf"))
    targets = torch.cat([torch.arange(m, 2 * m, device=z.device), torch.arange(m, device=z.device)])
    return F.cross_entropy(logits, targets)


_LOSSES = {
    "released": cross_view_contrastive_loss,
    "same_view": same_view_contrastive_loss,
    "ntxent": nt_xent_loss,
}


def contrastive_loss(
    z1: torch.Tensor, z2: torch.Tensor, *, temperature: float = 0.2, form: str = LOSS_FORMS[0]
) -> torch.Tensor:
    """Dispatch to the loss ``form`` (one of :data:`LOSS_FORMS`).

    Raises
    ------
    ValueError
        On an unknown form (a former name is named with its replacement).
    """
    if form in RENAMED_LOSS_FORMS:
        raise ValueError(
            f"contrastive loss form {form!r} was renamed {RENAMED_LOSS_FORMS[form]!r} (same "
            f"loss); the recipe's form is {LOSS_FORMS[0]!r}"
        )
    if form not in _LOSSES:
        raise ValueError(
            f"unknown contrastive loss form {form!r}; allowed: {', '.join(LOSS_FORMS)}"
        )
    # Similarities in float32 even inside the training loop's autocast region.
    with torch.autocast(device_type=z1.device.type, enabled=False):
        return _LOSSES[form](z1, z2, temperature=temperature)


def contrastive_inputs(
    batch: torch.Tensor,
    *,
    generator: torch.Generator | Draws,
    augment: Callable[..., torch.Tensor],
    distributions: Sequence[str] = (),
) -> torch.Tensor:
    """The network input of one contrastive step: views 1 then views 2, ``(2 M, 3, h, w)``.

    ``distributions``: the distribution-augmentation set (empty for plain contrastive
    learning, and under ``expanded`` batching, whose copies are already instances), e.g.
    ``("rot90", "rot180", "rot270")``: ``M = n (1 + len(distributions))`` instances. One
    forward pass over both views, so BatchNorm statistics cover all ``2 M`` views.
    """
    images = distribution_copies(batch, distributions).images if distributions else batch
    view_1, view_2 = two_views(images, augment, generator)
    return torch.cat([view_1, view_2])


def contrastive_outputs_loss(
    z: torch.Tensor, *, temperature: float = 0.2, form: str = LOSS_FORMS[0]
) -> torch.Tensor:
    """The loss of the head outputs ``z`` of :func:`contrastive_inputs` (scalar float32)."""
    z1, z2 = at_least_float32(z).chunk(2)
    return contrastive_loss(z1, z2, temperature=temperature, form=form)


def projection(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The head output ``g(f(x))`` the loss reads (``model`` may be a stacked network)."""
    return model.head(model.backbone(x))


def _bind(settings: TrainSettings, augment: ViewAugment | None) -> StepParts:
    """Two views of every instance and the loss of their projections.

    With ``expanded`` batching the distribution copies are already instances of the
    training set, so the step makes none; ``per_image`` makes them inside the step.
    """
    distributions = () if settings.expands else tuple(settings.distributions)
    make_views = functools.partial(contrastive_inputs, augment=augment, distributions=distributions)
    loss = functools.partial(
        contrastive_outputs_loss, temperature=settings.temperature, form=settings.loss_form
    )
    return StepParts(
        inputs=lambda batch, generator: (make_views(batch, generator=generator), None),
        forward=projection,
        loss=lambda z, _: loss(z),
    )


TASK = ProxyTask("contrastive learning", _bind)
