"""Scoring throughput of a packaged detector: MLflow pyfunc (eager torch) vs the ONNX graph.

Builds a digits cell in-process (frozen ResNet-18, width 64 as in the paper, KDE on the
class-0 training features), packages it, and scores the same 256 test images (uint8 32x32,
one request at most) through ``mlflow.pyfunc`` (base64 PNG rows, as a served request
decodes them) and through
onnxruntime on pixels. Prints images/s of each and their ratio, measured in one run.

Usage: ``PYTHONPATH=. python benchmarks/bench_deploy.py [--width 64] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import base64
import tempfile
import time
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import torch

from pipeline_lib.data.digits import read_digits
from pipeline_lib.data.split import one_class_split, save_split
from pipeline_lib.deploy.export import onnx_scorer
from pipeline_lib.deploy.image_protocol import ImageProtocol
from pipeline_lib.deploy.packaging import package_cell
from pipeline_lib.deploy.serving import SIGNATURE, DrocPyfunc
from pipeline_lib.models.embed import embed_split
from pipeline_lib.models.representation import build_representation
from pipeline_lib.runtime.io import save_image_dataset, save_npz
from tests.deploy.conftest import png_bytes


def _best_rate(run, n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return n / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=256, help="images (one request: <= 256)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    folder = Path(tempfile.mkdtemp(prefix="bench_deploy_"))
    dataset = read_digits()
    split = one_class_split(dataset.train_labels, dataset.test_labels, inlier=0, seed=0)
    model = build_representation("resnet18_random", seed=0, width=args.width)
    features = embed_split(model, dataset, split.train_index, batch_size=128)
    save_image_dataset(folder / "dataset.npz", dataset)
    save_split(folder / "split.npz", split)
    save_npz(folder / "features.npz", features)
    package_cell(
        folder / "package",
        ImageProtocol(
            dataset_path=folder / "dataset.npz",
            split_path=folder / "split.npz",
            features_path=folder / "features.npz",
            max_fit=20000,
        ),
        model_path=None,
        cell={
            "dataset": "digits",
            "inlier": "0",
            "method": "resnet18_random",
            "detector": "kde",
            "seed": 0,
            "contamination": 0.0,
        },
        detector_params={},
        width=args.width,
        target_fpr=0.05,
    )
    mlflow.pyfunc.save_model(
        str(folder / "pyfunc"),
        python_model=DrocPyfunc(),
        artifacts={"package": str(folder / "package")},
        signature=SIGNATURE,
    )
    pyfunc = mlflow.pyfunc.load_model(str(folder / "pyfunc"))
    images = np.resize(dataset.test_images, (args.n, *dataset.test_images.shape[1:]))
    frame = pd.DataFrame({"image": [base64.b64encode(png_bytes(x)).decode() for x in images]})
    onnx = onnx_scorer(folder / "package" / "model.onnx")
    pyfunc.predict(frame.iloc[:8])  # warm-up
    onnx(images[:8])
    pyfunc_rate = _best_rate(lambda: pyfunc.predict(frame), args.n, args.repeats)
    onnx_rate = _best_rate(lambda: onnx(images), args.n, args.repeats)
    print(f"images: {args.n} (32x32 digits), ResNet-18 width {args.width} + KDE, 2 threads")
    print(f"pyfunc (base64 PNG rows, eager torch + detector): {pyfunc_rate:8.1f} images/s")
    print(f"onnxruntime (uint8 pixels, one graph):            {onnx_rate:8.1f} images/s")
    print(f"ratio onnx / pyfunc: {onnx_rate / pyfunc_rate:.2f}")


if __name__ == "__main__":
    main()
