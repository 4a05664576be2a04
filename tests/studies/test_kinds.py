"""Each study kind on a synthetic grid with some jobs deleted: the numbers against oracles
computed here from the same frames, the missing marks, the published overlays, the figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.paper.aggregate import main_table
from pipeline_lib.paper.published import load_published
from pipeline_lib.paper.published.text_values import load_text_values
from pipeline_lib.studies import build_study
from pipeline_lib.studies.distribution_sets import ACCUMULATED_SETS, SUPP_ENSEMBLE_IDS
from pipeline_lib.studies.paper import published_main
from tests.studies.synth import class_seed_stats, expected_grid, fake_results, variant

CLASSES = {"cifar10": ["airplane", "automobile", "bird"]}


def _count(ax, gid: str) -> int:
    """Artists of an axes carrying ``gid`` (lines, collections, patches)."""
    return sum(1 for artist in ax.get_children() if artist.get_gid() == gid)


def _subset(frame: pd.DataFrame, **where) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for col, value in where.items():
        mask &= frame[col].to_numpy() == value
    return frame[mask]


# ---------------------------------------------------------------- contamination


@pytest.fixture(scope="module")
def contamination_case():
    grid = expected_grid(
        classes=CLASSES,
        seeds=[0, 1, 2],
        variants=[variant("rotnet"), variant("rotation"), variant("contrastive_da")],
        detectors=["ocsvm", "ocsvm_linear", "gde", "kde"],
        contaminations=[0.0, 0.005, 0.02, 0.1],
    )
    results = fake_results(grid, seed=11, drop=7)
    return grid, results, build_study("contamination", results, grid)


def test_contamination_cells_match_the_oracle_and_count_missing(contamination_case) -> None:
    grid, results, study = contamination_case
    assert set(study.table["detector"]) == {"ocsvm", "ocsvm_linear", "gde"}  # kde not a panel
    assert len(study.table) == 3 * 3 * 4
    for row in study.table.itertuples(index=False):
        where = {"method": row.method, "detector": row.detector}
        rows = _subset(results, **where)
        rows = rows[np.isclose(rows["contamination"], row.contamination)]
        expected = _subset(grid, **where)
        expected = expected[np.isclose(expected["contamination"], row.contamination)]
        mean, std = class_seed_stats(rows)
        assert row.mean == pytest.approx(mean) and row.std == pytest.approx(std, nan_ok=True)
        assert row.n_missing == len(expected) - len(rows)
    panels = ["ocsvm", "ocsvm_linear", "gde"]
    dropped = grid["detector"].isin(panels).sum() - results["detector"].isin(panels).sum()
    assert int(study.table["n_missing"].sum()) == dropped > 0


def test_contamination_paper_values_only_at_zero(contamination_case) -> None:
    _, _, study = contamination_case
    published = published_main()
    for row in study.table.itertuples(index=False):
        value = published.get((row.method, row.detector, row.dataset))
        if row.contamination == 0.0 and value is not None:
            assert row.paper_mean == value[0] and row.deviation == pytest.approx(
                row.mean - value[0]
            )
        else:
            assert np.isnan(row.paper_mean)
    with_paper = study.table["paper_mean"].notna()
    assert len(study.deviations) == int(with_paper.sum()) > 0
    assert np.allclose(study.deviations["ours"], study.table.loc[with_paper, "mean"])


def test_contamination_display_marks_incomplete_cells(contamination_case) -> None:
    _, _, study = contamination_case
    text = study.display.to_string()
    incomplete = study.table[study.table["n_missing"] > 0]
    for row in incomplete.itertuples(index=False):
        assert f"[missing {row.n_missing}/{row.n_expected}]" in text
    assert any("left out of the summary's ranking" in note for note in study.notes)


def test_contamination_figure_has_a_panel_per_detector(contamination_case) -> None:
    _, _, study = contamination_case
    fig = study.figures["cifar10"]
    assert len(fig.axes) == 3
    for ax, detector in zip(fig.axes, ["ocsvm", "ocsvm_linear", "gde"], strict=True):
        rows = study.table[study.table["detector"] == detector]
        zero = rows[rows["contamination"] == 0.0]
        assert _count(ax, "ours") == rows["method"].nunique()
        assert _count(ax, "reference") == int(zero["mean"].notna().sum())
        assert _count(ax, "paper") == int(zero["paper_mean"].notna().sum())
        incomplete = rows[(rows["contamination"] > 0) & (rows["n_missing"] > 0)]
        assert _count(ax, "incomplete") == incomplete["method"].nunique()


# ---------------------------------------------------------------- semi-supervised


def test_semi_supervised_orders_fit_sets_and_panels_per_ratio() -> None:
    grid = expected_grid(
        classes=CLASSES,
        seeds=[0, 1],
        variants=[variant("rotation"), variant("contrastive_da")],
        detectors=["ocsvm"],
        contaminations=[0.0, 0.01, 0.05],
        fitsets=["train", "clean500", "clean50", "clean100"],
    )
    results = fake_results(grid, seed=12, drop=4)
    study = build_study("semi_supervised", results, grid)
    fitsets = list(dict.fromkeys(study.table["fitset"]))
    assert fitsets == ["clean50", "clean100", "clean500", "train"]
    assert study.table["n_clean"].tolist()[:3] == [50.0, 100.0, 500.0]
    assert np.isnan(study.table["n_clean"].iloc[3])  # "train": the whole contaminated set
    row = study.table.iloc[5]
    rows = _subset(results, method=row["method"], fitset=row["fitset"])
    rows = rows[np.isclose(rows["contamination"], row["contamination"])]
    assert row["mean"] == pytest.approx(class_seed_stats(rows)[0])
    fig = study.figures["cifar10_ocsvm"]
    assert len(fig.axes) == 3
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [
        "50 clean",
        "100 clean",
        "500 clean",
        "train (all)",
    ]
    paper_rows = study.table[study.table["paper_mean"].notna()]
    assert set(paper_rows["fitset"]) == {"train"} and set(paper_rows["contamination"]) == {0.0}


# ---------------------------------------------------------------- uniformity


@pytest.fixture(scope="module")
def uniformity_case():
    variants = [
        variant(f"{base}_bs{2**k}", base, batch_size=np.nan if k == 5 else float(2**k))
        for base in ("contrastive", "contrastive_da")
        for k in range(3, 10)
    ]
    grid = expected_grid(
        classes=CLASSES,
        seeds=[0, 1, 2, 3],
        variants=variants,
        detectors=["ocsvm"],
        spaces=["f", "g"],
    )
    results = fake_results(grid, seed=13, drop=5)
    return grid, results, build_study("uniformity", results, grid)


def _oracle_points(grid: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """Per (method, seed) at batch sizes 32..512: class-mean AUC of f, g and MMD; complete?"""
    n_classes = len(CLASSES["cifar10"])
    res = results.assign(batch=results["batch_size"].fillna(32.0))
    res = res[res["batch"] >= 32]
    points = []
    for (method, seed), rows in res.groupby(["method", "seed"]):
        mmd = rows.groupby("inlier")["mmd"].first()
        point = {"method": method, "seed": seed, "log_mmd": np.log(mmd.mean())}
        complete = len(mmd) == n_classes
        for space in ("f", "g"):
            auc = rows[rows["space"] == space]["auroc"]
            point[space] = auc.mean()
            point[f"complete_{space}"] = complete and len(auc) == n_classes
        points.append(point)
    return pd.DataFrame(points)


@pytest.mark.parametrize("space", ["g", "f"])
def test_uniformity_pearson_r_equals_numpy_on_the_same_points(uniformity_case, space) -> None:
    grid, results, study = uniformity_case
    points = _oracle_points(grid, results)
    use = points[points[f"complete_{space}"]]
    r_numpy = np.corrcoef(use["log_mmd"], use[space])[0, 1]
    row = study.table[study.table["quantity"] == f"pearson_r_{space}"].iloc[0]
    assert row["mean"] == pytest.approx(r_numpy)
    assert row["n_seeds"] == len(use)
    paper = load_text_values()
    paper_r = paper.loc[paper["metric"] == f"pearson_r_{space}", "mean"].iloc[0]
    assert row["paper_mean"] == paper_r
    dev = study.deviations[study.deviations["unit"] == "r"]
    assert len(dev) == 2 and dev["ours"].tolist()[["g", "f"].index(space)] == pytest.approx(r_numpy)


def test_uniformity_table_and_default_batch_size(uniformity_case) -> None:
    grid, results, study = uniformity_case
    table = study.table
    row = table[
        (table["base_method"] == "contrastive_da")
        & (table["batch_size"] == 32.0)
        & (table["quantity"] == "auroc_f")
    ].iloc[0]
    rows = results[
        (results["base_method"] == "contrastive_da")
        & results["batch_size"].isna()
        & (results["space"] == "f")
    ]
    assert row["mean"] == pytest.approx(class_seed_stats(rows)[0])
    assert row["paper_mean"] == published_main()[("contrastive_da", "ocsvm", "cifar10")][0]
    with_paper = table[table["paper_mean"].notna() & ~table["quantity"].str.startswith("pearson")]
    assert set(with_paper["quantity"]) == {"auroc_f"} and set(with_paper["batch_size"]) == {32.0}
    mmd = table[(table["quantity"] == "mmd") & (table["base_method"] == "contrastive")]
    assert sorted(mmd["batch_size"]) == [float(2**k) for k in range(3, 10)]
    bs8 = results[(results["method"] == "contrastive_bs8") & (results["space"] == "f")]
    per_model = bs8.groupby(["seed", "inlier"])["mmd"].first().groupby("seed").mean()
    assert mmd.iloc[0]["mean"] == pytest.approx(per_model.mean())


def test_uniformity_figures(uniformity_case) -> None:
    grid, results, study = uniformity_case
    assert sorted(study.figures) == ["cifar10_batch_size", "cifar10_correlation"]
    batch = study.figures["cifar10_batch_size"]
    assert len(batch.axes) == 2
    assert _count(batch.axes[0], "ours") == 2  # MMD per base method
    assert _count(batch.axes[1], "ours") == 4  # AUC of f and g(f) per base method
    assert _count(batch.axes[1], "paper") == 2
    scatter = study.figures["cifar10_correlation"]
    points = _oracle_points(grid, results)
    for ax, space in zip(scatter.axes, ["g", "f"], strict=True):
        shown = sum(len(c.get_offsets()) for c in ax.collections if c.get_gid() == "point")
        assert shown == int(points[f"complete_{space}"].sum())
        r = study.table.loc[study.table["quantity"] == f"pearson_r_{space}", "mean"].iloc[0]
        assert f"r = {r:.3f}" in ax.get_title()


# ---------------------------------------------------------------- head depth


def test_head_depth_means_paper_at_default_depth_and_lines() -> None:
    variants = [
        variant(f"{base}_d{d}", base, head_depth=np.nan if d == 8 else float(d))
        for base in ("contrastive", "contrastive_da")
        for d in range(9)
    ]
    grid = expected_grid(
        classes=CLASSES, seeds=[0, 1], variants=variants, detectors=["ocsvm"], spaces=["f", "g"]
    )
    results = fake_results(grid, seed=14, drop=3)
    study = build_study("head_depth", results, grid)
    assert len(study.table) == 2 * 9 * 2
    for row in study.table.itertuples(index=False):
        depth = results["head_depth"].fillna(8.0)
        rows = results[
            (results["base_method"] == row.base_method)
            & (depth == row.head_depth)
            & (results["space"] == row.space)
        ]
        assert row.mean == pytest.approx(class_seed_stats(rows)[0])
    with_paper = study.table[study.table["paper_mean"].notna()]
    assert set(zip(with_paper["head_depth"], with_paper["space"], strict=True)) == {(8.0, "f")}
    assert len(with_paper) == 2
    ax = study.figures["cifar10"].axes[0]
    assert _count(ax, "ours") == 4 and _count(ax, "paper") == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(d) for d in range(9)]


# ---------------------------------------------------------------- distribution sets


def test_distribution_sets_match_sets_in_any_order_and_use_the_paper_tables() -> None:
    variants = [variant("contrastive")]
    for k, (name, dists) in enumerate(ACCUMULATED_SETS.items()):
        if name != "original":
            # reversed order must still name the same set
            variants.append(
                variant(f"da{k}", "contrastive_da", distributions=",".join(reversed(dists)))
            )
    variants[-1] = variant(variants[-1]["method"], "contrastive_da")  # rotations: the default ""
    grid = expected_grid(
        classes=CLASSES, seeds=[0, 1, 2], variants=variants, detectors=["ocsvm", "kde"]
    )
    results = fake_results(grid, seed=15, drop=2)
    study = build_study("distribution_sets", results, grid)
    assert study.table["set"].tolist() == list(ACCUMULATED_SETS)
    supp = load_published("supp_ensemble")
    single = supp[supp["detector"] == "single_model"].set_index("method")["mean"]
    table = study.table.set_index("set")
    for name, method_id in SUPP_ENSEMBLE_IDS.items():
        if name in table.index:
            assert table.loc[name, "paper_mean"] == single[method_id]
    text = load_text_values()
    assert (
        table.loc["+hflip", "paper_mean"]
        == text.loc[text["method"] == "contrastive_da_hflip", "mean"].iloc[0]
    )
    assert (
        table.loc["original", "paper_mean"]
        == published_main()[("contrastive", "ocsvm", "cifar10")][0]
    )
    assert (
        table.loc["rotations", "paper_mean"]
        == published_main()[("contrastive_da", "ocsvm", "cifar10")][0]
    )
    rows = results[(results["method"] == "contrastive") & (results["detector"] == "ocsvm")]
    assert table.loc["original", "mean"] == pytest.approx(class_seed_stats(rows)[0])
    ax = study.figures["auroc"].axes[0]
    assert _count(ax, "ours") == len(ACCUMULATED_SETS)
    hatched = [p for p in ax.patches if p.get_gid() == "ours" and p.get_hatch()]
    assert len(hatched) == int((study.table["n_missing"] > 0).sum())


# ---------------------------------------------------------------- data efficiency


def test_data_efficiency_reference_lines_and_crossover() -> None:
    sizes = (50, 100, 250, 500, 1000, 2500, 5000)
    variants = [
        variant(f"{b}_n{n}", b, train_size=np.nan if n == 5000 else float(n))
        for b in ("rotation", "contrastive_da")
        for n in sizes
    ] + [variant("resnet18_random"), variant("resnet50_imagenet")]
    grid = expected_grid(classes=CLASSES, seeds=[0, 1], variants=variants, detectors=["ocsvm"])
    results = fake_results(grid, seed=16, drop=2)
    study = build_study("data_efficiency", results, grid)
    table = study.table
    refs = table[table["role"] == "reference"]
    assert sorted(refs["base_method"]) == ["resnet18_random", "resnet50_imagenet"]
    published = published_main()
    for row in refs.itertuples(index=False):
        assert row.paper_mean == published[(row.base_method, "ocsvm", "cifar10")][0]
    curve = table[(table["role"] == "curve") & (table["base_method"] == "contrastive_da")]
    assert curve["train_size"].tolist() == [float(n) for n in sizes]
    target = refs.set_index("base_method").loc["resnet50_imagenet", "mean"]
    reached = curve[curve["mean"] >= target]["train_size"]
    cross = table[(table["role"] == "crossover") & (table["base_method"] == "contrastive_da")].iloc[
        0
    ]
    if len(reached):
        assert cross["mean"] == reached.min()
    else:
        assert np.isnan(cross["mean"])
    text = load_text_values()
    paper = text[
        (text["metric"] == "train_size_to_match_imagenet") & (text["method"] == "contrastive_da")
    ]
    assert cross["paper_mean"] == paper["mean"].iloc[0]
    assert (study.deviations["unit"] == "train images").sum() == 2
    ax = study.figures["cifar10"].axes[0]
    assert _count(ax, "reference") == 2 and _count(ax, "paper_reference") == 2
    assert ax.get_xscale() == "log"
    # ticks at the curves' sizes only, as integers: the crossover row's NaN size adds none
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in sizes]


# ------------------------------------------------ rotated, classifiers, main, comparison


def test_rotated_compares_the_chosen_detector_with_the_text_values() -> None:
    grid = expected_grid(
        classes={"cifar10_rotated": ["airplane", "bird"]},
        seeds=[0, 1],
        variants=[variant("rotation"), variant("contrastive_da")],
        detectors=["ocsvm", "kde"],
    )
    study = build_study("rotated", fake_results(grid, seed=17), grid, options={"detector": "kde"})
    text = load_text_values()
    text = text[text["metric"] == "auroc"].set_index("method")
    chosen = study.table[study.table["detector"] == "kde"].set_index("base_method")
    assert chosen.loc["rotation", "paper_mean"] == text.loc["rotation", "mean"]
    assert chosen.loc["contrastive_da", "paper_mean"] == text.loc["contrastive_da", "mean"]
    assert study.table[study.table["detector"] == "ocsvm"]["paper_mean"].isna().all()
    assert (
        chosen.loc["rotation", "paper_unrotated"]
        == published_main()[("rotation", "kde", "cifar10")][0]
    )
    assert _count(study.figures["auroc"].axes[0], "paper") == 1


@pytest.fixture(scope="module")
def main_case():
    classes = {"cifar10": ["airplane", "automobile", "bird"], "fmnist": ["trouser", "bag"]}
    grid = expected_grid(
        classes=classes,
        seeds=[0, 1, 2],
        variants=[variant("rotation"), variant("contrastive_da")],
        detectors=["ocsvm_linear", "ocsvm", "kde", "gde"],
    )
    results = fake_results(grid, seed=18, drop=4)
    # one (method, detector) never ran at all on fmnist
    results = results[
        ~(
            (results["dataset"] == "fmnist")
            & (results["method"] == "rotation")
            & (results["detector"] == "gde")
        )
    ]
    return grid, results


def test_main_wraps_main_table_and_adds_cells_without_results(main_case) -> None:
    grid, results = main_case
    study = build_study("main", results, grid)
    reference = main_table(
        results, load_published(), seeds=[0, 1, 2], class_counts={"cifar10": 3, "fmnist": 2}
    )
    merged = study.table.merge(
        reference, on=["method", "detector", "dataset"], suffixes=("", "_ref")
    )
    assert np.allclose(merged["mean"], merged["mean_ref"], equal_nan=True)
    never = study.table[
        (study.table["dataset"] == "fmnist")
        & (study.table["method"] == "rotation")
        & (study.table["detector"] == "gde")
    ]
    assert len(never) == 1 and np.isnan(never["mean"].iloc[0])
    assert never["n_missing"].iloc[0] == never["n_expected"].iloc[0] == 2 * 3
    counts = grid.groupby(["method", "detector", "dataset"]).size()
    got = (
        results.groupby(["method", "detector", "dataset"])
        .size()
        .reindex(counts.index, fill_value=0)
    )
    missing = (counts - got).rename("oracle").reset_index()
    check = study.table.merge(missing, on=["method", "detector", "dataset"])
    assert (check["n_missing"] == check["oracle"]).all()
    assert "—" in study.display.to_string()


def test_classifiers_table_uses_table5(main_case) -> None:
    grid, results = main_case
    study = build_study("classifiers", results, grid)
    assert set(study.table["method"]) == {"contrastive_da"}
    assert list(dict.fromkeys(study.table["detector"])) == ["ocsvm_linear", "ocsvm", "kde", "gde"]
    gaussian = load_published("performance_gaussian").set_index(["detector", "dataset"])["mean"]
    for row in study.table[study.table["dataset"] != "mean"].itertuples(index=False):
        assert row.paper_mean == gaussian[(row.detector, row.dataset)]
    ax = study.figures["auroc"].axes[0]
    assert sum(1 for p in ax.patches if p.get_gid() == "ours") == int(
        study.table["mean"].notna().sum()
    )


def test_comparison_keeps_literature_and_fills_our_rows(main_case) -> None:
    grid, results = main_case
    study = build_study("comparison", results, grid)
    pub = load_published("visual_results_comparison")
    literature = study.table[study.table["source"] == "literature"]
    assert len(literature) == int((pub["detector"] == "").sum())
    ours = study.table[study.table["source"] == "ours"]
    assert set(zip(ours["method"], ours["detector"], strict=True)) == {
        ("rotation", "kde"),
        ("contrastive_da", "ocsvm"),
    }
    best = pub[pub["detector"] == ""].groupby("dataset")["mean"].max()
    for row in ours.itertuples(index=False):
        rows = _subset(results, method=row.method, detector=row.detector, dataset=row.dataset)
        assert row.mean == pytest.approx(class_seed_stats(rows)[0])
        assert row.beats_literature == float(row.mean > best[row.dataset])
        paper = pub[(pub["method"] == row.method) & (pub["dataset"] == row.dataset)]["mean"].iloc[0]
        assert row.paper_mean == paper
    assert len(study.deviations) == len(ours)
    assert study.display["Method"].tolist()[-2:] == [
        "Ours: Rotation prediction (KDE)",
        "Ours: Contrastive (DA) (OC-SVM)",
    ]


def test_main_keeps_the_rotation_classifier_rows_and_drops_g() -> None:
    f_rows = expected_grid(
        classes=CLASSES, seeds=[0, 1], variants=[variant("rotnet")], detectors=["kde"]
    )
    rc_rows = expected_grid(
        classes=CLASSES,
        seeds=[0, 1],
        variants=[variant("rotnet")],
        detectors=["rotation_classifier"],
        spaces=["rotation_classifier"],
    )
    g_rows = f_rows.assign(space="g")
    grid = pd.concat([f_rows, rc_rows, g_rows], ignore_index=True)
    study = build_study("main", fake_results(grid, seed=19), grid)
    assert set(study.table["detector"]) == {"kde", "rotation_classifier"}
    published = published_main()
    for row in study.table.itertuples(index=False):
        assert row.paper_mean == published[("rotnet", row.detector, "cifar10")][0]
        rows = _subset(grid, detector=row.detector)
        assert row.n_expected == len(rows[rows["space"] != "g"])
