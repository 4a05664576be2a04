"""Fair CPU baselines: our KDE and RBF OC-SVM scoring against scikit-learn, same threads, warm.

Both sides run with the same thread count (``--threads``, default 1: libsvm's prediction
and ``KernelDensity`` are single-threaded, so 1 thread each is the headline; 2 is an extra),
set for torch and for every BLAS/OpenMP pool through threadpoolctl. Both are warmed up on a
slice first, then timed ``--repeats`` times, alternating ours and theirs so that a change of
machine load hits both; each row reports the median and the range. Float64 features at the
paper's sizes (5,000 fit rows, 10,000 test rows, 512-d, L2-normalised). Both sides' scores are
checked against an exact float64 reference on the first ``--check-rows`` test rows (KDE: a
log-sum-exp over squared distances taken as differences, no expansion; OC-SVM: libsvm's own
decision function, which is the definition), as the largest difference relative to the
score's magnitude. scikit-learn's tree KDE is not exact to 1e-10 even at ``atol = rtol = 0``
(about 1e-7 here), so the two sides are not compared with each other.

Usage::

    python benchmarks/bench_detectors_cpu.py --out benchmarks/detectors_cpu/results.csv
    python benchmarks/bench_detectors_cpu.py --threads 2 --out ...   # the 2-thread extra
    python benchmarks/bench_detectors_cpu.py --n-fit 300 --n-test 500 --dim 32   # smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from bench_tables import append_csv
from scipy.special import logsumexp
from sklearn.neighbors import KernelDensity
from threadpoolctl import threadpool_limits

from pipeline_lib.detection.detectors import KernelDensityScore, RBFOneClassSVM

FIELDS = (
    "detector", "threads", "n_fit", "n_test", "dim", "repeats", "ours_median_s", "ours_min_s",
    "ours_max_s", "sklearn_median_s", "sklearn_min_s", "sklearn_max_s", "speedup",
    "max_relative_difference", "sklearn_relative_difference", "check_rows", "load_average",
)  # fmt: skip


def unit_rows(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """Float64 rows on the unit sphere: both sides see the same, already normalised inputs."""
    x = rng.standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def relative_difference(scores: np.ndarray, reference: np.ndarray) -> float:
    """Largest difference relative to the reference score's magnitude."""
    scale = np.maximum(np.abs(reference), np.finfo(np.float64).tiny)
    return float(np.max(np.abs(scores[: len(reference)] - reference) / scale))


def timed_pairs(
    ours: Callable[[], np.ndarray],
    theirs: Callable[[], np.ndarray],
    repeats: int,
    reference: np.ndarray,
) -> tuple[list[float], list[float], float, float]:
    """Alternate the two calls ``repeats`` times; their wall times and each side's largest
    relative difference to the exact reference over all repeats."""
    ours_times, their_times, ours_off, their_off = [], [], 0.0, 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        a = ours()
        ours_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        b = theirs()
        their_times.append(time.perf_counter() - start)
        ours_off = max(ours_off, relative_difference(a, reference))
        their_off = max(their_off, relative_difference(b, reference))
    return ours_times, their_times, ours_off, their_off


def exact_kde(fit: np.ndarray, test: np.ndarray, gamma: float, chunk: int = 16) -> np.ndarray:
    """Float64 ``log sum exp(-gamma ||x - y||^2) / gamma`` from explicit differences."""
    scores = []
    for start in range(0, len(test), chunk):
        rows = test[start : start + chunk]
        squared = ((rows[:, None, :] - fit[None, :, :]) ** 2).sum(axis=-1)
        scores.append(logsumexp(-gamma * squared, axis=1) / gamma)
    return np.concatenate(scores)


def kde_pair(fit: np.ndarray, check: np.ndarray) -> tuple[Callable, Callable, np.ndarray]:
    """Ours and scikit-learn's KDE, on the same scale (ours = affine map of theirs), and the
    exact scores of the ``check`` rows."""
    ours = KernelDensityScore(dtype="float64").fit(fit)
    gamma = ours.gamma_
    bandwidth = 1.0 / np.sqrt(2.0 * gamma)
    theirs = KernelDensity(kernel="gaussian", bandwidth=bandwidth).fit(fit)
    n, d = fit.shape
    shift = np.log(n) + 0.5 * d * np.log(2.0 * np.pi * bandwidth**2)
    return (
        ours.score_samples,
        lambda x: (theirs.score_samples(x) + shift) / gamma,
        exact_kde(fit, check, gamma),
    )


def ocsvm_pair(fit: np.ndarray, check: np.ndarray) -> tuple[Callable, Callable, np.ndarray]:
    """Our blocked scoring of a libsvm fit against libsvm's own prediction of that fit, which
    is also the reference."""
    ours = RBFOneClassSVM(dtype="float64").fit(fit)
    return ours.score_samples, ours.svm_.score_samples, ours.svm_.score_samples(check)


def measure(args: argparse.Namespace) -> list[dict[str, object]]:
    """One row per detector, measured in this run."""
    rng = np.random.default_rng(args.seed)
    fit, test = unit_rows(args.n_fit, args.dim, rng), unit_rows(args.n_test, args.dim, rng)
    rows = []
    with threadpool_limits(limits=args.threads):
        torch.set_num_threads(args.threads)
        for name, make in (("kde", kde_pair), ("ocsvm", ocsvm_pair)):
            ours, theirs, reference = make(fit, test[: args.check_rows])
            warm = test[: min(64, len(test))]
            ours(warm), theirs(warm)
            ours_t, their_t, difference, their_difference = timed_pairs(
                lambda o=ours: o(test), lambda t=theirs: t(test), args.repeats, reference
            )
            ours_m, their_m = statistics.median(ours_t), statistics.median(their_t)
            rows.append({
                "detector": name, "threads": args.threads, "n_fit": args.n_fit,
                "n_test": args.n_test, "dim": args.dim, "repeats": args.repeats,
                "ours_median_s": ours_m, "ours_min_s": min(ours_t), "ours_max_s": max(ours_t),
                "sklearn_median_s": their_m, "sklearn_min_s": min(their_t),
                "sklearn_max_s": max(their_t), "speedup": their_m / ours_m,
                "max_relative_difference": difference,
                "sklearn_relative_difference": their_difference,
                "check_rows": len(reference),
                "load_average": os.getloadavg()[0],
            })  # fmt: skip
            print(
                f"{name}: ours {ours_m:.3f} s [{min(ours_t):.3f}, {max(ours_t):.3f}], "
                f"sklearn {their_m:.3f} s [{min(their_t):.3f}, {max(their_t):.3f}] "
                f"(medians of {args.repeats}, {args.threads} thread(s) each): "
                f"{their_m / ours_m:.1f}x; against the exact scores of {len(reference)} rows: "
                f"ours <= {difference:.1e}, scikit-learn's <= {their_difference:.1e} relative",
                flush=True,
            )
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-fit", type=int, default=5000)
    parser.add_argument("--n-test", type=int, default=10000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--check-rows", type=int, default=1000, help="test rows checked against exact scores"
    )
    parser.add_argument("--out", type=Path, help="CSV to append the rows to")
    args = parser.parse_args(argv)
    for name in ("n_fit", "n_test", "dim", "threads", "repeats", "check_rows"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    args = parse_args(argv)
    rows = measure(args)
    if args.out is not None:
        append_csv(args.out, rows, FIELDS)  # one file keeps the 1- and 2-thread runs
    return rows


if __name__ == "__main__":
    main()
