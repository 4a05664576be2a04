"""Our view augmentation against the released one (benchmarks/reference/trace_augment.py).

- Each operation with fixed parameters on fixed images (in [0, 1] and stretched to
  [-0.25, 1.25]) within a few float32 ulps of the released output: the tolerance of each is
  justified in ``compare_augment.OP_TOLERANCES`` (one addition for brightness, summation
  order for contrast and grey, re-implemented HSV kernels for saturation and hue, the
  resampling's roundings for the crop).
- The distribution of every parameter the samplers draw (crop side and offsets, flip, the
  four jitter parameters, grey, the jitter order): 10,000 released draws against 10,000 of
  ours, a two-sample test each (KS for continuous, chi-square or Fisher's exact test for
  discrete), none rejected by Holm's procedure over the family's 10 tests at family-wise
  alpha = 0.01 (``distribution.py``).
- The rotations of rotation prediction and the distribution sets of the paper's figure
  pixel for pixel; one jitter order per view stream for the whole run; no blur in training;
  contrastive DA batches of 32 instances of the once-expanded set, plain contrastive the
  identity expansion, two independent views each.
"""

from __future__ import annotations

import pytest

from tests.reference.compare import load_compare
from tests.reference.traces import load_trace

TRACES = ("augment_ops", "augment_draws", "augment_batches")


@pytest.fixture(scope="module")
def records() -> list:
    loaded = {name: load_trace(name) for name in TRACES}
    traces = {name: arrays for name, (arrays, _) in loaded.items()}
    metas = {name: meta for name, (_, meta) in loaded.items()}
    return load_compare("augment").compare(traces, metas)


def _within(records: list, *prefixes: str) -> None:
    matched = [r for r in records if r.quantity.startswith(prefixes)]
    assert matched, [r.quantity for r in records]
    failing = [r.record() for r in matched if not r.within]
    assert not failing, failing


@pytest.mark.parametrize(
    "op",
    [
        "brightness",
        "contrast",
        "saturation",
        "hue",
        "gray",
        "crop",
        "rotate90",
        "rotate180",
        "rotate270",
    ],
)
def test_each_operation_matches_on_fixed_parameters(records, op: str) -> None:
    _within(records, f"{op} on fixed images")


def test_every_sampled_parameter_has_the_released_distribution(records) -> None:
    sampled = [r for r in records if r.measure.startswith("-log10 p")]
    assert len(sampled) == 10, [r.quantity for r in sampled]
    failing = [r.record() for r in sampled if not r.within]
    assert not failing, failing


def test_one_jitter_order_per_view_stream(records) -> None:
    _within(records, "jitter orders per view stream")


def test_training_views_are_never_blurred(records) -> None:
    _within(records, "blur in training")


def test_contrastive_batches_are_drawn_from_the_expanded_set(records) -> None:
    _within(records, "contrastive DA:", "plain contrastive:")


def test_the_figure_distribution_sets_are_the_released_copies(records) -> None:
    _within(records, "distribution sets of the paper's figure")


def test_no_record_is_left_unchecked(records) -> None:
    """Every comparison the family makes holds, also ones no test above names."""
    failing = [r.record() for r in records if not r.within]
    assert not failing, failing
