"""docs/reproduction.md: every full-protocol cell we ran, beside the paper's number.

Reads the runs of ``benchmarks/full_cell.sh`` (``benchmarks/fullcell/*.json``, the
``results.json`` of ``benchmarks/run_record.py``), the queue of runs not made yet
(``benchmarks/fullcell/pending.yaml``) and, when it exists, the JPEG experiment's
``benchmarks/jpeg/summary.json``, and writes one page: a row per score of each cell with the
paper's mean +- std (from :mod:`pipeline_lib.paper.published`), ours, the verdict of
:func:`pipeline_lib.paper.verdict.reproduction_verdict`, what differs from the paper's
setting and the commit that ran it. Regenerate after adding a run::

    python -m pipeline_lib.paper.reproduction

``--check`` exits 1 when the page on disk is not what the files give (the test suite runs
the same comparison).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.paper.protocol import PAPER_PROTOCOL, protocol_differences
from pipeline_lib.paper.published import display_name, load_published
from pipeline_lib.paper.verdict import reproduction_verdict
from pipeline_lib.registry import reads_setting

__all__ = ["build_page", "cell_rows", "main", "paper_value", "score_meaning"]

REPO = Path(__file__).resolve().parents[2]
FULLCELL = Path("benchmarks/fullcell")
JPEG_SUMMARY = Path("benchmarks/jpeg/summary.json")
PAGE = Path("docs/reproduction.md")

#: What a detector key of a run's ``auroc`` measures (before the rotation scores' rename).
_SCORES: dict[str, str] = {
    "kde": "KDE on f (RBF, the paper's gamma)",
    "ocsvm": "OC-SVM on f (RBF, the paper's gamma)",
    "ocsvm_linear": "OC-SVM on f (linear)",
    "gde": "GDE on f (one full-covariance Gaussian)",
    "knn": "kNN on f (cosine)",
    "rotation_p0": "rotation classifier: p(0 | x)",
    "rotation_log_p": "rotation classifier: sum_k log p(k | rot_k x) (Golan et al.)",
    "rotation_released": "rotation classifier: released code's 1 - prod_k p, float32",
}


def score_meaning(detector: str, keys: Sequence[str]) -> tuple[str, str | None, bool]:
    """What a run's score is and which published score it stands beside.

    Parameters
    ----------
    detector : str
        A key of a run's ``auroc``.
    keys : sequence of str
        All keys of that ``auroc``: a run that has ``rotation_log_p`` names the paper's
        sum of p ``rotation_classifier``; an earlier one used that name for the sum of log p.

    Returns
    -------
    label : str
    paper_detector : str or None
        The published detector id to compare with (None: the paper has no such score).
    comparable : bool
        False where the published number is of another score than ours.
    """
    if detector == "rotation_classifier":
        if "rotation_log_p" in keys:
            return "rotation classifier: sum_k p(k | rot_k x) (the paper's)", detector, True
        label = (
            "rotation classifier: sum_k log p(k | rot_k x) (Golan et al.; the paper's score "
            "is sum_k p)"
        )
        return label, detector, False
    return _SCORES.get(detector, display_name("detector", detector)), detector, True


def paper_value(
    dataset: str, inlier: str, method: str, detector: str | None
) -> tuple[float, float] | None:
    """The paper's per-class mean and std (AUC x 100) of a cell, or None if not reported.

    Raises
    ------
    ValueError
        If the published tables give two different values for the cell.
    """
    if detector is None:
        return None
    table = f"per_class_aucs_{dataset}"
    try:
        published = load_published(table)
    except ValueError:  # no per-class table for this data set
        return None
    rows = published[
        (published["inlier"] == inlier)
        & (published["method"] == method)
        & (published["detector"] == detector)
        & (published["metric"] == "auroc")
    ]
    values = {(float(m), float(s)) for m, s in zip(rows["mean"], rows["std"], strict=True)}
    if not values:
        return None
    if len(values) > 1:
        raise ValueError(f"{table}: {dataset}/{inlier}/{method}/{detector} has {sorted(values)}")
    return values.pop()


def _precision(config: Mapping[str, Any], device: str) -> str:
    train = config.get("train") or {}
    if not device.startswith("cuda") or train.get("amp") is None:
        numbers = "float32"
    else:
        numbers = {"bfloat16": "bf16 autocast", "float16": "fp16 autocast"}[train["amp"]]
    step = {
        "compiled": "inductor-compiled, graph-captured step",
        "graph": "graph-captured step",
    }.get(train.get("step_mode") or "auto", "eager or graph step (auto)")
    return f"{numbers}, {step}" if device.startswith("cuda") else numbers


#: Recipe switches added after runs were recorded -> what ran before the switch existed. A
#: recorded config without the key ran that value: a known difference of its recipe version
#: (listed beside the commit), as are data and precision, not a break of the protocol.
SWITCHES_BEFORE: dict[str, Any] = {
    "epoch_order": "permutation",
    "init": "torch",
    "momentum_form": "torch",
}


def _recipe_version(config: Mapping[str, Any], method: str) -> list[str]:
    train = config.get("train") or {}
    return [
        f"recipe then: {key} {former} (now {key} released)"
        for key, former in SWITCHES_BEFORE.items()
        if key not in train and reads_setting(method, key)
    ]


def _data(run: Mapping[str, Any]) -> str:
    source = run.get("data_source")
    return f"data: {source}" if source else "data: as read from data.root (not recorded)"


def cell_rows(run: Mapping[str, Any], *, source: str) -> list[dict[str, Any]]:
    """One row per score of each (data set, class, method, contamination) cell of a run.

    Seeds of one cell within the run are pooled: ours is their mean, with their std
    (``ddof=1``) from two seeds on.
    """
    config = run["config"]
    cells: dict[tuple[str, str, str, float], list[Mapping[str, Any]]] = {}
    for result in run["results"]:
        key = (result["dataset"], result["inlier"], result["method"], result["contamination"])
        cells.setdefault(key, []).append(result)
    rows = []
    for (dataset, inlier, method, contamination), results in cells.items():
        seeds = sorted(result["seed"] for result in results)
        settings = (config.get("datasets") or {}).get(dataset) or {}
        # This page compares single cells: one class and our seed count are no protocol
        # break (the seeds enter the verdict), anything else is.
        breaks = protocol_differences(
            config,
            datasets={dataset: {**settings, "classes": "all"}},
            methods=[method],
            seeds=list(range(PAPER_PROTOCOL["seeds"])),
            contamination=[contamination],
        )
        differences = [
            _data(run),
            _precision(config, results[0].get("device", "cpu")),
            f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} (paper {PAPER_PROTOCOL['seeds']})",
            *_recipe_version(config, method),
            *breaks,
        ]
        keys = list(dict.fromkeys(k for result in results for k in result["auroc"]))
        for detector in keys:
            values = [r["auroc"][detector] for r in results if detector in r["auroc"]]
            label, paper_detector, same_score = score_meaning(detector, keys)
            paper = paper_value(dataset, inlier, method, paper_detector)
            mean = statistics.fmean(values)
            std = statistics.stdev(values) if len(values) > 1 else None
            rows.append(
                {
                    "source": source,
                    "cell": f"{display_name('dataset', dataset)} {inlier}, "
                    f"{display_name('method', method)}",
                    "detector": detector,
                    "score": label,
                    "paper_mean": paper[0] if paper else None,
                    "paper_std": paper[1] if paper else None,
                    "ours_mean": mean,
                    "ours_std": std,
                    "seeds": seeds,
                    "verdict": reproduction_verdict(
                        mean,
                        paper[0] if paper else None,
                        paper[1] if paper else None,
                        std,
                        comparable=same_score and not breaks,
                    ),
                    "differences": differences,
                    "commit": run.get("commit") or "not recorded",
                }
            )
    return rows


def _number(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "-"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return f"{mean:.1f}"
    return f"{mean:.1f} +- {std:.1f}"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a bar would end the cell."""
    return text.replace("|", "\\|")


def _runs_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return ["No full-protocol cell has run yet."]
    lines = [
        "| run | cell | score | paper | ours | verdict | known differences | commit |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        seeds = ", ".join(str(s) for s in row["seeds"])
        ours = f"{_number(row['ours_mean'], row['ours_std'])} (seed {seeds})"
        lines.append(
            f"| `{row['source']}` | {row['cell']} | {_cell(row['score'])} "
            f"| {_number(row['paper_mean'], row['paper_std'])} | {ours} | **{row['verdict']}** "
            f"| {_cell('; '.join(row['differences']))} | `{row['commit'][:10]}` |"
        )
    return lines


def _pending(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    if not entries:
        return ["Nothing is queued."]
    lines = []
    for number, entry in enumerate(entries, start=1):
        cell = entry["cell"]
        values = []
        for detector in entry.get("detectors") or []:
            found = paper_value(cell["dataset"], cell["inlier"], cell["method"], detector)
            shown = _number(*found) if found else "not reported"
            values.append(f"{display_name('detector', detector)} {shown}")
        paper = f" Paper: {', '.join(values)}." if values else ""
        where = (
            f"{display_name('dataset', cell['dataset'])} {cell['inlier']}, "
            f"{display_name('method', cell['method'])}"
        )
        lines.append(f"{number}. {entry['what']} ({where}): {entry['why'].strip()}.{paper}")
    return lines


def _kde_gap(summary: Mapping[str, Any] | None) -> list[str]:
    placeholder = "<!-- The conclusion comes from benchmarks/jpeg/summary.json, generated. -->"
    if summary is None:
        return [
            placeholder,
            "",
            "**Not run yet.** The experiment that asks whether the JPEG copy of CIFAR-10 can "
            "explain the KDE gap has written no `benchmarks/jpeg/summary.json`; its "
            "conclusion will appear here.",
        ]
    lines = [placeholder, ""]
    if summary.get("conclusion"):
        lines.append(str(summary["conclusion"]))
    else:
        lines.append("The JPEG experiment's summary holds no conclusion yet.")
    change = summary.get("predicted_kde_change")
    if change:
        lines += [
            "",
            "| predicted RotNet KDE, lossless minus JPEG copy | central | low | high |",
            "|---|---|---|---|",
            f"| AUC points | {change['central']:+.2f} | {change['low']:+.2f} "
            f"| {change['high']:+.2f} |",
        ]
    if summary.get("command"):
        lines += ["", f"Made by `{summary['command']}`."]
    return lines


def build_page(
    runs: Sequence[tuple[str, Mapping[str, Any]]],
    pending: Sequence[Mapping[str, Any]],
    jpeg: Mapping[str, Any] | None,
) -> str:
    """The page's Markdown from the runs (``(file name, results.json)``), the queue and the
    JPEG summary (None when that experiment has not run)."""
    rows = [row for name, run in runs for row in cell_rows(run, source=name)]
    lines = [
        "# Reproduction status",
        "",
        "<!-- Generated by `python -m pipeline_lib.paper.reproduction` from "
        "benchmarks/fullcell/*.json, benchmarks/fullcell/pending.yaml and "
        "benchmarks/jpeg/summary.json: edit those, not this page. -->",
        "",
        "Every cell of the paper's per-class tables (Sohn et al., ICLR 2021, appendix) that "
        "has run at the full protocol (2,048 epochs, all training images of the class, the "
        "whole test split), one row per score, beside the paper's mean +- std over its 5 "
        "runs. AUCs x 100.",
        "",
        "Verdict: **within** when |ours - paper| <= 2 sqrt(std_ours^2 + std_paper^2), else "
        "**above** or **below**; with one seed std_ours is 0, so the band is 2 std_paper "
        "(`pipeline_lib/paper/verdict.py`). **not comparable**: the paper's number is of "
        "another score or the run leaves the protocol; **no paper value**: the paper does "
        "not report this score for this cell.",
        "",
        "## Full-protocol cells",
        "",
        *_runs_table(rows),
        "",
        "Known differences name the data (`data_source` of the run), the arithmetic of the "
        "training step and the seeds; the commit is the code that ran (`commit` of the run).",
        "",
        "## Pending",
        "",
        "Queued GPU runs, not made yet (`benchmarks/fullcell/pending.yaml`):",
        "",
        *_pending(pending),
        "",
        "## The KDE gap",
        "",
        *_kde_gap(jpeg),
        "",
    ]
    return "\n".join(lines)


def read_inputs(
    root: Path,
) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]], dict[str, Any] | None]:
    """The runs, the queue and the JPEG summary under the repository ``root``."""
    runs = []
    for path in sorted((root / FULLCELL).glob("*.json")):
        run = json.loads(path.read_text())
        if "results" in run and "config" in run:
            runs.append((path.name, run))
    pending_path = root / FULLCELL / "pending.yaml"
    pending = yaml.safe_load(pending_path.read_text()) if pending_path.exists() else []
    jpeg_path = root / JPEG_SUMMARY
    jpeg = json.loads(jpeg_path.read_text()) if jpeg_path.exists() else None
    return runs, pending or [], jpeg


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check`` compare) docs/reproduction.md; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO, help="repository root")
    parser.add_argument("--out", type=Path, default=None, help=f"default ROOT/{PAGE}")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the page differs from the generated one"
    )
    args = parser.parse_args(argv)
    out = args.out or args.root / PAGE
    page = build_page(*read_inputs(args.root))
    if args.check:
        if not out.exists() or out.read_text() != page:
            print(f"{out} is out of date: run python -m pipeline_lib.paper.reproduction")
            return 1
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
