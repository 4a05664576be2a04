"""Published numbers of Sohn et al. (ICLR 2021) and the ids and display names used with them.

The CSV files next to this module were produced once from the paper's LaTeX source by
``python -m pipeline_lib.paper.published.parse_paper PAPER.txt pipeline_lib/published`` and are
kept in the repository; ``tests/test_published.py`` re-parses the paper when it is available
and checks that the files are unchanged.

Every CSV file has the same long format, one row per published number:

``table``
    the paper's table label without ``tab:`` (e.g. ``visual_results_full``).
``dataset``
    dataset id (``cifar10``, ``cifar100``, ``fmnist``, ``catvsdog``, ``celeba``, ``mvtec``)
    or ``mean`` for the paper's "Mean" column (the 5-dataset mean weighted by the number of
    classes, see :data:`PAPER_DATASET_CLASSES`).
``inlier``
    per-class tables: the inlier class name (``mean`` for the class-mean row); MVTec tables:
    the category group (``object``, ``texture``, ``all``); empty elsewhere.
``method``, ``detector``
    representation and one-class classifier ids. Previous works of the comparison table use
    their citation key as ``method`` and an empty ``detector``. In ``supp_ensemble`` the
    ``method`` names the distribution-augmentation set and ``detector`` the aggregation
    (``single_model``: mean +- std of single models; ``ensemble_of_5``: one ensemble of
    5 seeds).
``metric``
    ``auroc`` (image-level ROC AUC x 100) or ``pixel_auroc`` (MVTec localisation).
``mean``, ``std``
    the published value and its standard deviation over 5 runs (NaN where none is given).
``paper_representation``, ``paper_classifier``
    the paper's own row / column labels, LaTeX removed.

Cells printed as ``--`` in the paper have no row.
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd

from pipeline_lib.data import dataset_class_names

__all__ = [
    "CLASS_NAMES",
    "COLUMNS",
    "DATASET_DISPLAY",
    "DETECTOR_DISPLAY",
    "METHOD_DISPLAY",
    "PAPER_DATASET_CLASSES",
    "PUBLISHED_TABLES",
    "display_name",
    "load_published",
]

#: Columns of every published CSV file, in order.
COLUMNS: tuple[str, ...] = (
    "table",
    "dataset",
    "inlier",
    "method",
    "detector",
    "metric",
    "mean",
    "std",
    "paper_representation",
    "paper_classifier",
)

#: Tables kept as ``<table>.csv`` in this package (paper labels without ``tab:``).
PUBLISHED_TABLES: tuple[str, ...] = (
    "visual_results",
    "visual_results_full",
    "performance_gaussian",
    "per_class_aucs_cifar10",
    "per_class_aucs_cifar20",
    "per_class_aucs_fmnist",
    "per_class_aucs_cvd",
    "supp_ensemble",
    "visual_results_comparison",
    "mvtec_results_summary",
    "mvtec_results",
)

#: Number of classes of each data set of the paper's main table; these are the weights of
#: its 5-dataset "Mean" column (Section 4.2: "weighted by the number of classes").
PAPER_DATASET_CLASSES: dict[str, int] = {
    "cifar10": 10,
    "cifar100": 20,
    "fmnist": 10,
    "catvsdog": 2,
    "celeba": 1,
}

#: Inlier class names, in label order, of the data sets with per-class tables (the data
#: readers' own names, so published and measured rows always line up).
CLASS_NAMES: dict[str, tuple[str, ...]] = {
    name: dataset_class_names(name) for name in ("cifar10", "cifar100", "fmnist", "catvsdog")
}

#: Display names of representation ids.
METHOD_DISPLAY: dict[str, str] = {
    "raw": "Raw pixels",
    "resnet18_random": "ResNet-18 (random)",
    "resnet50_imagenet": "ResNet-50 (ImageNet)",
    "rotnet": "RotNet",
    "denoising": "Denoising",
    "rotation": "Rotation prediction",
    "contrastive": "Contrastive",
    "contrastive_da": "Contrastive (DA)",
}

#: Display names of detector ids.
DETECTOR_DISPLAY: dict[str, str] = {
    "ocsvm": "OC-SVM",
    "ocsvm_linear": "OC-SVM (linear)",
    "kde": "KDE",
    "gde": "GDE",
    "knn": "kNN",
    "rotation_classifier": "Rotation classifier",
    "rotation_log_p": "Rotation classifier sum log p (Golan et al.)",
    "rotation_p0": "Rotation classifier p(0|x)",
    "rotation_released": "Rotation classifier, released float32 form",
}

#: Display names of dataset ids (and of the ``mean`` column).
DATASET_DISPLAY: dict[str, str] = {
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100 (20)",
    "fmnist": "Fashion-MNIST",
    "catvsdog": "Cat-vs-Dog",
    "celeba": "CelebA",
    "mnist": "MNIST",
    "digits": "Digits",
    "image_folder": "Image folder",
    "mvtec": "MVTec AD",
    "mean": "Mean",
}

_DISPLAY = {"method": METHOD_DISPLAY, "detector": DETECTOR_DISPLAY, "dataset": DATASET_DISPLAY}


def display_name(kind: str, ident: str) -> str:
    """Return the display name of an id, or the id itself when it has none.

    Parameters
    ----------
    kind : {"method", "detector", "dataset"}
        Which kind of id ``ident`` is.
    ident : str
        The id, e.g. ``"contrastive_da"``.

    Returns
    -------
    str
        The display name, e.g. ``"Contrastive (DA)"``.

    Raises
    ------
    ValueError
        If ``kind`` is not one of the three kinds.
    """
    if kind not in _DISPLAY:
        raise ValueError(f"kind={kind!r} is not one of {sorted(_DISPLAY)}")
    return _DISPLAY[kind].get(ident, ident)


def _read_table(table: str) -> pd.DataFrame:
    ref = resources.files(__package__).joinpath(f"{table}.csv")
    with ref.open("r", encoding="utf-8") as handle:
        frame = pd.read_csv(handle, dtype=str, keep_default_na=False)
    if tuple(frame.columns) != COLUMNS:
        raise ValueError(f"{table}.csv has columns {list(frame.columns)}, expected {list(COLUMNS)}")
    frame["mean"] = frame["mean"].astype(float)
    frame["std"] = frame["std"].replace("", np.nan).astype(float)
    return frame


def load_published(table: str | None = None) -> pd.DataFrame:
    """Load the paper's published numbers as a long data frame.

    Parameters
    ----------
    table : str or None, default=None
        One of :data:`PUBLISHED_TABLES` (e.g. ``"visual_results_full"``); ``None`` loads
        and concatenates all of them.

    Returns
    -------
    DataFrame
        Columns :data:`COLUMNS`. ``mean`` and ``std`` are floats (``std`` NaN where the paper
        gives none); the other columns are strings, ``""`` where empty.

    Raises
    ------
    ValueError
        If ``table`` is not a published table.
    """
    if table is None:
        return pd.concat([_read_table(name) for name in PUBLISHED_TABLES], ignore_index=True)
    if table not in PUBLISHED_TABLES:
        raise ValueError(f"table={table!r} is not one of {list(PUBLISHED_TABLES)}")
    return _read_table(table)
