"""pipeline_lib.models.flops: the FLOP accounting behind every "share of peak" figure.

The benchmarks state TFLOP/s as 3 x the forward FLOPs of one view x views per instance x
instances/s. Here a real training epoch of each method is counted op by op
(FlopCounterMode: its views, forward, loss and backward) and divided by the instances it
trained: within 2 % of that formula (measured at width 8: 0.992 of it for denoising,
0.999 for the others; the first convolution needs no input gradient, the augmentations and
losses add a little). An error in the views per instance (contrastive DA was once counted
at 8 views, not 2) is a factor of 4.
"""

from __future__ import annotations

import pytest
from torch.utils.flop_counter import FlopCounterMode

from pipeline_lib.models.flops import forward_flops_per_view, training_tflops
from pipeline_lib.registry import TRAINED_METHODS
from pipeline_lib.ssl.loop import train_epoch
from tests.ssl.tiny_runs import keyword_prepare

WIDTH = 8


def test_the_papers_backbone_is_the_quoted_cifar_resnet18() -> None:
    """0.56 G multiply-adds per 32x32 image, as usually quoted for CIFAR ResNet-18."""
    flops = forward_flops_per_view("rotnet", width=64, backbone_only=True)
    assert flops == pytest.approx(2 * 0.556e9, rel=0.01)


@pytest.mark.parametrize("method", TRAINED_METHODS)
def test_a_counted_training_epoch_matches_the_accounting(method: str, digits64) -> None:
    images = digits64[:16]
    run, state = keyword_prepare(method, images, seed=0, epochs=1, batch_size=8, width=WIDTH)
    with FlopCounterMode(display=False) as counter:
        train_epoch(run, state)
    instances = run.data.steps_per_epoch * run.data.per_step
    counted = counter.get_total_flops() / instances
    accounted = training_tflops(method, width=WIDTH, instances_per_s=1.0) * 1e12
    assert counted == pytest.approx(accounted, rel=0.02), (counted, accounted)
