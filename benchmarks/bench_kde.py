"""Benchmark: our blocked PyTorch KDE score against scikit-learn's ``KernelDensity``.

At the paper's sizes (one CIFAR-10 class: 5,000 fit features, the 10,000-image test split,
512-d ResNet-18 features) on random L2-normalised features. scikit-learn's Gaussian KDE
with bandwidth ``h = 1/sqrt(2 gamma)`` gives the same scores after the affine map
``ours = (sklearn + log N + (d/2) log(2 pi h^2)) / gamma``; the script checks that and
reports the speed-up measured in this one run.

Usage::

    python benchmarks/bench_kde.py                                  # paper sizes
    python benchmarks/bench_kde.py --n-fit 500 --n-test 1000 --dim 64   # smoke run
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from bench_options import at_least_one
from scipy.special import logsumexp
from sklearn.neighbors import KernelDensity

from pipeline_lib.detection.detectors import KernelDensityScore


def random_unit_features(n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` float64 rows uniformly distributed on the unit sphere of dimension ``dim``.

    float64 so that both implementations see exactly the same (already unit-norm) inputs
    and the printed difference measures arithmetic, not input rounding.
    """
    x = rng.standard_normal((n, dim))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-fit", type=int, default=5000, help="fit rows (default 5000)")
    parser.add_argument("--n-test", type=int, default=10000, help="test rows (default 10000)")
    parser.add_argument("--dim", type=int, default=512, help="feature dimension (default 512)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random features")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--device", default="cpu", help="torch device for ours (default cpu)")
    parser.add_argument("--chunk-size", type=int, default=2048)
    return at_least_one(parser, parser.parse_args(argv), ("n_fit", "n_test", "dim", "chunk_size"))


def main(argv: list[str] | None = None) -> float:
    """Run the benchmark, print the timings and the summary line; return the speed-up."""
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    fit = random_unit_features(args.n_fit, args.dim, rng)
    test = random_unit_features(args.n_test, args.dim, rng)
    print(
        f"features: fit {fit.shape}, test {test.shape}, float64, L2-normalised; "
        f"torch threads {torch.get_num_threads()}, device {args.device}, dtype {args.dtype}"
    )

    ours = KernelDensityScore(dtype=args.dtype, device=args.device, chunk_size=args.chunk_size)
    ours.fit(fit).score_samples(test[: min(64, len(test))])  # warm-up (kernels, allocator)
    start = time.perf_counter()
    scores = ours.fit(fit).score_samples(test)
    ours_seconds = time.perf_counter() - start
    gamma = ours.gamma_
    print(f"ours:    {ours_seconds:8.3f} s  (gamma = {gamma:.6g})")

    bandwidth = 1.0 / np.sqrt(2.0 * gamma)
    start = time.perf_counter()
    log_density = KernelDensity(kernel="gaussian", bandwidth=bandwidth).fit(fit)
    log_density = log_density.score_samples(test)
    sklearn_seconds = time.perf_counter() - start
    print(f"sklearn: {sklearn_seconds:8.3f} s  (KernelDensity, bandwidth = {bandwidth:.6g})")

    n, d = fit.shape
    mapped = (log_density + np.log(n) + 0.5 * d * np.log(2.0 * np.pi * bandwidth**2)) / gamma
    max_abs_diff = float(np.max(np.abs(scores - mapped)))
    spread = float(np.ptp(mapped))
    speedup = sklearn_seconds / ours_seconds
    print(f"max |ours - mapped sklearn| = {max_abs_diff:.3e}  (score range {spread:.3e})")
    # Exact float64 reference on a few rows (explicit differences, no norm expansion), to say
    # which side of the difference the error is on.
    rows = test[: min(100, len(test))]
    sq_dist = ((rows[:, None, :] - fit[None, :, :]) ** 2).sum(axis=-1)  # (rows, n_fit)
    exact = logsumexp(-gamma * sq_dist, axis=1) / gamma
    ours_err = float(np.max(np.abs(scores[: len(rows)] - exact)))
    sklearn_err = float(np.max(np.abs(mapped[: len(rows)] - exact)))
    print(f"vs exact float64 on {len(rows)} rows: ours {ours_err:.3e}, sklearn {sklearn_err:.3e}")
    print(
        f"SUMMARY bench_kde n_fit={n} n_test={len(test)} dim={d} device={args.device} "
        f"dtype={args.dtype} threads={torch.get_num_threads()} ours={ours_seconds:.3f}s "
        f"sklearn={sklearn_seconds:.3f}s speedup={speedup:.1f}x max_abs_diff={max_abs_diff:.2e}"
    )
    return speedup


if __name__ == "__main__":
    main()
