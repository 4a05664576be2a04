"""Contrastive losses against oracles, and the distribution-augmented instances."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.ssl.augment import distribution_copies, to_unit_float
from pipeline_lib.ssl.settings import TrainSettings
from pipeline_lib.ssl.tasks.contrastive import (
    LOSS_FORMS,
    TASK,
    contrastive_loss,
    cross_view_contrastive_loss,
    nt_xent_loss,
    same_view_contrastive_loss,
)


def _random_pair(m: int = 5, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(m, d, generator=generator), torch.randn(m, d, generator=generator)


def _unit(z: torch.Tensor) -> np.ndarray:
    z = z.double().numpy()
    return z / np.linalg.norm(z, axis=1, keepdims=True)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_nt_xent_of_collinear_embeddings_is_log_2n_minus_1(n: int) -> None:
    scales = torch.arange(1, n + 1, dtype=torch.float32)[:, None]  # positive multiples
    z = scales * torch.tensor([[0.6, -0.8, 0.0]])
    loss = nt_xent_loss(z, 3 * z, temperature=0.2)
    assert loss.item() == pytest.approx(math.log(2 * n - 1), abs=1e-5)


def test_one_sided_forms_of_collinear_embeddings_are_log_n() -> None:
    z = torch.ones(6, 4)
    assert same_view_contrastive_loss(z, z).item() == pytest.approx(math.log(6), abs=1e-5)
    assert cross_view_contrastive_loss(z, z).item() == pytest.approx(math.log(6), abs=1e-5)


@pytest.mark.parametrize("m", [1, 2, 5])
def test_released_form_of_collinear_embeddings_is_log_m_at_any_temperature(m: int) -> None:
    """Every logit of ``z1 z2^T`` equal: the softmax is uniform over the M candidates."""
    scales = torch.arange(1, m + 1, dtype=torch.float32)[:, None]
    z = scales * torch.tensor([[0.0, 0.6, -0.8]])
    for tau in (0.1, 0.2, 1.0):
        loss = contrastive_loss(z, 2 * z, temperature=tau)  # the default form
        assert loss.item() == pytest.approx(math.log(m), abs=1e-5)


def test_released_form_takes_the_other_view_of_other_instances_as_negatives() -> None:
    """z1 = [e1, e2], z2 = [e1, e1]: for anchor z1[0] the negative z2[1] equals the positive.

    Cross-view logits are [[1, 1], [0, 0]] / tau, so both rows are uniform: log 2 at every
    temperature. The same-view form (negatives z1[1], z2[1]) gives a tau-dependent value.
    """
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    z1, z2 = torch.stack([e1, e2]), torch.stack([e1, e1])
    for tau in (0.2, 0.5):
        assert cross_view_contrastive_loss(z1, z2, temperature=tau).item() == pytest.approx(
            math.log(2), abs=1e-6
        )
        same_view = (
            math.log(1 + math.exp(-1 / tau))
            + math.log(2)  # view-1 anchors
            + math.log(2)
            + math.log(1 + math.exp(1 / tau))  # view-2 anchors
        ) / 4
        assert same_view_contrastive_loss(z1, z2, temperature=tau).item() == pytest.approx(
            same_view, rel=1e-6
        )
    # One direction only: swapping the views changes the released loss (logits transposed).
    a, b = _random_pair(4, 3, seed=3)
    assert not math.isclose(
        cross_view_contrastive_loss(a, b).item(), cross_view_contrastive_loss(b, a).item()
    )


def test_same_view_form_matches_a_naive_loop() -> None:
    z1, z2 = _random_pair(5, 3)
    tau = 0.5
    a, b = _unit(z1), _unit(z2)
    terms = []
    for anchor, partner in ((a, b), (b, a)):
        for i in range(len(a)):
            positive = math.exp(anchor[i] @ partner[i] / tau)
            negatives = sum(math.exp(anchor[i] @ anchor[j] / tau) for j in range(len(a)) if j != i)
            terms.append(-math.log(positive / (positive + negatives)))
    expected = sum(terms) / len(terms)
    loss = same_view_contrastive_loss(z1, z2, temperature=tau)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(expected, rel=1e-5)


def test_released_form_matches_a_naive_loop() -> None:
    z1, z2 = _random_pair(4, 6, seed=1)
    a, b = _unit(z1), _unit(z2)
    terms = []
    for i in range(4):
        logits = [a[i] @ b[j] / 0.2 for j in range(4)]
        terms.append(-logits[i] + math.log(sum(math.exp(v) for v in logits)))
    assert cross_view_contrastive_loss(z1, z2).item() == pytest.approx(np.mean(terms), rel=1e-5)


def test_nt_xent_matches_a_naive_loop() -> None:
    z1, z2 = _random_pair(3, 4, seed=2)
    z = np.concatenate([_unit(z1), _unit(z2)])
    terms = []
    for i in range(6):
        partner = (i + 3) % 6
        denominator = sum(math.exp(z[i] @ z[j] / 0.2) for j in range(6) if j != i)
        terms.append(-z[i] @ z[partner] / 0.2 + math.log(denominator))
    assert nt_xent_loss(z1, z2).item() == pytest.approx(np.mean(terms), rel=1e-5)


def test_dispatch_and_unknown_form() -> None:
    z1, z2 = _random_pair()
    assert LOSS_FORMS == ("released", "same_view", "ntxent")  # the first is the default
    assert torch.equal(contrastive_loss(z1, z2), cross_view_contrastive_loss(z1, z2))
    for form, function in (
        ("released", cross_view_contrastive_loss),
        ("same_view", same_view_contrastive_loss),
        ("ntxent", nt_xent_loss),
    ):
        assert torch.equal(contrastive_loss(z1, z2, form=form), function(z1, z2))
    with pytest.raises(ValueError, match="simclr"):
        contrastive_loss(z1, z2, form="simclr")
    with pytest.raises(ValueError, match="'paper' was renamed 'same_view'"):
        contrastive_loss(z1, z2, form="paper")
    with pytest.raises(ValueError, match="temperature"):
        contrastive_loss(z1, z2, temperature=0.0)


def _spying_augment() -> tuple[list[torch.Tensor], Callable[..., torch.Tensor]]:
    """A view augmentation that only scales to [0, 1], and the list of the batches it saw."""
    seen: list[torch.Tensor] = []

    def spy(images: torch.Tensor, generator: torch.Generator, streams: int = 1) -> torch.Tensor:
        seen.append(images)
        return to_unit_float(images)

    return seen, spy


def test_da_instances_take_both_views_from_the_same_copy() -> None:
    """Every transformed copy is one instance; both its views are augmentations of it."""
    seen, spy = _spying_augment()
    batch = torch.randint(0, 256, (3, 3, 32, 32), dtype=torch.uint8)
    model = build_proxy_model("contrastive_da", width=8, head_depth=1, head_hidden=16)
    names = ("rot90", "rot180", "rot270")
    # per_image batching: the step makes the copies (expanded batching: the data set has).
    settings = TrainSettings(
        "contrastive_da", epochs=1, batch_size=3, distributions=names, da_batching="per_image"
    )
    loss = TASK.step(settings, spy)(model, batch, generator=torch.Generator())
    assert len(seen) == 1  # all views in one batched call
    instances = distribution_copies(batch, names).images
    assert len(instances) == 3 * (1 + 3)
    assert torch.equal(seen[0], torch.cat([instances, instances]))  # view 1 | view 2
    assert torch.isfinite(loss) and loss.ndim == 0


def test_plain_contrastive_step_uses_the_batch_only() -> None:
    seen, spy = _spying_augment()
    batch = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)
    model = build_proxy_model("contrastive", width=8, head_depth=1, head_hidden=16)
    settings = TrainSettings("contrastive", epochs=1, batch_size=4, loss_form="ntxent")
    TASK.step(settings, spy)(model, batch, generator=torch.Generator())
    assert torch.equal(seen[0], torch.cat([batch, batch]))
