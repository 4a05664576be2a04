"""benchmarks/noise_studies.py: docs/studies.md shows the tables of the committed run."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from tests.benchmark_scripts import load_benchmark

REPO = Path(__file__).resolve().parents[1]


def _script():
    return load_benchmark("noise_studies.py")


def _block(script) -> str:
    text = (REPO / "docs/studies.md").read_text()
    start = text.index(script.BEGIN) + len(script.BEGIN)
    return text[start : text.index(script.END, start)].strip()


def test_studies_doc_block_is_the_committed_run() -> None:
    script = _script()
    contamination, semi, run = script.read_committed()
    block = _block(script)
    assert block == script.render(contamination, semi, run)
    assert f"({run['wall_s'] / 60:.0f} min wall on" in block

    # one cell recomputed from the CSV: CIFAR-10, random ResNet-18, KDE, 10 % outliers
    row = contamination[
        (contamination["dataset"] == "cifar10")
        & (contamination["method"] == "resnet18_random")
        & (contamination["detector"] == "kde")
        & (contamination["fitset"] == "train")
        & (contamination["contamination"] == contamination["contamination"].max())
    ].iloc[0]
    line = next(
        line
        for line in block.splitlines()
        if line.startswith("| CIFAR-10 | ResNet-18 (random) | KDE |")
    )
    assert line.rstrip(" |").endswith(f"{row['mean']:.1f} ± {row['std']:.1f}")

    # both data sets, both representations, all four detectors, every fit set
    assert set(contamination["dataset"]) == set(semi["dataset"]) == {"fmnist", "cifar10"}
    assert set(contamination["detector"]) == {"ocsvm", "ocsvm_linear", "kde", "gde"}
    assert set(semi["fitset"]) >= {"train"} and any(f.startswith("clean") for f in semi["fitset"])


def test_every_figure_the_doc_shows_is_committed() -> None:
    script = _script()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", _block(script))
    kept = sorted(path.name for path in script.FIGURES.glob("*.png"))
    assert [Path(link).name for link in links] == kept
    for link in links:
        assert (REPO / "docs" / link).is_file(), link
    for study, frame in zip(script.STUDIES, script.read_committed()[:2], strict=True):
        for dataset in pd.unique(frame["dataset"]):
            assert any(name.startswith(f"{study}_{dataset}") for name in kept), (study, dataset)
