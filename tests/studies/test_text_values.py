"""The numbers quoted in the paper's text: the kept CSV equals a fresh parse of the paper."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest

from pipeline_lib.paper.published import COLUMNS
from pipeline_lib.paper.published.text_values import (
    TEXT_VALUES,
    load_text_values,
    main,
    parse_text_values,
    text_value,
    write_text_values,
)
from pipeline_lib.registry import DEFAULT_DISTRIBUTIONS

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paper_text() -> str:
    candidates = [Path(os.environ["DROC_PAPER"])] if os.environ.get("DROC_PAPER") else []
    candidates.append(REPO_ROOT.parent / "shared" / "paper")
    for candidate in candidates:
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
        if candidate.is_dir() and sorted(candidate.glob("*.txt")):
            return sorted(candidate.glob("*.txt"))[0].read_text(encoding="utf-8")
    pytest.skip("paper LaTeX source not found: set DROC_PAPER to the file or its folder")


def test_reparsing_the_paper_reproduces_text_values_csv(paper_text, tmp_path) -> None:
    path = write_text_values(parse_text_values(paper_text), tmp_path)
    kept = resources.files("pipeline_lib.paper.published").joinpath(TEXT_VALUES).read_bytes()
    assert path.read_bytes() == kept


def test_command_line_writes_the_file(paper_text, tmp_path, capsys) -> None:
    paper = tmp_path / "paper.tex"
    paper.write_text(paper_text, encoding="utf-8")
    main([str(paper), str(tmp_path / "out")])
    assert (tmp_path / "out" / TEXT_VALUES).exists()
    assert "8 rows" in capsys.readouterr().out


def test_a_lost_sentence_is_an_error_naming_it(paper_text) -> None:
    broken = paper_text.replace("which results in $0.914$", "which results in a lot")
    with pytest.raises(
        ValueError, match="Pearson r of log\\(MMD of g\\(f\\)\\) and the AUC of g\\(f\\)"
    ):
        parse_text_values(broken)


def test_quoted_values() -> None:
    frame = load_text_values()
    assert tuple(frame.columns) == COLUMNS
    assert (frame["dataset"] == "cifar10").all()
    assert text_value("pearson_r_g", "contrastive+contrastive_da") == 0.914
    assert text_value("pearson_r_f", "contrastive+contrastive_da") == 0.774
    assert text_value("auroc", "rotation") == 60.7
    assert text_value("auroc", "contrastive_da") == 92.4
    assert text_value("auroc", "contrastive_da_hflip") == 90.7
    sizes = frame[frame["metric"] == "train_size_to_match_imagenet"].set_index("method")["mean"]
    assert sizes.to_dict() == {"contrastive_da": 100.0, "rotation": 250.0, "contrastive": 1000.0}
    assert text_value("auroc", "unknown") != text_value("auroc", "unknown")  # NaN


def test_default_distributions_are_the_training_codes() -> None:
    # One statement in the registry: the studies, the trainer and the paper's recipe read it.
    from pipeline_lib.registry import PAPER_RECIPE
    from pipeline_lib.ssl import augment
    from pipeline_lib.ssl.settings import TrainSettings
    from pipeline_lib.studies import distribution_sets, paper

    assert DEFAULT_DISTRIBUTIONS == augment.DEFAULT_DISTRIBUTIONS == ("rot90", "rot180", "rot270")
    assert list(DEFAULT_DISTRIBUTIONS) == PAPER_RECIPE["distributions"]
    # the trainer's default set
    assert TrainSettings.__dataclass_fields__["distributions"].default is DEFAULT_DISTRIBUTIONS
    # the study tables' default set (is_default_variant, the "rotations" set)
    assert paper.DEFAULT_DISTRIBUTIONS is distribution_sets.DEFAULT_DISTRIBUTIONS
    assert paper.DEFAULT_DISTRIBUTIONS is DEFAULT_DISTRIBUTIONS
