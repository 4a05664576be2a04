"""Our detectors against the released ``eval_embed`` (benchmarks/reference/trace_detectors.py):
the same inputs, every score up to the monotone map between the two definitions
(``compare_detectors.py`` lists each map), and the same AUCs.

Tolerances (each justified in ``compare_detectors.TOLERANCES``): a few float32 ulps where both
sides compute in float32 (cosines, probabilities, the KDE, the Gaussian's float32 fit),
1e-4 relative for the RBF OC-SVM (libsvm stops within its tol on rows an ulp apart), and
the AUC within one swapped inlier/outlier pair.
"""

from __future__ import annotations

import pytest

from tests.reference.compare import load_compare
from tests.reference.traces import load_trace

DETECTORS = ("knn", "ocsvm", "kde", "gde", "ocsvm_linear", "rotation_p0", "rotation_released")


@pytest.fixture(scope="module")
def records() -> dict:
    arrays, meta = load_trace("detectors")
    return {r.quantity: r for r in load_compare("detectors").compare(arrays, meta)}


@pytest.mark.parametrize("name", DETECTORS)
def test_scores_and_auc_match_the_released_code(records, name: str) -> None:
    matched = [r for quantity, r in records.items() if quantity.startswith(f"{name} ")]
    assert len(matched) == 2, sorted(records)  # the score and the AUC
    for record in matched:
        assert record.within, record.record()


def test_the_rbf_width_is_ten_over_d_times_the_variance(records) -> None:
    record = records["gamma = 10 / (d Var) of the normalised fit features"]
    assert record.within, record.record()


def test_no_record_is_left_unchecked(records) -> None:
    """Every comparison the family makes holds, also ones no test above names."""
    values = records.values() if isinstance(records, dict) else records
    failing = [r.record() for r in values if not r.within]
    assert not failing, failing
