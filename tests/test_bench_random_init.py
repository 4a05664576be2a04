"""benchmarks/random_init_row.py on a few digits: both initialisers, every class, every detector."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "random_init_row", ROOT / "benchmarks" / "random_init_row.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_random_init_row_scores_every_class_under_both_inits(tmp_path, capsys) -> None:
    script = _script()
    out = tmp_path / "row.json"
    argv = ["--dataset", "digits", "--max-per-class", "12", "--width", "4", "--out", str(out)]
    results = script.main([*argv, "--features", str(tmp_path / "features")])
    first = capsys.readouterr().out
    assert first.count("embedded") == 2 and "detector" in first
    assert json.loads(out.read_text()) == results
    assert set(results["aucs"]) == {"released", "torch"}
    for per_seed in results["aucs"].values():
        aucs = per_seed["0"]
        assert set(aucs) == set(script.DETECTORS)
        for per_class in aucs.values():
            assert len(per_class) == 10 and all(0 <= v <= 100 for v in per_class.values())
    released = np.load(tmp_path / "features" / "digits_released_seed0.npz")["f_test"]
    former = np.load(tmp_path / "features" / "digits_torch_seed0.npz")["f_test"]
    assert released.shape == former.shape and not np.allclose(released, former)
    # The kept features are reused: the same AUCs without embedding again.
    again = script.main([*argv, "--features", str(tmp_path / "features")])
    assert again == results and "embedded" not in capsys.readouterr().out
