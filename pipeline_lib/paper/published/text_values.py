"""Numbers the paper gives only in its running text, parsed once into ``text_values.csv``.

The paper's figures (batch size, head depth, distribution sets, data efficiency, noisy
training sets) are blank in the LaTeX source; the few numbers they carry are quoted in the
text. This module finds each quoted number by the sentence around it, so a re-parse of the
paper either reproduces ``text_values.csv`` exactly or fails naming the sentence it lost::

    python -m pipeline_lib.paper.published.text_values PAPER.txt pipeline_lib/published

The CSV has the columns of :data:`pipeline_lib.paper.published.COLUMNS`; ``table`` names where
the number comes from (``text_<section label>``), ``paper_representation`` quotes its
sentence and ``paper_classifier`` says what the number measures. Metrics: ``auroc`` (AUC
x 100, the paper does not name the detector, so ``detector`` is empty), ``pearson_r_g`` /
``pearson_r_f`` (Pearson's r of log(MMD of g(f)) with the AUC of g(f) / of f),
``train_size_to_match_imagenet`` (training images a representation needs to match the
ImageNet ResNet-50 baseline).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import COLUMNS
from pipeline_lib.paper.published.latex import paper_and_outdir

__all__ = [
    "TEXT_VALUES",
    "load_text_values",
    "parse_text_values",
    "text_value",
    "write_text_values",
]

#: File name of the parsed text values inside this package.
TEXT_VALUES = "text_values.csv"

_NUM = r"\$?([0-9]+(?:\.[0-9]+)?)\$?"

# (table, method, metric, what, pattern); each pattern has one group per entry of ``method``.
_SENTENCES: tuple[tuple[str, tuple[str, ...], str, str, str], ...] = (
    (
        "text_sec:ablation_distaug",
        ("contrastive_da_hflip",),
        "auroc",
        "CIFAR-10 AUC of contrastive DA with distributions {original, hflip}",
        r"simply adding \$\\mathrm\{hflip\}\$ improves the AUC to " + _NUM,
    ),
    (
        "text_sec:supp_ablation_distribution_augmentation",
        ("rotation",),
        "auroc",
        "randomly rotated CIFAR-10: rotation prediction",
        r"rotation prediction representation drops to " + _NUM + r" AUC",
    ),
    (
        "text_sec:supp_ablation_distribution_augmentation",
        ("contrastive_da",),
        "auroc",
        "randomly rotated CIFAR-10: rotation-augmented contrastive",
        r"not affected by random rotation and achieves " + _NUM + r" AUC",
    ),
    (
        "text_sec:supp_ablation_distribution_augmentation",
        ("contrastive+contrastive_da",),
        "pearson_r_g",
        "Pearson r of log(MMD of g(f)) and the AUC of g(f), batch sizes 32..512, 5 seeds",
        r"Pearson's correlation coefficient, which results in " + _NUM,
    ),
    (
        "text_sec:supp_ablation_distribution_augmentation",
        ("contrastive+contrastive_da",),
        "pearson_r_f",
        "Pearson r of log(MMD of g(f)) and the AUC of f, batch sizes 32..512, 5 seeds",
        r"highly positive correlation of " + _NUM + r" Pearson",
    ),
    (
        "text_sec:supp_ablation_data_efficiency",
        ("contrastive_da", "rotation", "contrastive"),
        "train_size_to_match_imagenet",
        "training images needed to match ImageNet ResNet-50 on CIFAR-10",
        r"ImageNet-pretrained ResNet-50 with only "
        + _NUM
        + r" examples, while rotation prediction loss and vanilla contrastive loss require "
        + _NUM
        + r" and "
        + _NUM
        + r" examples",
    ),
)


def parse_text_values(text: str) -> pd.DataFrame:
    """Find the numbers quoted in the paper's text (see the module docstring).

    Parameters
    ----------
    text : str
        The paper's LaTeX source.

    Returns
    -------
    DataFrame
        Columns :data:`~pipeline_lib.paper.published.COLUMNS`, one row per number, all on
        CIFAR-10 (``dataset="cifar10"``), in the order of the sentences above.

    Raises
    ------
    ValueError
        If a sentence is not found exactly once, naming the sentence.
    """
    flat = re.sub(r"\s+", " ", text)
    records = []
    for table, methods, metric, what, pattern in _SENTENCES:
        matches = list(re.finditer(pattern, flat))
        if len(matches) != 1:
            raise ValueError(
                f"expected one sentence matching {pattern!r} ({what}) in the paper, "
                f"found {len(matches)}"
            )
        match = matches[0]
        quote = match.group(0).replace("$", "").replace("\\mathrm{hflip}", "hflip")
        for method, value in zip(methods, match.groups(), strict=True):
            records.append(
                {
                    "table": table,
                    "dataset": "cifar10",
                    "inlier": "",
                    "method": method,
                    "detector": "",
                    "metric": metric,
                    "mean": float(value),
                    "std": np.nan,
                    "paper_representation": quote,
                    "paper_classifier": what,
                }
            )
    return pd.DataFrame.from_records(records, columns=list(COLUMNS))


def write_text_values(frame: pd.DataFrame, outdir: Path) -> Path:
    """Write ``frame`` to ``outdir/text_values.csv`` (3 decimals: Pearson r has three).

    Parameters
    ----------
    frame : DataFrame
        Output of :func:`parse_text_values`.
    outdir : Path
        Destination folder, created if needed.

    Returns
    -------
    Path
        The file written.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / TEXT_VALUES
    frame.to_csv(path, index=False, float_format="%.3f", lineterminator="\n")
    return path


def load_text_values() -> pd.DataFrame:
    """Load ``text_values.csv`` kept in this package.

    Returns
    -------
    DataFrame
        Columns :data:`~pipeline_lib.paper.published.COLUMNS`; ``mean`` float, ``std`` NaN, the
        rest strings.
    """
    ref = resources.files("pipeline_lib.paper.published").joinpath(TEXT_VALUES)
    with ref.open("r", encoding="utf-8") as handle:
        frame = pd.read_csv(handle, dtype=str, keep_default_na=False)
    frame["mean"] = frame["mean"].astype(float)
    frame["std"] = frame["std"].replace("", np.nan).astype(float)
    return frame


def text_value(metric: str, method: str, *, dataset: str = "cifar10") -> float:
    """One number of ``text_values.csv``, or NaN when the paper quotes none.

    Parameters
    ----------
    metric : str
        E.g. ``"pearson_r_g"``.
    method : str
        The ``method`` id of the row.
    dataset : str, default="cifar10"
        Dataset id.

    Returns
    -------
    float
        The quoted value.
    """
    frame = load_text_values()
    rows = frame[
        (frame["metric"] == metric) & (frame["method"] == method) & (frame["dataset"] == dataset)
    ]
    return float(rows["mean"].iloc[0]) if len(rows) else float("nan")


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: parse PAPER and write OUTDIR/text_values.csv."""
    text, outdir = paper_and_outdir(__doc__, "folder for text_values.csv", argv)
    frame = parse_text_values(text)
    path = write_text_values(frame, outdir)
    print(f"{path}: {len(frame)} rows")


if __name__ == "__main__":
    main()
