"""benchmarks/denoising/results.py: the CSV it keeps and the table it writes into the doc."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def results():
    return load_benchmark("denoising/results.py", "denoising_results")


def _summary(tmp_path: Path) -> Path:
    """A run's record (benchmarks/run_record.py): 2 classes x 2 seeds of random weights, the
    recipe, a variant."""
    config = {
        "experiment": "toy",
        "datasets": {"cifar10": {"classes": ["automobile", "horse"]}},
        "methods": ["resnet18_random", "denoising", "denoising_spatial"],
        "variants": {
            "denoising_spatial": {"method": "denoising", "train": {"denoising_decoder": "spatial"}}
        },
        "seeds": [0, 1],
        "train": {"epochs": 10},
        "embed": {"width": 16},
    }
    base = {"resnet18_random": 50.0, "denoising": 60.0, "denoising_spatial": 54.0}
    jobs = []
    for c, inlier in enumerate(["automobile", "horse"]):
        for seed in (0, 1):
            for method, auc in base.items():
                trained = method != "resnet18_random"
                jobs.append(
                    {
                        "dataset": "cifar10",
                        "inlier": inlier,
                        "seed": seed,
                        "method": method,
                        # class c adds 4 c, seed 1 adds 2: per-seed class means differ by 2
                        "auroc": {"ocsvm": auc + 4 * c + 2 * seed, "kde": auc - 1},
                        "training": {"first_loss": 0.1, "last_loss": 0.05} if trained else {},
                    }
                )
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"config": config, "results": jobs}))
    return path


def test_table_holds_means_over_seeds_and_classes_and_gains(results, tmp_path) -> None:
    frame = results.collect([_summary(tmp_path)])
    assert len(frame) == 2 * 2 * 3 * 2  # classes x seeds x methods x detectors
    assert set(frame["reading"]) == {"", "recipe", "denoising_decoder: spatial"}
    table = results.render(frame)
    assert table.startswith("`toy`. Protocol differs from the paper's: 10 training epochs")
    rows = {line.split(" | ")[0]: line.split(" | ") for line in table.splitlines()}
    recipe = rows["| `denoising`"]
    # automobile: seeds 60 and 62; horse: 64 and 66; means over classes and seeds
    assert recipe[1:7] == [
        "recipe",
        "61.0 (60.0, 62.0)",
        "65.0 (64.0, 66.0)",
        "63.0",
        "59.0",
        "+10.0 / +10.0",
    ]
    assert rows["| `denoising_spatial`"][6] == "+4.0 / +4.0"
    assert rows["| `resnet18_random`"][6] == ""
    # the paper's row comes from the published per-class table, not from this script
    assert rows["| paper, Table 7"][2:4] == ["92.4", "91.2"]
    assert rows["| `denoising_spatial`"][1] == "denoising_decoder: spatial"


def test_the_doc_table_is_the_committed_csv(results) -> None:
    """docs/denoising.md holds exactly what the script renders from results.csv."""
    text = results.DOC.read_text()
    start = text.index(results.BEGIN) + len(results.BEGIN)
    assert text[start : text.index(results.END)] == "\n" + results.render(results.read_csv()) + "\n"
