"""The summary page of a real run, opened in a real headless browser (Debian's chromium).

The tiny config runs sklearn digits, which has no published counterpart: the page must show
the main table inline under the protocol line, readable link texts, and no empty "ours vs.
the paper" chart. CI (``.ci/run``) installs chromium; the test skips, saying why, only where
it can be neither found nor installed.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import sqlite3
import subprocess
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from pipeline_lib.config.validate import validate_config
from pipeline_lib.paper.protocol import protocol_notes
from tests.workflow.conftest import REPO

pytestmark = pytest.mark.workflow


def _chromium() -> str:
    """Path of chromium; installs Debian's package when root with apt-get, else skips."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"],
            capture_output=True,
            timeout=900,
            check=False,
        )
        found = shutil.which("chromium")
        if found:
            return found
    pytest.skip("chromium not found and could not be installed (needs root and apt-get)")


def _browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


class _Text(HTMLParser):
    """Visible text of a DOM, its table rows (cell texts) and the src of every image."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.images: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "title"):
            self._skip += 1
        elif tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title"):
            self._skip -= 1
        elif tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)
            if self._cell is not None:
                self._cell.append(data)


def _store_runs(database: Path) -> dict[str, str]:
    """Active runs of a SQLite MLflow store: run id -> its result key tag."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        rows = connection.execute(
            "SELECT runs.run_uuid, tags.value FROM runs JOIN tags ON tags.run_uuid = "
            "runs.run_uuid WHERE runs.lifecycle_stage = 'active' AND tags.key = ?",
            ("droc.result_key",),
        ).fetchall()
    return dict(rows)


def _cell_anchors(page: str) -> list[tuple[str, str]]:
    """(text, href) of every table cell that is a link to MLflow runs."""
    found = re.findall(r'<td><a href="([^"]+)">([^<]+)</a></td>', page)
    return [(html.unescape(t), html.unescape(h)) for h, t in found if "#/compare-runs" in h]


def test_summary_page_in_a_headless_browser(tiny_run: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    page = tiny_run / "summary/index.html"
    assert page.is_file()
    url = page.resolve().as_uri()

    shot = tmp_path / "summary.png"
    result = _browser(
        chromium, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2400", url
    )
    assert shot.is_file(), result.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("L"))
    assert pixels.shape == (2400, 1280)
    # non-blank: text and table borders, not one flat colour
    assert pixels.std() > 5 and (pixels < 128).mean() > 0.001

    dom = _browser(chromium, tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0 and "<table" in dom.stdout, dom.stderr[-2000:]
    parser = _Text()
    parser.feed(dom.stdout)
    text = re.sub(r"\s+", " ", html.unescape("".join(parser.parts)))

    # the main table inline, every row of the run's own main table, under the protocol line
    config = validate_config(
        yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text()),
        REPO / "workflow/schemas/config.schema.yaml",
    )
    (protocol,) = protocol_notes(config)
    # the page opens with the reproduction count, here "not comparable" (a tiny protocol),
    # then the protocol line
    opening = text.split("droc-bench: the paper's studies beside its published numbers", 1)[1]
    assert opening.lstrip().startswith("Reproduction: not comparable")
    assert opening.index("Reproduction: not comparable") < opening.index(protocol)
    assert opening.index(protocol) < opening.index("Main table")
    main = pd.read_csv(tiny_run / "summary/main_table.csv", dtype=str)
    section = text.split("Main table", 1)[1].split("Largest deviations", 1)[0]
    assert protocol in section
    assert list(main.columns) in parser.rows  # the header, then every row
    for row in main.itertuples(index=False):
        assert list(row) in parser.rows
        assert row[0] in section and row[-1] in section
    assert "(n=1)" not in section  # two seeds: a std over seeds (raw pixels: truly 0)
    # every cell of ours carries its 95 % interval over seeds: "mean ± std [low, high]"
    cells = [c for c in main.drop(columns=["Representation", "Detector"]).to_numpy().ravel()]
    ours = [c for c in cells if isinstance(c, str) and "±" in c and "Δ" not in c]
    assert ours and all(re.search(r"± \d+\.\d \[\d+\.\d, \d+\.\d\]", c) for c in ours)
    # link texts separated, not "mdhtmlcsvtex"
    assert "Table: md · html · csv · tex" in text
    assert "Files: md · html · csv · tex" in text
    assert "mdhtml" not in text
    # each cell of ours links the MLflow runs behind it (2 classes x 2 seeds), and every
    # linked run exists in the run's store and is a job of that cell
    runs = _store_runs(tiny_run / "mlflow/mlflow.db")
    anchors = _cell_anchors(page.read_text())
    assert len(anchors) == len(main)  # one data set: one linked cell per row
    results = pd.read_csv(tiny_run / "summary/results.csv", dtype=str)
    for cell, href in anchors:
        assert cell in ours
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(href).fragment.split("?", 1)[1])
        linked = json.loads(query["runs"][0])
        assert len(linked) == 4 and set(linked) <= set(runs)
        keys = results[results["result_key"].isin([runs[r] for r in linked])]
        assert keys[["method", "detector"]].drop_duplicates().shape[0] == 1
        assert set(keys["contamination"].astype(float)) == {0.0}
    # one data set: no rank plot, one sentence instead
    assert "ranks across data sets need 3 data sets or more; this run has 1." in section
    assert not any("ranks" in src for src in parser.images)
    # each study links its paired tests
    assert "tex · paired tests" in text
    # digits has no published counterpart: no empty "ours vs. the paper" chart
    assert not any("ours_vs_paper" in src for src in parser.images)
    assert "no 'ours vs. the paper' chart" in text
