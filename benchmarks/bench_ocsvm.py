"""Benchmark: RBF OC-SVM scoring, our blocked torch sum against scikit-learn's libsvm loop.

At the paper's sizes (one CIFAR-10 class: 5,000 fit features, the 10,000-image test split,
512-d ResNet-18 features), L2-normalised, with the paper's ``gamma = 10 / (d Var)``. One
:class:`~pipeline_lib.detection.detectors.RBFOneClassSVM` is fitted (libsvm); then the same fitted
``OneClassSVM`` scores the test set twice: scikit-learn's ``score_samples`` (libsvm's
``decision_function`` plus ``offset_``, what the detector called before) and the detector's
``score_samples`` (blocked matrix products in torch, ``kernels.rbf_expansion``). The script
prints both times, the ratio, and the largest absolute / relative score differences, all
measured in this one run.

Both wall and CPU seconds are printed: on a shared machine other jobs stretch wall times, and
our two threads more than libsvm's one (a thread that is descheduled stalls its partner at
every synchronisation), so run it when ``uptime`` shows the machine idle; the load average is
printed at the start and the end.

Threads: torch is limited to ``--threads`` (default 2, the CPU budget of the target machine);
libsvm's prediction is single-threaded whatever the setting. Torch's CPU GEMM is MKL here, so
``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` (which pin numpy's OpenBLAS kernel on some
machines) do not touch either timed path; the script prints them anyway.

Usage::

    python benchmarks/bench_ocsvm.py                                   # paper sizes
    python benchmarks/bench_ocsvm.py --features relu                   # structured features
    python benchmarks/bench_ocsvm.py --n-fit 500 --n-test 1000 --dim 64    # smoke run
    python benchmarks/bench_ocsvm.py --device cuda                     # GPU scoring
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from bench_options import at_least_one

from pipeline_lib.detection.detectors import RBFOneClassSVM, l2_normalize


def make_features(
    kind: str, n_fit: int, n_test: int, dim: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Float64 fit and test features, NOT yet normalised (the detector normalises).

    ``sphere``: isotropic Gaussian rows (uniform on the sphere once normalised; every pair
    at squared distance ~2, so all kernel values are alike). ``relu``: post-ReLU-like rows
    around a shared mean direction, a quarter of the test rows from another distribution,
    so kernel values spread over orders of magnitude as with real embeddings.
    """
    if kind == "sphere":
        return rng.standard_normal((n_fit, dim)), rng.standard_normal((n_test, dim))
    mean = np.abs(rng.standard_normal(dim))
    fit = np.maximum(mean + 0.7 * rng.standard_normal((n_fit, dim)), 0.0)
    test = np.maximum(mean + 0.9 * rng.standard_normal((n_test, dim)), 0.0)
    test[: n_test // 4] = np.abs(rng.standard_normal((n_test // 4, dim)))
    return fit, test


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-fit", type=int, default=5000, help="fit rows (default 5000)")
    parser.add_argument("--n-test", type=int, default=10000, help="test rows (default 10000)")
    parser.add_argument("--dim", type=int, default=512, help="feature dimension (default 512)")
    parser.add_argument("--features", choices=["sphere", "relu"], default="sphere")
    parser.add_argument("--nu", type=float, default=0.5, help="OC-SVM nu (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random features")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    parser.add_argument("--device", default="cpu", help="torch device for ours (default cpu)")
    parser.add_argument("--chunk-size", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="ours: best of N (default 3)")
    return at_least_one(
        parser,
        parser.parse_args(argv),
        ("n_fit", "n_test", "dim", "chunk_size", "threads", "repeats"),
    )


def main(argv: list[str] | None = None) -> float:
    """Run the benchmark, print the timings and the summary line; return the speed-up."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    fit, test = make_features(args.features, args.n_fit, args.n_test, args.dim, rng)
    blas = {k: os.environ.get(k, "unset") for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    print(
        f"features: {args.features}, fit {fit.shape}, test {test.shape}, float64, "
        f"L2-normalised by the detector; torch threads {torch.get_num_threads()}, "
        f"device {args.device}, dtype {args.dtype}, chunk {args.chunk_size}; {blas}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )

    detector = RBFOneClassSVM(
        nu=args.nu, chunk_size=args.chunk_size, dtype=args.dtype, device=args.device
    )
    start = time.perf_counter()
    detector.fit(fit)
    svm = detector.svm_
    print(
        f"fit (libsvm): {time.perf_counter() - start:.2f} s, gamma = {detector.gamma_:.6g}, "
        f"{len(svm.support_)} support vectors, rho = {float(svm.offset_[0]):.6g}"
    )

    detector.score_samples(test[: min(64, len(test))])  # warm-up (kernels, allocator)
    ours_times, ours_cpu = [], []
    for _ in range(args.repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        ours = detector.score_samples(test)  # includes validation and normalisation
        if args.device != "cpu" and torch.cuda.is_available():
            torch.cuda.synchronize()
        ours_times.append(time.perf_counter() - start)
        ours_cpu.append(time.process_time() - start_cpu)
    best = int(np.argmin(ours_times))
    ours_seconds = ours_times[best]
    print(
        f"ours:    {ours_seconds:8.3f} s wall, {ours_cpu[best]:.3f} s CPU (best of "
        f"{args.repeats}: {', '.join(f'{t:.3f}' for t in ours_times)} s)"
    )

    test_n = l2_normalize(test)  # given to scikit-learn already normalised: not timed
    start, start_cpu = time.perf_counter(), time.process_time()
    reference = svm.score_samples(test_n)
    sklearn_seconds = time.perf_counter() - start
    sklearn_cpu = time.process_time() - start_cpu
    print(
        f"sklearn: {sklearn_seconds:8.3f} s wall, {sklearn_cpu:.3f} s CPU "
        "(OneClassSVM.score_samples, libsvm, 1 thread)"
    )
    decision_diff = float(
        np.max(np.abs(detector.decision_function(test) - svm.decision_function(test_n)))
    )

    abs_diff = np.abs(ours - reference)
    max_abs = float(abs_diff.max())
    max_rel = float(np.max(abs_diff / np.abs(reference)))
    rho = float(svm.offset_[0])
    print(
        f"score_samples: max |ours - sklearn| = {max_abs:.3e}, max relative = {max_rel:.3e} "
        f"(scores in [{reference.min():.4g}, {reference.max():.4g}]; sklearn's (s - rho) + rho "
        f"rounds to ~{np.finfo(np.float64).eps * rho:.1e})"
    )
    print(f"decision_function: max |ours - sklearn| = {decision_diff:.3e} (rho = {rho:.6g})")
    # Exact float64 oracle on a few rows (explicit differences, no norm expansion), to say
    # which side of the difference the error is on.
    rows = test_n[: min(100, len(test_n))]
    sq_dist = ((rows[:, None, :] - svm.support_vectors_[None, :, :]) ** 2).sum(axis=-1)
    exact = np.exp(-detector.gamma_ * sq_dist) @ svm.dual_coef_[0]
    ours_err = float(np.max(np.abs(ours[: len(rows)] - exact) / exact))
    sklearn_err = float(np.max(np.abs(reference[: len(rows)] - exact) / exact))
    print(
        f"relative error vs exact on {len(rows)} rows: ours {ours_err:.3e}, "
        f"sklearn {sklearn_err:.3e}"
    )

    speedup = sklearn_seconds / ours_seconds
    # CPU seconds are less sensitive to other jobs on a shared machine than wall time (ours
    # runs two threads, so its CPU time is up to twice its wall time, spin-waits included).
    print(f"ratio: wall {speedup:.1f}x, CPU {sklearn_cpu / ours_cpu[best]:.1f}x")
    print(
        f"SUMMARY bench_ocsvm features={args.features} n_fit={args.n_fit} n_test={args.n_test} "
        f"dim={args.dim} n_sv={len(svm.support_)} device={args.device} dtype={args.dtype} "
        f"threads={torch.get_num_threads()} ours={ours_seconds:.3f}s "
        f"sklearn={sklearn_seconds:.3f}s speedup={speedup:.1f}x max_abs_diff={max_abs:.2e} "
        f"max_rel_diff={max_rel:.2e} load={os.getloadavg()[0]:.2f}"
    )
    return speedup


if __name__ == "__main__":
    main()
