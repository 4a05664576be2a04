"""The summary page on a results folder where a few jobs are missing and one study never ran:
missing marks, "not run", and a ranking that leaves incomplete cells out."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.paper.verdict import count_line, verdict_counts
from pipeline_lib.site.sections import data_set_section, files_section, per_class_section
from pipeline_lib.site.summary import (
    RANKED_COLUMNS,
    build_summary,
    missing_cells,
    ranked_deviations,
    summary_html,
)
from pipeline_lib.studies import build_study
from pipeline_lib.studies.files import load_study, write_study
from tests.studies.synth import expected_grid, fake_results, variant

CLASSES = {"cifar10": ["airplane", "automobile", "bird"], "fmnist": ["trouser", "bag"]}


@pytest.fixture(scope="module")
def results_folder(tmp_path_factory) -> tuple[Path, dict, dict, pd.DataFrame, pd.DataFrame]:
    """Two studies written to disk from one results frame with 3 jobs deleted, one absent."""
    out = tmp_path_factory.mktemp("summary")
    grid = expected_grid(
        classes=CLASSES,
        seeds=[0, 1],
        variants=[variant("rotation"), variant("contrastive_da")],
        detectors=["ocsvm_linear", "ocsvm", "kde", "gde"],
        contaminations=[0.0, 0.05],
    )
    results = fake_results(grid, seed=31, drop=3)
    links = {}
    for name, kind in (("main", "main"), ("noise", "contamination")):
        study = build_study(kind, results, grid)
        study.figures = dict(list(study.figures.items())[:1])  # one PNG per study keeps it fast
        links[name] = write_study(study, out, name)
    studies = {name: load_study(out, name) for name in ("main", "noise", "ensembles")}
    return out, studies, links, grid, results


def test_absent_study_is_none_and_reported_not_run(results_folder) -> None:
    out, studies, links, _, _ = results_folder
    assert studies["ensembles"] is None
    page = build_summary(studies, links, relative_to=out)
    assert "| ensembles |  | not run |" in page
    assert "- ensembles: not run (no outputs)" in page
    assert "### ensembles (not run)" in page


def test_missing_cells_carry_their_counts(results_folder) -> None:
    _, studies, links, grid, results = results_folder
    missing = missing_cells(studies)
    main = studies["main"].table
    per_dataset = main[main["dataset"] != "mean"]
    assert int(per_dataset["n_missing"].sum()) == len(grid[grid["contamination"] == 0.0]) - int(
        (results["contamination"] == 0.0).sum()
    )
    assert set(missing["study"]) <= {"main", "noise"}
    assert (missing["n_missing"] > 0).all()
    page = build_summary(studies, links)
    for row in missing.itertuples(index=False):
        assert f"| {row.study} | {row.cell} | missing {row.n_missing}/{row.n_expected} |" in page


def test_ranking_excludes_incomplete_cells_and_orders_by_size(results_folder) -> None:
    _, studies, links, _, _ = results_folder
    ranked = ranked_deviations(studies)
    assert list(ranked.columns) == list(RANKED_COLUMNS)
    all_rows = pd.concat([studies["main"].deviations, studies["noise"].deviations])
    assert len(ranked) == len(all_rows)
    top = ranked[ranked["status"] == "ranked"]
    assert (top["n_missing"] == 0).all()
    assert top["rank"].tolist() == list(range(1, len(top) + 1))
    assert np.all(np.diff(top["deviation"].abs().to_numpy()) <= 0)
    incomplete = ranked[ranked["status"] == "incomplete"]
    assert len(incomplete) == int((all_rows["n_missing"] > 0).sum()) > 0
    assert incomplete["rank"].isna().all()
    page = build_summary(studies, links)
    ranked_part = page.split("## Largest deviations from the paper")[1].split("### Not ranked")[0]
    positions = [ranked_part.index(f"| {item} |") for item in top["item"]]
    assert positions == sorted(positions)
    for item in incomplete["item"]:
        assert f"| {item} |" not in ranked_part
        assert f"| {item} |" in page.split("### Not ranked: cells with missing results")[1]


def test_links_point_at_the_written_files(results_folder) -> None:
    out, studies, links, _, _ = results_folder
    page = build_summary(studies, links, relative_to=out)
    for name in ("main", "noise"):
        for path in links[name]:
            if (
                path.suffix in (".md", ".html", ".csv", ".tex", ".png")
                and "_deviations" not in path.name
            ):
                assert f"]({path.name})" in page
        assert (out / f"{name}.md").exists()
    assert "![main: ours_vs_paper](main_ours_vs_paper.png)" in page


def test_html_variant_has_the_same_sections(results_folder) -> None:
    out, studies, links, _, _ = results_folder
    page = summary_html(studies, links, relative_to=out)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for heading in ("Largest deviations from the paper", "Missing results", "Studies not run"):
        assert f">{heading}</h" in page
    assert '<a href="main.md">md</a>' in page
    assert '<img src="main_ours_vs_paper.png"' in page
    assert "ensembles: not run (no outputs)" in page
    assert page.count("<tr>") > 10


def test_main_table_inline_under_its_protocol_line(results_folder) -> None:
    out, studies, links, _, _ = results_folder
    display = pd.DataFrame(
        {"Representation": ["Rotation", "Contrastive (DA)"], "Detector": ["KDE", "KDE"]}
        | {"CIFAR-10": ["90.1 (n=1)", "92.0 (n=1)"]}
    )
    protocol = ["Protocol differs from the paper's: 20 training epochs (paper 2048)."]
    main = {"table": display, "protocol": protocol, "links": [out / "main_table.md"]}
    page = build_summary(studies, links, relative_to=out, main=main)
    section = page.split("## Main table")[1].split("## Largest deviations")[0]
    assert section.index(protocol[0]) < section.index("| Representation | Detector | CIFAR-10 |")
    for row in display.itertuples(index=False):
        assert f"| {row[0]} | {row[1]} | {row[2]} |" in section
    assert "- Files: [md](main_table.md)" in section
    html_page = summary_html(studies, links, relative_to=out, main=main)
    assert f"<p>{html.escape(protocol[0])}</p>" in html_page
    assert "<td>92.0 (n=1)</td>" in html_page
    # a label then its links, separated: the browser shows "Table: md · html · csv · tex"
    assert 'Table: <a href="main.md">md</a> · <a href="main.html">html</a>' in html_page
    assert "- Table: [md](main.md) · [html](main.html) · [csv](main.csv) · [tex](main.tex)" in page


def test_study_protocol_line_is_written_above_its_table_and_read_back(tmp_path) -> None:
    grid = expected_grid(
        classes={"digits": ["0", "8"]}, seeds=[0], variants=[variant("rotation")], detectors=["kde"]
    )
    study = build_study("main", fake_results(grid, seed=3), grid)
    # digits has no published counterpart: no empty 'ours vs. the paper' chart
    assert study.figures == {}
    assert any("no 'ours vs. the paper' chart" in note for note in study.notes)
    study.protocol = ["Protocol differs from the paper's: 1 seed (paper 5)."]
    write_study(study, tmp_path, "main")
    markdown = (tmp_path / "main.md").read_text()
    assert markdown.index(study.protocol[0]) < markdown.index("| Representation")
    assert "(n=1)" in markdown and "± 0.0" not in markdown
    html_text = (tmp_path / "main.html").read_text()
    assert html_text.index(html.escape(study.protocol[0])) < html_text.index("<table")
    assert load_study(tmp_path, "main").protocol == study.protocol
    page = build_summary({"main": load_study(tmp_path, "main")}, {"main": []})
    assert study.protocol[0] in page.split("### main (main)")[1]


def test_page_opens_with_the_reproduction_count_then_the_protocol_line(results_folder) -> None:
    out, studies, links, _, _ = results_folder
    display = pd.DataFrame({"Representation": ["Rotation"], "Detector": ["KDE"]})
    counts = verdict_counts(["within", "within", "below", "no paper value", "not comparable"])
    protocol = ["Protocol: the paper's (as far as the config says)."]
    main = {"table": display, "protocol": protocol, "count": count_line(counts)}
    page = build_summary(studies, links, relative_to=out, main=main)
    lines = [line for line in page.splitlines() if line.strip()]
    assert lines[1].startswith("2 of 3 published cells reproduced")
    assert "1 below" in lines[1] and "1 more not comparable" in lines[1]
    assert lines[2] == protocol[0]
    html_page = summary_html(studies, links, relative_to=out, main=main)
    assert html_page.index("2 of 3 published cells reproduced") < html_page.index("<table")


def test_count_line_says_not_comparable_for_another_protocol() -> None:
    counts = verdict_counts(["not comparable"] * 3 + ["no paper value"])
    line = count_line(counts, ["20 training epochs (paper 2048)"])
    assert line.startswith("Reproduction: not comparable")
    assert "20 training epochs (paper 2048)" in line and "none of its 3 cells" in line
    assert "reproduced or not" in line and "of 3 published cells reproduced" not in line


def test_rank_plot_under_the_main_table_or_one_sentence_why_not(results_folder) -> None:
    out, studies, links, _, _ = results_folder
    display = pd.DataFrame({"Representation": ["Rotation"], "Detector": ["KDE"]})
    with_plot = {"table": display, "ranks": out / "plots/main_table_ranks.png", "n_datasets": 3}
    page = build_summary(studies, links, relative_to=out, main=with_plot)
    section = page.split("## Main table")[1].split("## Studies")[0]
    assert "![Mean ranks across data sets](plots/main_table_ranks.png)" in section
    assert "No rank plot" not in page
    html_page = summary_html(studies, links, relative_to=out, main=with_plot)
    assert '<img src="plots/main_table_ranks.png"' in html_page
    without = {"table": display, "ranks": None, "n_datasets": 2}
    page = build_summary(studies, links, relative_to=out, main=without)
    section = page.split("## Main table")[1].split("## Studies")[0]
    assert "ranks across data sets need 3 data sets or more; this run has 2." in section
    assert "main_table_ranks" not in page


def test_sections_show_data_sets_tables_and_captioned_figures(results_folder, tmp_path) -> None:
    out, studies, links, _, _ = results_folder
    results = pd.DataFrame(
        {
            "dataset": ["digits"] * 4,
            "inlier": ["0", "1", "0", "1"],
            "contamination": [0.0, 0.0, 0.1, 0.1],
            "fitset": ["train"] * 4,
            "n_fit": [119, 121, 119, 121],
            "n_test": [599, 599, 599, 599],
            "n_test_outliers": [540, 541, 540, 541],
        }
    )
    record = {"dataset": "digits", "n_train": 1198, "n_test": 599, "image_size": [32, 32]}
    data = data_set_section(results, [record])
    (table,) = data.tables
    rows = table.table.set_index("Split")
    assert list(table.table["n_fit (per class)"]) == ["119–121", "119–121"]
    assert set(table.table["n_test (inliers + outliers)"]) == {"599 (58–59 + 540–541)"}
    assert set(table.table["Train / test images"]) == {"1,198 / 599"}
    assert set(table.table["Image size"]) == {"32 × 32"}
    assert any("10% outliers mixed in" in split for split in rows.index)
    # without sizes in the provenance record (an older run), a dash, not an invented number
    assert set(data_set_section(results).tables[0].table["Image size"]) == {"—"}

    per_class = tmp_path / "per_class"
    per_class.mkdir()
    pd.DataFrame({"Class": ["0", "mean"], "Raw / KDE": ["99.0 ± 0.1", "98.0 ± 0.2"]}).to_csv(
        per_class / "digits.csv", index=False
    )
    files = [per_class / f"digits{suffix}" for suffix in (".csv", ".md", ".html", ".tex")]
    bars, roc = tmp_path / "plots" / "per_class_digits.png", tmp_path / "plots" / "roc_digits.png"
    section = per_class_section(
        "digits", files, bars=bars, roc=(roc, "ROC curves on Digits: class 0 as inliers")
    )
    others = files_section([("The tidy table of every job's result", tmp_path / "results.csv")])
    page = summary_html(studies, links, relative_to=tmp_path, sections=[data, section, others])
    assert "<td>98.0 ± 0.2</td>" in page  # the per-class table inline
    assert 'Files: <a href="per_class/digits.md">md</a>' in page  # and its files
    for figure, caption in (
        ("plots/per_class_digits.png", "Per-class AUC on Digits"),
        ("plots/roc_digits.png", "ROC curves on Digits: class 0 as inliers: one curve"),
    ):
        found = re.search(
            rf'<figure><img src="{figure}" alt="([^"]*)"><figcaption>([^<]*)</figcaption>', page
        )
        assert found and found.group(1).startswith(caption), figure
    assert 'The tidy table of every job\'s result: <a href="results.csv">results.csv</a>' in (
        html.unescape(page)
    )
    markdown = build_summary(studies, links, relative_to=tmp_path, sections=[data, section])
    assert markdown.index("## Data sets") < markdown.index("## Per class: Digits")
    assert "| Digits | 2 | 1,198 / 599 | 32 × 32 |" in markdown
