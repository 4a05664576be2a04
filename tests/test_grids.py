"""Study grids and representation variants (pipeline_lib.config.grids, config validation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline_lib.config.grids import (
    GridError,
    base_method,
    check_methods,
    study_grids,
    variant_training,
)
from pipeline_lib.config.validate import ConfigError, validate_config
from pipeline_lib.data.split import training_subset
from pipeline_lib.models.representation import METHODS
from pipeline_lib.registry import training_arguments
from pipeline_lib.studies import STUDY_KINDS

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def base_config(**extra):
    config = {
        "datasets": {"digits": {"classes": ["0"]}},
        "methods": ["rotnet"],
        "seeds": [0],
        "detectors": {"ocsvm": {}},
    }
    config.update(extra)
    return config


def test_every_method_of_the_table_is_its_own_base_and_reserved_for_variants() -> None:
    assert [base_method(name, {}) for name in METHODS] == list(METHODS)
    with pytest.raises(GridError, match="a variant may not reuse a method name"):
        check_methods({"methods": ["rotnet"], "variants": {"rotnet": {"method": "rotation"}}})


def test_variant_overrides_only_its_own_keys() -> None:
    config = validate_config(
        base_config(
            variants={"contrastive_bs8": {"method": "contrastive", "train": {"batch_size": 8}}},
            methods=["contrastive_bs8", "contrastive"],
            train={"epochs": 3},
        ),
        SCHEMA,
    )
    variants = config["variants"]
    assert base_method("contrastive_bs8", variants) == "contrastive"
    training = variant_training("contrastive_bs8", config["train"], variants)
    assert training["batch_size"] == 8 and training["epochs"] == 3
    assert variant_training("contrastive", config["train"], variants)["batch_size"] is None
    # The paper's batch size fills in only where the variant leaves it open.
    assert training_arguments("contrastive", config["train"])["batch_size"] == 32
    assert training_arguments("contrastive", training)["batch_size"] == 8


def test_unknown_method_error_lists_variants() -> None:
    config = base_config(
        variants={"rot_h0": {"method": "rotation", "train": {"head_depth": 0}}},
        methods=["rot_h1"],
    )
    with pytest.raises(ConfigError, match=r"'methods\[0\]': 'rot_h1' is not allowed.*rot_h0"):
        validate_config(config, SCHEMA)


def test_variant_may_not_shadow_a_method() -> None:
    config = base_config(variants={"rotnet": {"method": "rotation"}})
    with pytest.raises(ConfigError, match="may not reuse a method name"):
        validate_config(config, SCHEMA)


def test_included_study_file_is_loaded_and_checked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    study = base_config(study={"kind": "contamination"}, splits={"contamination": [0.0, 0.1]})
    Path("contamination.yaml").write_text(yaml.safe_dump(study))
    config = validate_config(base_config(studies=["contamination.yaml"]), SCHEMA)
    grids = study_grids(config, config["studies"])
    assert [(grid.name, grid.kind) for grid in grids] == [
        ("main", "main"),
        ("contamination", "contamination"),
    ]
    assert grids[1].contamination == [0.0, 0.1]


def test_study_file_may_not_change_global_training(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    study = base_config(study={"kind": "head_depth"}, train={"epochs": 1})
    Path("head.yaml").write_text(yaml.safe_dump(study))
    with pytest.raises(ConfigError, match=r"head.yaml: sets 'train'.*global"):
        validate_config(base_config(studies=["head.yaml"]), SCHEMA)


def test_missing_study_file_names_where_it_looked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="no study file 'nope.yaml'"):
        validate_config(base_config(studies=["nope.yaml"]), SCHEMA)


def test_one_data_set_read_two_ways_is_an_error() -> None:
    study = base_config(
        study={"kind": "rotated"},
        datasets={"digits": {"classes": ["0"], "max_train_per_class": 10}},
    )
    with pytest.raises(ConfigError, match="one digits/dataset.npz cannot be both"):
        validate_config(base_config(studies=[study]), SCHEMA)


def test_two_studies_with_one_name_are_an_error() -> None:
    study = base_config(study={"kind": "rotated"})
    with pytest.raises(ConfigError, match=r"study name\(s\) \['rotated'\] used twice"):
        validate_config(base_config(studies=[study, study]), SCHEMA)


def test_paper_config_includes_every_study_kind() -> None:
    config = validate_config(yaml.safe_load((REPO / "config/paper.yaml").read_text()), SCHEMA)
    kinds = {grid.kind for grid in study_grids(config, config["studies"])}
    assert kinds == set(STUDY_KINDS)


def test_training_subset_is_seeded_sorted_and_bounded() -> None:
    index = np.arange(100, 200)
    subset = training_subset(index, 10, seed=3)
    assert len(subset) == 10 and np.all(np.diff(subset) > 0) and set(subset) <= set(index)
    assert np.array_equal(subset, training_subset(index, 10, seed=3))
    assert not np.array_equal(subset, training_subset(index, 10, seed=4))
    assert np.array_equal(training_subset(index, None, seed=3), index)
    assert np.array_equal(training_subset(index, 500, seed=3), index)


def test_study_file_repeating_the_training_need_not_repeat_fuse(
    tmp_path: Path, monkeypatch
) -> None:
    """train.fuse is how many models a job trains: a study file repeating `train` may leave
    it out, but may not set another value (it would do nothing there)."""
    monkeypatch.chdir(tmp_path)
    Path("head.yaml").write_text(
        yaml.safe_dump(base_config(study={"kind": "head_depth"}, train={"epochs": 1}))
    )
    config = validate_config(
        base_config(studies=["head.yaml"], train={"epochs": 1, "fuse": 2}), SCHEMA
    )
    assert config["train"]["fuse"] == 2
    Path("head.yaml").write_text(
        yaml.safe_dump(base_config(study={"kind": "head_depth"}, train={"epochs": 1, "fuse": 3}))
    )
    with pytest.raises(ConfigError, match=r"head.yaml: sets 'train'.*global"):
        validate_config(base_config(studies=["head.yaml"], train={"epochs": 1, "fuse": 2}), SCHEMA)
