"""Every detector and rotation score of a full-protocol cell, recomputed on the CPU from the
features and logits the device run brought back.

``benchmarks/full_cell.sh`` hands back ``<job>.features.npz`` (``f_train``, ``f_test`` as
float16, ``is_outlier``) and, for rotation models, ``<job>.rotation.npz`` (the rotation
logits of the four rotated views of every test and training image, float32). From them,
without the model or a GPU, this scores:

- KDE on f at gamma scales 1, 3, 10 (the paper's) and 30 (``gamma = scale / (d Var)``);
- the RBF OC-SVM (the paper's gamma), GDE and 1-NN, all with the library's detectors
  (:func:`pipeline_lib.detection.evaluate.evaluate_detector`);
- from the logits: ``p(0 | x)``; ``sum_k log p(k | rot_k x)`` in float64 (Golan et al.'s
  score); the released code's ``1 - exp(sum_k log p)`` in float32, whose product rounds
  to 0 for confident outliers, so its scores tie (the ties are counted); and
  ``sum_k p(k | rot_k x)``, the paper's Table 1 rotation-classifier score.

Each AUC stands beside the paper's per-class value where the paper reports one (looked up
in :mod:`pipeline_lib.paper.published`) with the verdict of
:func:`pipeline_lib.paper.verdict.reproduction_verdict` (one seed), and beside the device
run's own AUC where ``--results`` gives it (the stored features are float16, so the
feature detectors may differ from the device's float32 run in the second decimal).
Writes ``OUT/<job>.detectors.md`` and ``OUT/<job>.detectors.json``; keep them out of
``benchmarks/fullcell/*.json``, which holds runs only.

Usage::

    python benchmarks/fullcell_detectors.py \\
        --features OUT/cifar10-automobile-c0-s0-rotnet.features.npz \\
        --results OUT/results.json --out benchmarks/fullcell/detectors
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: (row key, library detector, parameters, what it is, published detector id or None).
FEATURE_ROWS: tuple[tuple[str, str, dict[str, Any], str, str | None], ...] = (
    ("kde_gamma1", "kde", {"gamma_scale": 1.0}, "KDE on f, gamma scale 1", None),
    ("kde_gamma3", "kde", {"gamma_scale": 3.0}, "KDE on f, gamma scale 3", None),
    ("kde", "kde", {"gamma_scale": 10.0}, "KDE on f, gamma scale 10 (the paper's)", "kde"),
    ("kde_gamma30", "kde", {"gamma_scale": 30.0}, "KDE on f, gamma scale 30", None),
    ("ocsvm", "ocsvm", {}, "OC-SVM on f, RBF, the paper's gamma", "ocsvm"),
    ("gde", "gde", {}, "GDE on f (one full-covariance Gaussian)", "gde"),
    ("knn", "knn", {"n_neighbors": 1}, "1-NN on f (cosine)", "knn"),
)

#: The device run's AUC keys recorded before the rotation scores were renamed: the same
#: numbers as these rows.
DEVICE_KEYS = {"rotation_log_p": ("rotation_log_p", "rotation_classifier")}

_JOB = re.compile(
    r"^(?P<dataset>[^-]+)-(?P<inlier>.+)-c(?P<contamination>[^-]+)-s(?P<seed>\d+)-(?P<method>\w+)$"
)


def tie_count(scores: np.ndarray) -> int:
    """How many entries share their value with at least one other entry."""
    _, counts = np.unique(scores, return_counts=True)
    return int(counts[counts > 1].sum())


def rotation_scores_from_logits(logits: np.ndarray) -> dict[str, np.ndarray]:
    """Normality scores (higher = more normal) from ``(n, 4, 4)`` rotation logits.

    ``[i, k, y]`` is the logit of class ``y`` for image ``i`` rotated ``k`` times
    (:func:`pipeline_lib.ssl.rotation.rotation_logits_of_images`).

    Returns
    -------
    dict of str to ndarray of shape (n,)
        ``rotation_p0``: ``p(0 | x)`` (float64); ``rotation_log_p``: ``sum_k log p(k |
        rot_k x)`` (float64); ``rotation_sum_p``: ``sum_k p(k | rot_k x)`` (float64);
        ``rotation_released``: ``-(1 - exp(sum_k log p))`` computed in float32 as the
        released code does (``util/train.py``: softmax, log, sum, exp, then ``1 - dscore``
        as the anomaly score), negated exactly so that it is a normality score.
    """
    logits = np.asarray(logits)
    if logits.ndim != 3 or logits.shape[1:] != (4, 4):
        raise ValueError(f"rotation logits must have shape (n, 4, 4), got {logits.shape}")
    wide = logits.astype(np.float64)
    wide = wide - wide.max(axis=2, keepdims=True)
    log_p = wide - np.log(np.exp(wide).sum(axis=2, keepdims=True))  # float64 log-softmax
    diagonal = log_p[:, np.arange(4), np.arange(4)]  # (n, 4): log p(k | rot_k x)
    narrow = logits.astype(np.float32)
    shifted = narrow - narrow.max(axis=2, keepdims=True)
    exp = np.exp(shifted)
    probs = exp / exp.sum(axis=2, keepdims=True)  # float32 softmax, as tf.nn.softmax
    with np.errstate(divide="ignore"):  # a probability that underflowed: log 0 = -inf
        dscore = np.exp(np.log(probs[:, np.arange(4), np.arange(4)]).sum(axis=1))
    anomaly = np.float32(1.0) - dscore.astype(np.float32)
    return {
        "rotation_p0": np.exp(log_p[:, 0, 0]),
        "rotation_log_p": diagonal.sum(axis=1),
        "rotation_sum_p": np.exp(diagonal).sum(axis=1),
        "rotation_released": -anomaly,
    }


#: What each logit score is, and the published detector it stands beside.
ROTATION_ROWS: dict[str, tuple[str, str | None]] = {
    "rotation_p0": ("rotation classifier: p(0 | x)", None),
    "rotation_log_p": ("rotation classifier: sum_k log p(k | rot_k x), float64 (Golan)", None),
    "rotation_released": ("rotation classifier: released 1 - exp(sum_k log p), float32", None),
    "rotation_sum_p": (
        "rotation classifier: sum_k p(k | rot_k x) (the paper's Table 1)",
        "rotation_classifier",
    ),
}


def score_cell(
    features: Mapping[str, np.ndarray],
    rotation: Mapping[str, np.ndarray] | None,
    *,
    cell: Mapping[str, str],
    device_auroc: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """One row per detector or score: AUC x 100, the paper's value, verdict, notes."""
    from pipeline_lib.detection.evaluate import evaluate_detector, evaluate_normality_scores
    from pipeline_lib.paper.reproduction import paper_value
    from pipeline_lib.paper.verdict import reproduction_verdict

    is_outlier = np.asarray(features["is_outlier"]).astype(np.int8)
    fit = np.asarray(features["f_train"], dtype=np.float32)
    test = np.asarray(features["f_test"], dtype=np.float32)
    device_auroc = device_auroc or {}
    rows = []

    def add(key: str, what: str, auroc: float, published: str | None, **notes: Any) -> None:
        paper = paper_value(cell["dataset"], cell["inlier"], cell["method"], published)
        device_keys = DEVICE_KEYS.get(key, (key,))
        device = next((device_auroc[k] for k in device_keys if k in device_auroc), None)
        rows.append(
            {
                "key": key,
                "score": what,
                "auroc": float(auroc),
                "paper_mean": paper[0] if paper else None,
                "paper_std": paper[1] if paper else None,
                "verdict": reproduction_verdict(
                    auroc, paper[0] if paper else None, paper[1] if paper else None
                ),
                "device_auroc": device,
                **notes,
            }
        )

    for key, detector, params, what, published in FEATURE_ROWS:
        started = time.perf_counter()
        result = evaluate_detector(fit, test, is_outlier, detector=detector, **params)
        notes = {"seconds": round(time.perf_counter() - started, 2), **result.fitted}
        add(key, what, result.auroc, published, **notes)
    if rotation is not None:
        scores = rotation_scores_from_logits(rotation["rotation_logits_test"])
        for key, (what, published) in ROTATION_ROWS.items():
            result = evaluate_normality_scores(scores[key], is_outlier)
            add(key, what, result.auroc, published, ties=tie_count(scores[key]))
        if "log_p_rotations_test" in rotation:  # the library's own score, for a cross-check
            stored = evaluate_normality_scores(rotation["log_p_rotations_test"], is_outlier)
            (log_p,) = [row for row in rows if row["key"] == "rotation_log_p"]
            log_p["library_auroc"] = float(stored.auroc)
    return rows


def _number(value: float | None, std: float | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if std is None else f"{value:.1f} +- {std:.1f}"


def render_markdown(rows: Sequence[Mapping[str, Any]], *, title: str, inputs: str) -> str:
    """The table as Markdown: AUC, device AUC, paper, verdict and notes per score."""
    lines = [
        f"# {title}",
        "",
        f"Recomputed on the CPU by `benchmarks/fullcell_detectors.py` from {inputs}. AUC x 100 "
        "on the test split; one seed, so the verdict's band is 2 std of the paper "
        "(`pipeline_lib/paper/verdict.py`).",
        "",
        "| score | AUC | device run | paper | verdict | notes |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        notes = []
        if "gamma_" in row:
            notes.append(f"gamma {row['gamma_']:.3g}")
        if "ties" in row:
            notes.append(f"{row['ties']} tied test scores")
        if "library_auroc" in row:
            notes.append(f"library's stored score: {row['library_auroc']:.2f}")
        score = row["score"].replace("|", "\\|")
        lines.append(
            f"| {score} | {_number(row['auroc'])} | {_number(row['device_auroc'])} "
            f"| {_number(row['paper_mean'], row['paper_std'])} | {row['verdict']} "
            f"| {'; '.join(notes)} |"
        )
    return "\n".join(lines) + "\n"


def _cell(features_path: Path, results: Mapping[str, Any] | None, given: str | None) -> dict:
    stem = features_path.name.removesuffix(".features.npz")
    if given:
        dataset, inlier, method = given.split("/")
        return {"dataset": dataset, "inlier": inlier, "method": method, "job": stem}
    match = _JOB.match(stem)
    if match is None:
        raise SystemExit(
            f"{features_path}: cannot read data set, class and method from the name; pass "
            "--cell DATASET/CLASS/METHOD"
        )
    return {**match.groupdict(), "job": stem}


def _device_auroc(results: Mapping[str, Any] | None, cell: Mapping[str, str]) -> dict:
    for result in (results or {}).get("results", []):
        if (result["dataset"], result["inlier"], result["method"]) == (
            cell["dataset"],
            cell["inlier"],
            cell["method"],
        ):
            return dict(result["auroc"])
    return {}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--features", type=Path, required=True, help="<job>.features.npz")
    parser.add_argument(
        "--rotation", type=Path, default=None, help="default: <job>.rotation.npz beside it"
    )
    parser.add_argument("--results", type=Path, default=None, help="the run's results.json")
    parser.add_argument("--cell", default=None, help="DATASET/CLASS/METHOD (default: the name)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the tables")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text()) if args.results else None
    cell = _cell(args.features, results, args.cell)
    rotation_path = args.rotation or args.features.with_name(f"{cell['job']}.rotation.npz")
    with np.load(args.features) as loaded:
        features = dict(loaded)
    rotation = None
    if rotation_path.exists():
        with np.load(rotation_path) as loaded:
            rotation = dict(loaded)
    rows = score_cell(features, rotation, cell=cell, device_auroc=_device_auroc(results, cell))
    args.out.mkdir(parents=True, exist_ok=True)
    inputs = ", ".join(
        f"`{path.name}`"
        for path in (args.features, rotation_path, args.results)
        if path and path.exists()
    )
    title = f"Detectors of {cell['dataset']} {cell['inlier']}, {cell['method']} ({cell['job']})"
    (args.out / f"{cell['job']}.detectors.md").write_text(
        render_markdown(rows, title=title, inputs=inputs)
    )
    payload = {"cell": cell, "inputs": inputs, "rows": rows}
    (args.out / f"{cell['job']}.detectors.json").write_text(json.dumps(payload, indent=1) + "\n")
    for row in rows:
        print(f"{row['key']:>18}  {row['auroc']:6.2f}  {row['verdict']}")


if __name__ == "__main__":
    main()
