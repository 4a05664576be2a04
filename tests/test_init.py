"""Initial weights: the released Keras initialisers against their definitions, and torch's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

from pipeline_lib.models.init import TRUNCATED_NORMAL_STD, released_init_, variance_scaling_std
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.models.representation import build_representation
from pipeline_lib.registry import TRAINED_METHODS

#: Relative tolerance on a standard deviation estimated from N >= 500,000 draws: the
#: estimate's own relative standard error is about 1 / sqrt(2 N) < 0.1 %, so 2 % is 20 of them.
STD_RTOL = 0.02

#: Two-sided tolerance on a layer's sample variance, in standard errors of that variance
#: under the released rule: a false alarm has probability 6e-7 per layer (normal limit of the
#: sample variance; the smallest layer checked has 128 weights, where it is already close).
VARIANCE_Z = 5.0


@pytest.fixture(autouse=True)
def _no_grad():
    """The statistics read parameters: no autograd history needed."""
    with torch.no_grad():
        yield


def _seeded(build, seed: int = 0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def test_the_truncation_constant_is_the_std_of_a_unit_normal_cut_at_two() -> None:
    # Var of N(0, 1) on [-2, 2]: 1 - 2 * 2 phi(2) / (2 Phi(2) - 1).
    phi = math.exp(-2.0) / math.sqrt(2 * math.pi)
    mass = math.erf(2 / math.sqrt(2))
    assert TRUNCATED_NORMAL_STD == pytest.approx(math.sqrt(1 - 4 * phi / mass), rel=1e-12)


def test_convolutions_are_truncated_normal_variance_scaling_fan_out() -> None:
    conv = _seeded(lambda: released_init_(nn.Conv2d(256, 512, 3, bias=False)))
    fan_out = 512 * 3 * 3  # Keras: out_channels * kh * kw
    weight = conv.weight.detach().double()
    limit = 2 * variance_scaling_std(fan_out)  # two pre-truncation standard deviations
    assert float(weight.std()) == pytest.approx(math.sqrt(2.0 / fan_out), rel=STD_RTOL)
    assert float(weight.abs().max()) <= limit
    assert float(weight.abs().max()) > 0.99 * limit  # cut at 2 std, not narrower
    assert abs(float(weight.mean())) < 0.01 * math.sqrt(2.0 / fan_out)


def test_transposed_convolutions_use_the_fan_out_both_frameworks_compute() -> None:
    """Keras' transposed kernel is (kh, kw, out, in), torch's (in, out, kh, kw): fan_out is
    in_channels * kh * kw in both; the bias is zero."""
    layer = _seeded(lambda: released_init_(nn.ConvTranspose2d(512, 256, 4, 2, 1)))
    fan_out = 512 * 4 * 4
    assert float(layer.weight.double().std()) == pytest.approx(
        math.sqrt(2.0 / fan_out), rel=STD_RTOL
    )
    assert float(layer.weight.abs().max()) <= 2 * variance_scaling_std(fan_out)
    assert torch.equal(layer.bias, torch.zeros_like(layer.bias))


def test_dense_layers_are_glorot_uniform_with_zero_bias() -> None:
    layer = _seeded(lambda: released_init_(nn.Linear(1024, 512)))
    fan_in, fan_out = 1024, 512
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    weight = layer.weight.detach().double()
    assert float(weight.abs().max()) <= bound
    assert float(weight.abs().max()) > 0.999 * bound  # uniform up to the bound
    # U(-l, l) has variance l^2 / 3 = 2 / (fan_in + fan_out).
    assert float(weight.var()) == pytest.approx(2.0 / (fan_in + fan_out), rel=2 * STD_RTOL)
    assert torch.equal(layer.bias, torch.zeros_like(layer.bias))


def test_batchnorm_starts_at_one_and_zero_and_unknown_layers_are_refused() -> None:
    norm = nn.BatchNorm1d(8)
    with torch.no_grad():
        norm.weight.fill_(3.0)
        norm.bias.fill_(-1.0)
        norm.running_var.fill_(5.0)
    released_init_(norm)
    assert torch.equal(norm.weight, torch.ones(8)) and torch.equal(norm.bias, torch.zeros(8))
    assert torch.equal(norm.running_var, torch.ones(8))
    with pytest.raises(ValueError, match="no released initialiser for LayerNorm"):
        released_init_(nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)))


def _released_rule(layer: nn.Module):
    """The exact distribution of ``layer``'s weights under the released rule (scipy, frozen)."""
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(layer.weight)
    if isinstance(layer, nn.Linear):  # glorot_uniform: U(-a, a), a = sqrt(6 / (in + out))
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        return stats.uniform(loc=-bound, scale=2 * bound)
    # VarianceScaling(2.0, 'fan_out'), truncated normal: cut at 2 pre-truncation stds
    return stats.truncnorm(-2.0, 2.0, scale=variance_scaling_std(fan_out))


def _variance_z(weight: torch.Tensor, rule) -> float:
    """How many standard errors the sample variance of ``weight`` lies from ``rule``'s.

    With n draws of variance s2 and kurtosis k, the sample variance (ddof=1) has variance
    s2^2 (k / n - (n - 3) / (n (n - 1))) (Cramer 1946, eq. 27.7.2).
    """
    w = weight.detach().double().flatten().numpy()
    n, variance = w.size, float(rule.var())
    kurtosis = float(rule.stats(moments="k")) + 3.0  # scipy gives the excess kurtosis
    se = variance * math.sqrt(kurtosis / n - (n - 3) / (n * (n - 1)))
    return (float(np.var(w, ddof=1)) - variance) / se


def test_the_rules_have_the_released_variances() -> None:
    """The scipy distributions the spread is checked against have the documented variances:
    glorot_uniform 2 / (fan_in + fan_out), the convolutions' rule 2 / fan_out."""
    linear, conv = nn.Linear(64, 32), nn.Conv2d(16, 32, 3)
    assert _released_rule(linear).var() == pytest.approx(2.0 / (64 + 32), rel=1e-12)
    assert _released_rule(conv).var() == pytest.approx(2.0 / (32 * 9), rel=1e-12)


@pytest.mark.parametrize("method", TRAINED_METHODS)
def test_every_trained_network_follows_the_released_rule(method: str) -> None:
    model = _seeded(lambda: build_proxy_model(method, width=8, head_depth=None, head_hidden=32))
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d | nn.ConvTranspose2d)]
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert convs and norms and linears
    for conv in convs:
        fan_out = nn.init._calculate_fan_in_and_fan_out(conv.weight)[1]
        assert float(conv.weight.abs().max()) <= 2 * variance_scaling_std(fan_out)
        assert conv.bias is None or not conv.bias.any()
    for linear in linears:
        bound = math.sqrt(6.0 / (linear.in_features + linear.out_features))
        assert float(linear.weight.abs().max()) <= bound
        assert linear.bias is None or not linear.bias.any()  # torch's default is U(+-1/sqrt(in))
    # The bound alone passes torch's default of a bias-free layer (kaiming_uniform(a=sqrt(5)):
    # U(+-1/sqrt(fan_in)), inside the glorot bound): the spread must be the rule's too.
    for name, layer in model.named_modules():
        if isinstance(layer, nn.Linear | nn.Conv2d | nn.ConvTranspose2d):
            z = _variance_z(layer.weight, _released_rule(layer))
            assert abs(z) <= VARIANCE_Z, f"{name}: variance {z:+.1f} standard errors off"
    for norm in norms:
        assert torch.equal(norm.weight, torch.ones_like(norm.weight))
        assert not norm.bias.any()


@pytest.mark.parametrize("method", TRAINED_METHODS)
def test_the_spread_check_refuses_torch_defaults_outside_the_backbone(method: str) -> None:
    """Every head and proxy layer left at torch's default (variance 1 / (3 fan_in)) fails the
    check above at this test's shapes: the check can tell the two initialisations apart."""
    model = _seeded(
        lambda: build_proxy_model(method, width=8, head_depth=None, head_hidden=32, init="torch")
    )
    layers = {
        name: layer
        for name, layer in model.named_modules()
        if isinstance(layer, nn.Linear | nn.ConvTranspose2d) and not name.startswith("backbone")
    }
    assert layers
    for name, layer in layers.items():
        z = _variance_z(layer.weight, _released_rule(layer))
        assert abs(z) > VARIANCE_Z, f"{name}: torch's default passes ({z:+.1f} standard errors)"


def test_the_torch_variant_is_the_former_initialisation() -> None:
    """torchvision's rule for the backbone (an untruncated normal: beyond the released
    cut-off on a large layer) and torch's defaults (non-zero biases) elsewhere."""
    model = _seeded(lambda: build_proxy_model("rotation", width=64, head_depth=2, init="torch"))
    conv = model.backbone.stages[-1].conv2.weight  # 512 x 512 x 3 x 3
    fan_out = 512 * 9
    assert float(conv.double().std()) == pytest.approx(math.sqrt(2.0 / fan_out), rel=STD_RTOL)
    assert float(conv.abs().max()) > 2 * variance_scaling_std(fan_out)
    assert model.proxy.bias.abs().max() > 0
    with pytest.raises(ValueError, match="unknown init 'keras'; allowed: released, torch"):
        build_proxy_model("rotation", width=8, init="keras")


def test_initialisation_is_deterministic_for_a_seed() -> None:
    def weights(seed: int, init: str) -> list[torch.Tensor]:
        model = _seeded(lambda: build_proxy_model("denoising", width=8, init=init), seed)
        return [t for t in model.state_dict().values() if t.is_floating_point()]

    for init in ("released", "torch"):
        first, again, other = weights(1, init), weights(1, init), weights(2, init)
        assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
        assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))
    released, former = weights(1, "released"), weights(1, "torch")
    assert not all(torch.equal(a, b) for a, b in zip(released, former, strict=True))


def test_the_random_weights_row_uses_the_released_initialisers() -> None:
    conv = build_representation("resnet18_random", seed=0).backbone.stages[-1].conv2.weight
    former = build_representation("resnet18_random", seed=0, init="torch")
    fan_out = 512 * 9
    assert float(conv.abs().max()) <= 2 * variance_scaling_std(fan_out)
    assert float(conv.double().std()) == pytest.approx(math.sqrt(2.0 / fan_out), rel=STD_RTOL)
    assert float(former.backbone.stages[-1].conv2.weight.abs().max()) > 2 * variance_scaling_std(
        fan_out
    )
