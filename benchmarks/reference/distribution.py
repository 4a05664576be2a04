"""Two-sample tests of draws from the released code against ours, as ``Difference`` records.

Where the two implementations draw with different generators (augmentation parameters,
epoch orders), their numbers cannot agree one by one; their distributions must. Each test
here compares a sample of the released code's draws (from a trace) with a sample of ours
(drawn by the caller from a seeded generator, so the p-value is a fixed number) and becomes a
:class:`~parity.Difference` whose ``largest`` is ``-log10 p`` and whose ``tolerance`` is
``-log10(alpha / m)``: a family of ``m`` tests passes when no test is rejected by Holm's
step-down procedure at family-wise level ``alpha`` (whether *any* test is rejected, Holm and
Bonferroni agree: both ask whether the smallest p-value is below ``alpha / m``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from parity import Difference
from scipy import stats

#: Family-wise level of each family's distribution tests: with both families' tests
#: (augmentation parameters, epoch order) the chance that seeded samples of two equal
#: distributions fail the suite is at most 2 %.
FAMILY_ALPHA = 0.01


@dataclass(frozen=True)
class Sampled:
    """One two-sample test: the quantity, the test that ran, its p-value and statistic."""

    quantity: str
    test: str
    statistic: float
    pvalue: float
    n_released: int
    n_ours: int


def continuous(quantity: str, released: np.ndarray, ours: np.ndarray) -> Sampled:
    """Two-sample Kolmogorov-Smirnov test (exact p-value where scipy can compute it)."""
    released, ours = np.asarray(released, np.float64), np.asarray(ours, np.float64)
    result = stats.ks_2samp(released, ours)
    return Sampled(
        quantity,
        "two-sample KS",
        float(result.statistic),
        float(result.pvalue),
        *_sizes(released, ours),
    )


def discrete(quantity: str, released: np.ndarray, ours: np.ndarray) -> Sampled:
    """Chi-square test of homogeneity on the 2 x k table of counts (Fisher's exact test when
    the table is 2 x 2, whatever the counts).

    Categories that neither sample drew are dropped (they carry no information).
    """
    released, ours = np.asarray(released).ravel(), np.asarray(ours).ravel()
    categories = np.union1d(released, ours)
    table = np.array(
        [[np.count_nonzero(sample == c) for c in categories] for sample in (released, ours)]
    )
    if table.shape[1] < 2:  # one category on both sides: the samples agree completely
        return Sampled(quantity, "single category", 0.0, 1.0, *_sizes(released, ours))
    if table.shape[1] == 2:
        result = stats.fisher_exact(table)
        return Sampled(
            quantity,
            "Fisher exact (2 x 2)",
            float(result.statistic),
            float(result.pvalue),
            *_sizes(released, ours),
        )
    chi2, pvalue, dof, _ = stats.chi2_contingency(table)
    return Sampled(
        quantity,
        f"chi-square homogeneity ({dof} dof)",
        float(chi2),
        float(pvalue),
        *_sizes(released, ours),
    )


def _sizes(released: np.ndarray, ours: np.ndarray) -> tuple[int, int]:
    return len(released), len(ours)


def holm_rejected(pvalues: list[float], alpha: float = FAMILY_ALPHA) -> list[bool]:
    """Holm's step-down procedure: which hypotheses of the family are rejected at ``alpha``."""
    order = np.argsort(pvalues, kind="stable")
    rejected = [False] * len(pvalues)
    for rank, index in enumerate(order):
        if pvalues[index] > alpha / (len(pvalues) - rank):
            break
        rejected[index] = True
    return rejected


def as_differences(
    family: str, tests: list[Sampled], alpha: float = FAMILY_ALPHA
) -> list[Difference]:
    """One record per test: ``-log10 p`` against ``-log10(alpha / m)`` (see the module)."""
    threshold = alpha / len(tests)
    return [
        Difference(
            family=family,
            quantity=test.quantity,
            largest=_evidence(test.pvalue),
            tolerance=-math.log10(threshold),
            measure=(
                f"-log10 p of a {test.test} test, released n = {test.n_released} vs ours "
                f"n = {test.n_ours}: p = {test.pvalue:.4g}, statistic = {test.statistic:.4g}"
            ),
            why=(
                f"the two draw from different generators, so their distributions are "
                f"compared; Holm over the family's {len(tests)} tests at family-wise "
                f"alpha = {alpha:g} (no rejection <=> every p >= alpha / m = {threshold:.3g})"
            ),
        )
        for test in tests
    ]


def _evidence(pvalue: float) -> float:
    return math.inf if pvalue <= 0 else -math.log10(pvalue)
