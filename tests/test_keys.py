"""The job identity: one key gives the path the rules write and the record columns."""

from __future__ import annotations

import pytest

from pipeline_lib.config.keys import KEY_COLUMNS, ResultKey, contamination_text
from pipeline_lib.data import DATASETS


def test_path_is_the_layout_the_rules_write() -> None:
    key = ResultKey("cifar10", "airplane", 0.1, 3, "rotnet", "train", "kde")
    assert key.path() == "cifar10/airplane/contam0.1/seed3/rotnet/train/kde/result.json"
    assert key.path("scores.npz").endswith("/rotnet/train/kde/scores.npz")
    g = ResultKey("cifar10", "airplane", 0.0, 3, "rotnet", "train", "kde", space="g")
    assert g.folder() == "cifar10/airplane/contam0/seed3/rotnet/train/g/kde"


@pytest.mark.parametrize(
    "key",
    [
        ResultKey("digits", "8", 0.1, 1, "raw", "clean20", "ocsvm_linear"),
        ResultKey("digits", "0", 0.0, 0, "contrastive_bs32", "train", "gde", space="g"),
        ResultKey("digits", "0", 0.05, 2, "rotnet", "train", "rotation_p0", "rotation_classifier"),
    ],
)
def test_from_path_inverts_path(key: ResultKey) -> None:
    assert ResultKey.from_path(key.path()) == key
    assert ResultKey.from_path(f"/scratch/run/{key.folder()}") == key
    # As seen from the checkout: the experiment's folder results/<experiment>/ in front.
    assert ResultKey.from_path(f"results/droc-demo/{key.path()}") == key


def test_data_set_folders_never_meet_the_other_outputs() -> None:
    """A data set's folder lies beside the run's other top-level folders (the rules':
    summary/, logs/, ...) in the experiment's folder, so no data set id may be one of them."""
    others = {"summary", "studies", "logs", "benchmarks", "mlflow", "mvtec", "deploy"}
    assert not others & set(DATASETS)


def test_keys_from_wildcard_text_and_numbers_are_equal() -> None:
    text = ResultKey.from_wildcards(
        {"dataset": "d", "inlier": "1", "contamination": "0.1", "seed": "2", "method": "m"},
        fitset="train",
        detector="kde",
    )
    assert text == ResultKey("d", 1, 0.1, 2, "m", "train", "kde")
    assert text.record() == {
        "dataset": "d",
        "inlier": "1",
        "contamination": 0.1,
        "seed": 2,
        "method": "m",
        "fitset": "train",
        "detector": "kde",
        "space": "f",
    }
    assert list(text.record())[: len(KEY_COLUMNS)] == list(KEY_COLUMNS)


def test_contamination_is_compared_as_its_path_text() -> None:
    # 0.1 computed two ways differs in the last bit; the path (and so the job) is the same.
    assert 0.1 * 3 != 0.3
    assert ResultKey("d", "1", 0.1 * 3, 0, "m", "f", "k") == ResultKey(
        "d", "1", 0.3, 0, "m", "f", "k"
    )
    assert contamination_text(0.0) == "0" and contamination_text("0.10") == "0.1"


def test_bad_keys_name_the_problem() -> None:
    with pytest.raises(ValueError, match="space 'h'"):
        ResultKey("d", "1", 0.0, 0, "m", "train", "kde", space="h")
    with pytest.raises(ValueError, match="inlier 'a/b'"):
        ResultKey("d", "a/b", 0.0, 0, "m", "train", "kde")
    with pytest.raises(ValueError, match="not a result path"):
        ResultKey.from_path("digits/0/seed1/raw/train/kde/result.json")
    with pytest.raises(ValueError, match=r"needs \['fitset', 'detector'\]"):
        ResultKey.from_wildcards(
            {"dataset": "d", "inlier": "1", "contamination": "0", "seed": "0", "method": "m"}
        )


def test_model_folder_is_the_split_and_method_of_every_space() -> None:
    f = ResultKey("digits", "0", 0.1, 1, "contrastive", "clean20", "kde")
    g = ResultKey("digits", "0", 0.1, 1, "contrastive", "train", "gde", space="g")
    assert f.model_folder() == g.model_folder() == "digits/0/contam0.1/seed1/contrastive"
    assert ResultKey.from_path(g.path()).model_folder() == g.model_folder()
