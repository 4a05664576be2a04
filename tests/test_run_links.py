"""Links from the main table's cells to their MLflow runs, and none without tracking."""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from pathlib import Path

import pandas as pd
import pytest

from pipeline_lib.site.run_links import (
    LOCAL_UI,
    cell_run_ids,
    main_table_run_links,
    runs_url,
    ui_base,
)
from pipeline_lib.site.summary import build_summary, summary_html


def _results() -> pd.DataFrame:
    rows = []
    for inlier in ("1", "0"):
        for seed in (1, 0):
            for contamination in (0.0, 0.1):
                key = f"digits/{inlier}/contam{contamination:g}/seed{seed}/raw/train/kde"
                rows.append(
                    {
                        "dataset": "digits",
                        "inlier": inlier,
                        "method": "raw",
                        "detector": "kde",
                        "seed": seed,
                        "contamination": contamination,
                        "fitset": "train",
                        "auroc": 90.0,
                        "result_key": key,
                    }
                )
    return pd.DataFrame(rows)


def _logged(results: pd.DataFrame, uri: str = "sqlite:///x/mlflow.db") -> dict:
    return {
        "status": "logged",
        "tracking_uri": uri,
        "experiment_id": "7",
        "run_ids": {key: f"run{i:02d}" for i, key in enumerate(results["result_key"])},
    }


def test_ui_base_of_each_kind_of_store():
    assert ui_base("https://***@mlflow.example.org/") == ("ui", "https://mlflow.example.org/")
    assert ui_base("http://user:pw@host:5000") == ("ui", "http://host:5000")
    assert ui_base("sqlite:////abs/results/mlflow/mlflow.db") == ("ui", LOCAL_UI)
    assert ui_base("file:///abs/mlruns") == ("files", "/abs/mlruns")
    assert ui_base("mlruns") == ("files", "mlruns")


def test_one_run_opens_its_page_several_the_compare_page(tmp_path: Path):
    one = runs_url(["abc"], experiment_id="3", tracking_uri="http://host:5000/")
    assert one == "http://host:5000/#/experiments/3/runs/abc"
    several = runs_url(["a", "b"], experiment_id="3", tracking_uri="http://host:5000")
    base, query = several.split("#/compare-runs?")
    assert base == "http://host:5000/"
    parsed = urllib.parse.parse_qs(query)
    assert json.loads(parsed["runs"][0]) == ["a", "b"]
    assert json.loads(parsed["experiments"][0]) == ["3"]
    # a file store: relative links to the run's (or the experiment's) folder
    store = tmp_path / "mlruns"
    page = tmp_path / "summary"
    uri = store.as_uri()
    assert runs_url(["a"], experiment_id="3", tracking_uri=uri, relative_to=page) == (
        "../mlruns/3/a"
    )
    assert runs_url(["a", "b"], experiment_id="3", tracking_uri=uri, relative_to=page) == (
        "../mlruns/3"
    )
    with pytest.raises(ValueError, match="at least one run"):
        runs_url([], experiment_id="3", tracking_uri=uri)


def test_a_cell_links_the_runs_of_its_classes_and_seeds_of_the_main_setting():
    results = _results()
    logged = _logged(results)
    cells = cell_run_ids(results, logged["run_ids"])
    main = results[results["contamination"] == 0.0].sort_values(["inlier", "seed"])
    expected = [logged["run_ids"][key] for key in main["result_key"]]
    assert cells == {("Raw pixels", "KDE", "Digits"): expected}
    links = main_table_run_links(results, logged)
    (href,) = links.values()
    assert href.startswith(f"{LOCAL_UI}/#/compare-runs?")
    shown = json.loads(urllib.parse.parse_qs(href.split("?", 1)[1])["runs"][0])
    assert shown == expected and len(shown) == 4  # 2 classes x 2 seeds, 0 % outliers only
    # tracking disabled, or a store that was not reached: no links
    assert main_table_run_links(results, None) == {}
    assert main_table_run_links(results, {"status": "failed", "warning": "down"}) == {}


def test_summary_cells_link_their_runs_and_nothing_else():
    results = _results()
    links = main_table_run_links(results, _logged(results, "http://host:5000"))
    ((rep, det, column),) = links
    table = pd.DataFrame({"Representation": [rep], "Detector": [det], column: ["90.0 ± 0.0"]})
    main = {"table": table, "run_links": links}
    page = summary_html({}, {}, main=main)
    anchors = re.findall(r'<td><a href="([^"]+)">90\.0 ± 0\.0</a></td>', page)
    assert len(anchors) == 1 and html.unescape(anchors[0]) == links[(rep, det, column)]
    assert f"[90.0 ± 0.0]({links[(rep, det, column)]})" in build_summary({}, {}, main=main)
    plain = summary_html({}, {}, main={"table": table, "run_links": {}})
    assert "<td>90.0 ± 0.0</td>" in plain and "compare-runs" not in plain
