"""Tests of score ensembles: the standardisations, their invariances, and the ensembles study
against an independent recomputation from the same scores."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline_lib.detection.metrics import auroc
from pipeline_lib.paper.published import load_published
from pipeline_lib.studies import build_study
from pipeline_lib.studies.distribution_sets import SUPP_ENSEMBLE_IDS
from pipeline_lib.studies.ensembles import ENSEMBLE_SETS, ensemble_auroc, standardise
from tests.studies.synth import expected_grid, fake_results, variant

CLASSES = {"cifar10": ["airplane", "automobile"]}
N_TEST = 60


def _members(rng: np.random.Generator, k: int) -> tuple[list[np.ndarray], np.ndarray]:
    labels = np.r_[np.zeros(N_TEST // 2), np.ones(N_TEST // 2)].astype(int)
    return [rng.normal(size=N_TEST) + labels * rng.uniform(0.3, 1.5) for _ in range(k)], labels


def test_one_member_gives_its_own_auc_either_way() -> None:
    (scores,), labels = _members(np.random.default_rng(0), 1)
    assert ensemble_auroc([scores], labels) == pytest.approx(auroc(scores, labels))
    assert ensemble_auroc([scores], labels, how="rank") == pytest.approx(auroc(scores, labels))


def test_zscore_ensemble_equals_the_mean_of_standardised_scores() -> None:
    members, labels = _members(np.random.default_rng(1), 3)
    manual = np.mean([(s - s.mean()) / s.std() for s in members], axis=0)
    assert ensemble_auroc(members, labels) == pytest.approx(auroc(manual, labels))
    # z-scoring removes each member's location and scale
    shifted = [members[0] * 1000.0 - 7.0, *members[1:]]
    assert ensemble_auroc(shifted, labels) == pytest.approx(ensemble_auroc(members, labels))


@pytest.mark.parametrize("transform", [np.exp, lambda s: s**3 + 5.0, lambda s: np.arctan(4 * s)])
def test_a_monotone_transform_of_one_member_cannot_change_the_rank_ensemble(transform) -> None:
    members, labels = _members(np.random.default_rng(2), 4)
    before = ensemble_auroc(members, labels, how="rank")
    after = ensemble_auroc([transform(members[0]), *members[1:]], labels, how="rank")
    assert after == pytest.approx(before, abs=1e-12)
    assert np.allclose(standardise(transform(members[0]), "rank"), standardise(members[0], "rank"))


@pytest.mark.parametrize(
    ("members", "how", "message"),
    [
        ([], "zscore", "empty"),
        ([np.zeros(N_TEST) + 1.0], "zscore", "constant"),
        ([np.ones(N_TEST - 1)], "zscore", "shape"),
        ([np.r_[np.nan, np.ones(N_TEST - 1)]], "rank", "non-finite"),
        ([np.arange(N_TEST, dtype=float)], "mean", "how="),
    ],
)
def test_ensemble_auroc_rejects_bad_input(members, how, message) -> None:
    labels = np.r_[np.zeros(N_TEST // 2), np.ones(N_TEST // 2)].astype(int)
    with pytest.raises(ValueError, match=message):
        ensemble_auroc(members, labels, how=how)


def _set_variants() -> list[dict]:
    return [
        variant(f"da_{k}", "contrastive_da", distributions=",".join(dists))
        for k, dists in enumerate(ENSEMBLE_SETS.values())
    ]


@pytest.fixture(scope="module")
def ensemble_case():
    grid = expected_grid(
        classes=CLASSES, seeds=[0, 1, 2], variants=_set_variants(), detectors=["ocsvm"]
    )
    results = fake_results(grid, seed=21)
    rng = np.random.default_rng(22)
    scores: dict[tuple, list] = {}
    for row in grid.itertuples(index=False):
        key = (row.dataset, row.inlier, row.contamination, row.method, row.fitset, row.detector)
        members, labels = _members(rng, 1)
        scores.setdefault(key, []).append((row.seed, members[0], labels))
    # one member's scores are missing: set da_1, class automobile, seed 2
    key = ("cifar10", "automobile", 0.0, "da_1", "train", "ocsvm")
    scores[key] = [m for m in scores[key] if m[0] != 2]
    return grid, results, scores


def _oracle_class_mean(scores: dict, methods: list[str], seeds: list[int] | None) -> float:
    aucs = []
    for inlier in CLASSES["cifar10"]:
        members, labels = [], None
        for method in methods:
            for seed, s, y in scores[("cifar10", inlier, 0.0, method, "train", "ocsvm")]:
                if seeds is None or seed in seeds:
                    members.append((s - s.mean()) / s.std())
                    labels = y
        aucs.append(auroc(np.mean(members, axis=0), labels))
    return float(np.mean(aucs))


def test_seed_ensembles_and_the_cross_set_ensembles_match_a_recomputation(ensemble_case) -> None:
    grid, results, scores = ensemble_case
    study = build_study("ensembles", results, grid, scores=scores)
    table = study.table.set_index(["set", "aggregation"])
    methods = {name: f"da_{k}" for k, name in enumerate(ENSEMBLE_SETS)}
    for name, method in methods.items():
        assert table.loc[(name, "seed_ensemble"), "mean"] == pytest.approx(
            _oracle_class_mean(scores, [method], None)
        )
        single = results[results["method"] == method].groupby("seed")["auroc"].mean()
        assert table.loc[(name, "single_model"), "mean"] == pytest.approx(single.mean())
    per_seed = [_oracle_class_mean(scores, list(methods.values()), [s]) for s in (0, 1, 2)]
    cross = table.loc[("ensemble of sets", "single_model")]
    assert cross["mean"] == pytest.approx(np.mean(per_seed))
    assert cross["std"] == pytest.approx(np.std(per_seed, ddof=1))  # the sample std
    all25 = table.loc[("ensemble of sets", "seed_ensemble")]
    assert all25["mean"] == pytest.approx(_oracle_class_mean(scores, list(methods.values()), None))


def test_missing_scores_are_counted_and_the_paper_table_is_attached(ensemble_case) -> None:
    grid, results, scores = ensemble_case
    study = build_study("ensembles", results, grid, scores=scores)
    table = study.table.set_index(["set", "aggregation"])
    name_1 = list(ENSEMBLE_SETS)[1]
    assert table.loc[(name_1, "seed_ensemble"), "n_missing"] == 1
    assert table.loc[(list(ENSEMBLE_SETS)[0], "seed_ensemble"), "n_missing"] == 0
    assert table.loc[("ensemble of sets", "seed_ensemble"), "n_missing"] == 1
    assert table.loc[("ensemble of sets", "single_model"), "n_missing"] == 1
    supp = load_published("supp_ensemble").set_index(["method", "detector"])["mean"]
    for name in ENSEMBLE_SETS:
        assert (
            table.loc[(name, "single_model"), "paper_mean"]
            == supp[(SUPP_ENSEMBLE_IDS[name], "single_model")]
        )
        assert (
            table.loc[(name, "seed_ensemble"), "paper_mean"]
            == supp[(SUPP_ENSEMBLE_IDS[name], "ensemble_of_5")]
        )
    assert (
        table.loc[("ensemble of sets", "seed_ensemble"), "paper_mean"]
        == supp[("contrastive_da_ensemble_of_sets", "ensemble_of_5")]
    )
    assert len(study.deviations) == 12
    assert "[missing 1/" in study.display.to_string()
    ax = study.figures["auroc"].axes[0]
    bars = [p for p in ax.patches if p.get_gid() == "ours"]
    assert len(bars) == 12 and sum(bool(p.get_hatch()) for p in bars) == 3


def test_without_scores_every_ensemble_cell_is_missing(ensemble_case) -> None:
    grid, results, _ = ensemble_case
    study = build_study("ensembles", results, grid)
    seed_rows = study.table[study.table["aggregation"] == "seed_ensemble"]
    assert seed_rows["mean"].isna().all()
    assert (seed_rows["n_missing"] == seed_rows["n_expected"]).all()
    assert any("no test scores" in note for note in study.notes)


def test_members_with_different_labels_are_refused(ensemble_case) -> None:
    grid, results, scores = ensemble_case
    key = ("cifar10", "airplane", 0.0, "da_0", "train", "ocsvm")
    bad = dict(scores)
    seed, s, y = bad[key][0]
    bad[key] = [(seed, s, y[::-1].copy()), *bad[key][1:]]
    with pytest.raises(ValueError, match="different test labels"):
        build_study("ensembles", results, grid, scores=bad)


def test_rank_option_is_used() -> None:
    grid = expected_grid(
        classes=CLASSES, seeds=[0, 1], variants=_set_variants()[:1], detectors=["ocsvm"]
    )
    rng = np.random.default_rng(5)
    scores = {}
    for row in grid.itertuples(index=False):
        members, labels = _members(rng, 1)
        key = (row.dataset, row.inlier, row.contamination, row.method, row.fitset, row.detector)
        scores.setdefault(key, []).append((row.seed, members[0], labels))
    options = {"how": "rank", "sets": {"+rot90": ENSEMBLE_SETS["+rot90"]}}
    study = build_study("ensembles", fake_results(grid), grid, options=options, scores=scores)
    expected = np.mean(
        [
            ensemble_auroc([s for _, s, _ in members], members[0][2], how="rank")
            for members in scores.values()
        ]
    )
    row = study.table[
        (study.table["set"] == "+rot90") & (study.table["aggregation"] == "seed_ensemble")
    ]
    assert row["mean"].iloc[0] == pytest.approx(expected)
    # only the paper's five sets have a published cross-set number
    cross = study.table[study.table["set"] == "ensemble of sets"]
    assert cross["paper_mean"].isna().all()


def test_score_keys_may_carry_the_space(ensemble_case) -> None:
    grid, results, scores = ensemble_case
    with_space = {(*key, "f"): members for key, members in scores.items()}
    # g(f) scores of another space must be ignored, even if they would change the result
    first = next(iter(scores))
    with_space[(*first, "g")] = [(seed, -s, y) for seed, s, y in scores[first]]
    plain = build_study("ensembles", results, grid, scores=scores).table
    spaced = build_study("ensembles", results, grid, scores=with_space).table
    assert np.allclose(plain["mean"], spaced["mean"], equal_nan=True)
    with pytest.raises(ValueError, match="score key"):
        build_study("ensembles", results, grid, scores={("cifar10",): []})
