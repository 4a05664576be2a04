"""Parse the result tables of the paper's LaTeX source into long-format CSV files.

Run once; the CSV files are kept in the repository::

    python -m pipeline_lib.paper.published.parse_paper PAPER.txt pipeline_lib/published

Cells look like ``92.5{\\scriptsize$\\pm0.6$}``, possibly wrapped in ``\\textbf{...}`` or
braces; ``--`` marks a missing number (no row is written for it). ``\\multicolumn`` cells are
repeated over the columns they span, and an empty (or citation-only) first cell continues the
row label above it, which covers ``\\multirow``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from pipeline_lib.paper.published import CLASS_NAMES, COLUMNS, PUBLISHED_TABLES
from pipeline_lib.paper.published.latex import (
    clean_label,
    extract_tabular,
    paper_and_outdir,
    parse_cell,
    split_rows,
)

__all__ = [
    "check_main_in_full",
    "clean_label",
    "extract_tabular",
    "parse_cell",
    "parse_paper",
    "split_rows",
    "write_tables",
]

DATASETS: dict[str, str] = {
    "cifar-10": "cifar10",
    "cifar-100": "cifar100",
    "cifar-20": "cifar100",
    "f-mnist": "fmnist",
    "fashion mnist": "fmnist",
    "cat-vs-dog": "catvsdog",
    "celeba": "celeba",
    "mean": "mean",
}

REPRESENTATIONS: dict[str, str] = {
    "resnet-18 (random)": "resnet18_random",
    "resnet-50 (imagenet)": "resnet50_imagenet",
    "rotnet": "rotnet",
    "denoising": "denoising",
    "rotation prediction": "rotation",
    "rot. prediction": "rotation",
    "contrastive": "contrastive",
    "contrastive (da)": "contrastive_da",
}

CLASSIFIERS: dict[str, str] = {
    "oc-svm": "ocsvm",
    "oc-svm (kernel)": "ocsvm",
    "oc-svm (linear)": "ocsvm_linear",
    "kde": "kde",
    "gde": "gde",
    "rotation classifier": "rotation_classifier",
    "rot. cls": "rotation_classifier",
}

# Columns of tab:supp_ensemble: accumulated distribution-augmentation sets on CIFAR-10.
ENSEMBLE_SETS: dict[str, str] = {
    "+hflip,+rot90": "contrastive_da_hflip_rot90",
    "+rot90,hflip": "contrastive_da_rot90hflip",
    "+rot180": "contrastive_da_rot180",
    "+rot180,hflip": "contrastive_da_rot180hflip",
    "+rot270": "contrastive_da_rot270",
    "ensemble of 5": "contrastive_da_ensemble_of_sets",
}
ENSEMBLE_ROWS: dict[str, str] = {
    "single model": "single_model",
    "ensemble of 5 models": "ensemble_of_5",
}

# MVTec columns (labels after clean_label) -> (method, detector); "†" marks KDE in the paper.
MVTEC_METHODS: dict[str, tuple[str, str]] = {
    "rotnet": ("rotnet", "rotation_classifier"),
    "rotnet†": ("rotnet", "kde"),
    "rotnet + kde": ("rotnet", "kde"),
    "rotnet (mlp head)†": ("rotation", "kde"),
    "rotnet (mlp head) + kde": ("rotation", "kde"),
    "vanilla clr†": ("contrastive", "kde"),
    "vanilla contrastive": ("contrastive", "kde"),
    "distaug clr†": ("contrastive_da", "kde"),
    "distaug contrastive": ("contrastive_da", "kde"),
    "cavga-r_u": ("cavga_ru", ""),
}
MVTEC_METRICS: dict[str, str] = {"detection": "auroc", "localization": "pixel_auroc"}

PER_CLASS_DATASETS: dict[str, str] = {
    "per_class_aucs_cifar10": "cifar10",
    "per_class_aucs_cifar20": "cifar100",
    "per_class_aucs_fmnist": "fmnist",
    "per_class_aucs_cvd": "catvsdog",
}


def _lookup(mapping: dict[str, str], label: str, what: str) -> str:
    key = label.lower()
    if key not in mapping:
        raise ValueError(f"unknown {what} label {label!r}; known: {sorted(mapping)}")
    return mapping[key]


def _record(
    table: str,
    dataset: str,
    method: str,
    detector: str,
    value: tuple[float, float | None],
    representation: str,
    classifier: str,
    *,
    inlier: str = "",
    metric: str = "auroc",
) -> dict[str, object]:
    mean, std = value
    return {
        "table": table,
        "dataset": dataset,
        "inlier": inlier,
        "method": method,
        "detector": detector,
        "metric": metric,
        "mean": mean,
        "std": std,
        "paper_representation": representation,
        "paper_classifier": classifier,
    }


def _parse_results(table: str, rows: Sequence[tuple[str, ...]]) -> list[dict[str, object]]:
    """Representation x classifier x datasets (visual_results[_full], performance_gaussian)."""
    header = rows[0]
    if clean_label(header[0]).lower() != "representation":
        raise ValueError(f"table {table!r}: unexpected header {header!r}")
    datasets = [_lookup(DATASETS, clean_label(cell), "dataset") for cell in header[2:]]
    records, representation = [], ""
    for row in rows[1:]:
        label = clean_label(row[0])
        representation = label or representation
        if not representation:
            raise ValueError(f"table {table!r}: row {row!r} has no representation")
        classifier = clean_label(row[1])
        method = _lookup(REPRESENTATIONS, representation, "representation")
        detector = _lookup(CLASSIFIERS, classifier, "classifier")
        for dataset, cell in zip(datasets, row[2:], strict=True):
            value = parse_cell(cell)
            if value is not None:
                records.append(
                    _record(table, dataset, method, detector, value, representation, classifier)
                )
    return records


def _class_name(dataset: str, label: str) -> str:
    if label == "mean":
        return "mean"
    names = CLASS_NAMES[dataset]
    if label.isdigit():
        index = int(label)
        if index >= len(names):
            raise ValueError(f"class index {index} out of range for dataset {dataset!r}")
        return names[index]
    if label not in names:
        raise ValueError(f"class label {label!r} is not a class of dataset {dataset!r}")
    return label


def _parse_per_class(table: str, rows: Sequence[tuple[str, ...]]) -> list[dict[str, object]]:
    dataset = PER_CLASS_DATASETS[table]
    representations = [clean_label(cell) for cell in rows[0][1:]]
    classifiers = [clean_label(cell) for cell in rows[1][1:]]
    if len(representations) != len(classifiers):
        raise ValueError(f"table {table!r}: header rows have different widths")
    columns = [
        (
            _lookup(REPRESENTATIONS, rep, "representation"),
            _lookup(CLASSIFIERS, clf, "classifier"),
            rep,
            clf,
        )
        for rep, clf in zip(representations, classifiers, strict=True)
    ]
    records = []
    for row in rows[2:]:
        inlier = _class_name(dataset, clean_label(row[0]))
        for (method, detector, rep, clf), cell in zip(columns, row[1:], strict=True):
            value = parse_cell(cell)
            if value is not None:
                records.append(
                    _record(table, dataset, method, detector, value, rep, clf, inlier=inlier)
                )
    return records


def _parse_ensemble(table: str, rows: Sequence[tuple[str, ...]]) -> list[dict[str, object]]:
    headers = [clean_label(cell) for cell in rows[0][1:]]
    methods = [_lookup(ENSEMBLE_SETS, label, "augmentation set") for label in headers]
    records = []
    for row in rows[1:]:
        row_label = clean_label(row[0])
        detector = _lookup(ENSEMBLE_ROWS, row_label, "ensemble row")
        for method, header, cell in zip(methods, headers, row[1:], strict=True):
            value = parse_cell(cell)
            if value is not None:
                records.append(
                    _record(table, "cifar10", method, detector, value, header, row_label)
                )
    return records


def _parse_comparison(
    table: str, rows: Sequence[tuple[str, ...]], full: Sequence[dict[str, object]]
) -> list[dict[str, object]]:
    datasets = [_lookup(DATASETS, clean_label(cell), "dataset") for cell in rows[0][1:]]
    records = []
    for row in rows[1:]:
        label = clean_label(row[0])
        values = [parse_cell(cell) for cell in row[1:]]
        if label.lower().startswith("ours:"):
            representation = label.split(":", 1)[1].strip()
            method = _lookup(REPRESENTATIONS, representation, "representation")
            detector = _infer_detector(method, datasets, values, full)
            classifier = ""
        else:
            # previous work: \citet{key}, maybe with a dagger (test-time augmentation)
            method, detector, representation, classifier = label.rstrip("†"), "", label, ""
        for dataset, value in zip(datasets, values, strict=True):
            if value is not None:
                records.append(
                    _record(table, dataset, method, detector, value, representation, classifier)
                )
    return records


def _infer_detector(
    method: str,
    datasets: Sequence[str],
    values: Sequence[tuple[float, float | None] | None],
    full: Sequence[dict[str, object]],
) -> str:
    """Find the detector whose full-table row shows exactly ``values`` (the paper omits it)."""
    candidates = []
    for detector in sorted({str(r["detector"]) for r in full if r["method"] == method}):
        cells = {
            r["dataset"]: (r["mean"], r["std"])
            for r in full
            if r["method"] == method and r["detector"] == detector
        }
        if all(v is None or cells.get(d) == v for d, v in zip(datasets, values, strict=True)):
            candidates.append(detector)
    if len(candidates) != 1:
        raise ValueError(
            f"cannot identify the detector of {method!r} from its values: candidates {candidates}"
        )
    return candidates[0]


def _parse_mvtec(
    table: str, rows: Sequence[tuple[str, ...]], n_header: int
) -> list[dict[str, object]]:
    width = len(rows[0])
    headers = [
        " ".join(part for part in (clean_label(r[col]) for r in rows[:n_header]) if part)
        for col in range(1, width)
    ]
    columns = [MVTEC_METHODS.get(h.lower()) for h in headers]
    unknown = [h for h, c in zip(headers, columns, strict=True) if c is None]
    if unknown:
        raise ValueError(f"table {table!r}: unknown MVTec column labels {unknown}")
    records = []
    for row in rows[n_header:]:
        label = clean_label(row[0])
        words = label.lower().split(" on ")
        metric = _lookup(MVTEC_METRICS, words[0], "MVTec metric")
        group = words[1] if len(words) > 1 else "all"
        if group not in ("object", "texture", "all"):
            raise ValueError(f"table {table!r}: unknown MVTec category group {group!r}")
        for (method, detector), header, cell in zip(columns, headers, row[1:], strict=True):
            value = parse_cell(cell)
            if value is not None:
                records.append(
                    _record(
                        table,
                        "mvtec",
                        method,
                        detector,
                        value,
                        header,
                        label,
                        inlier=group,
                        metric=metric,
                    )
                )
    return records


def _frame(records: Sequence[dict[str, object]]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    key = ["dataset", "inlier", "method", "detector", "metric"]
    duplicated = frame.duplicated(key)
    if duplicated.any():
        raise ValueError(
            f"duplicate published entries: {frame.loc[duplicated, key].to_dict('records')}"
        )
    return frame


def check_main_in_full(main: pd.DataFrame, full: pd.DataFrame) -> None:
    """Check that every number of the main table appears identically in the full table.

    Parameters
    ----------
    main, full : DataFrame
        The parsed ``visual_results`` and ``visual_results_full`` tables.

    Raises
    ------
    ValueError
        Naming the first entry that is missing from ``full`` or differs.
    """
    key = ["dataset", "method", "detector"]
    merged = main.merge(full, on=key, how="left", suffixes=("", "_full"), indicator=True)
    missing = merged[merged["_merge"] != "both"]
    if len(missing):
        raise ValueError(
            f"main-table entries missing from the full table: {missing[key].to_dict('records')}"
        )
    same_std = (merged["std"] == merged["std_full"]) | (
        merged["std"].isna() & merged["std_full"].isna()
    )
    differ = merged[(merged["mean"] != merged["mean_full"]) | ~same_std]
    if len(differ):
        raise ValueError(f"main and full tables disagree on {differ[key].to_dict('records')}")


def parse_paper(text: str) -> dict[str, pd.DataFrame]:
    """Parse every published result table of the paper's LaTeX source ``text``.

    Returns
    -------
    dict of str to DataFrame
        Table name (label without ``tab:``, see ``PUBLISHED_TABLES``) to a long frame with
        columns ``COLUMNS``.

    Raises
    ------
    ValueError
        If a table is missing, a label is unknown, a cell does not parse, or the main table
        disagrees with the full table.
    """
    records: dict[str, list[dict[str, object]]] = {}
    simple: dict[str, Callable[[str, Sequence[tuple[str, ...]]], list[dict[str, object]]]] = {
        "visual_results": _parse_results,
        "visual_results_full": _parse_results,
        "performance_gaussian": _parse_results,
        "supp_ensemble": _parse_ensemble,
        **{name: _parse_per_class for name in PER_CLASS_DATASETS},
    }
    for name, parser in simple.items():
        records[name] = parser(name, split_rows(extract_tabular(text, name)))
    records["visual_results_comparison"] = _parse_comparison(
        "visual_results_comparison",
        split_rows(extract_tabular(text, "visual_results_comparison")),
        records["visual_results_full"],
    )
    records["mvtec_results_summary"] = _parse_mvtec(
        "mvtec_results_summary", split_rows(extract_tabular(text, "mvtec_results_summary")), 1
    )
    records["mvtec_results"] = _parse_mvtec(
        "mvtec_results", split_rows(extract_tabular(text, "mvtec_results")), 2
    )
    tables = {name: _frame(records[name]) for name in PUBLISHED_TABLES}
    check_main_in_full(tables["visual_results"], tables["visual_results_full"])
    return tables


def write_tables(tables: dict[str, pd.DataFrame], outdir: Path) -> list[Path]:
    """Write each table to ``outdir/<name>.csv``.

    Parameters
    ----------
    tables : dict of str to DataFrame
        Output of :func:`parse_paper`.
    outdir : Path
        Destination folder, created if needed.

    Returns
    -------
    list of Path
        The files written, in ``tables`` order.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in tables.items():
        path = outdir / f"{name}.csv"
        frame.to_csv(path, index=False, float_format="%.1f", lineterminator="\n")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: parse PAPER and write the CSV files into OUTDIR."""
    text, outdir = paper_and_outdir(__doc__, "folder for the <table>.csv files", argv)
    tables = parse_paper(text)
    for path in write_tables(tables, outdir):
        print(f"{path}: {len(tables[path.stem])} rows")


if __name__ == "__main__":
    main()
