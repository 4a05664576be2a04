"""``droc score --model URI PATH...``: score image files and folders with a packaged detector.

Writes a CSV ``file,score,is_anomaly`` (``score`` the anomaly score, higher = more
anomalous; ``is_anomaly`` = ``score > threshold`` of the package) for every image that could
be read, and a CSV ``file,error`` for every one that could not (and for paths that do not
exist or folders without images); the errors are also listed on stderr.

Exit status: 0 when every input was scored, 1 when some inputs were errors (the others are
still scored and written), 2 when nothing could be scored or the model cannot be loaded.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pipeline_lib.deploy.images import DEFAULT_MAX_PIXELS, collect_image_files, read_images
from pipeline_lib.deploy.package import PackagedDetector, PackageError

#: Files read and scored together (one progress step).
CHUNK = 64


def load_model(uri: str, *, tracking_uri: str | None = None) -> PackagedDetector:
    """A package folder, an MLflow model folder, or an MLflow URI (``models:/NAME/VERSION``).

    Raises
    ------
    PackageError
        If the folder is neither kind of model, or MLflow cannot resolve the URI.
    """
    path = Path(uri)
    if (path / "package.json").is_file():
        return PackagedDetector.load(path)
    if path.exists() and not (path / "MLmodel").is_file():
        raise PackageError(
            f"{path} is neither a package folder (package.json) nor an MLflow model (MLmodel)"
        )
    # mlflow only when needed: a package folder scores without it.
    import mlflow
    from mlflow.exceptions import MlflowException

    from pipeline_lib.deploy.pyfunc import load_package

    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    try:
        return load_package(uri)
    except (MlflowException, OSError) as error:
        raise PackageError(
            f"cannot load model {uri!r} ({error}); for models:/NAME/VERSION set "
            "--tracking-uri or $MLFLOW_TRACKING_URI to the registry's store"
        ) from error


def score_paths(
    package: PackagedDetector,
    paths: Sequence[str | os.PathLike],
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: bool = True,
) -> tuple[list[tuple[str, float, bool]], list[tuple[str, str]]]:
    """Score every image under ``paths``; returns ``(file, score, is_anomaly)`` rows and errors."""
    files, errors = collect_image_files(paths)
    rows: list[tuple[str, float, bool]] = []
    with tqdm(total=len(files), desc="score", unit="img", disable=not progress) as bar:
        for start in range(0, len(files), CHUNK):
            chunk = files[start : start + CHUNK]
            good, bad = read_images(chunk, size=package.image_size, max_pixels=max_pixels)
            errors.extend(bad)
            if good:
                scores = package.anomaly_scores(np.stack([pixels for _, pixels in good]))
                rows.extend(
                    (str(path), float(score), bool(score > package.threshold))
                    for (path, _), score in zip(good, scores, strict=True)
                )
            bar.update(len(chunk))
    return rows, errors


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``droc`` console script."""
    parser = argparse.ArgumentParser(prog="droc", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score image files and folders")
    score.add_argument(
        "--model",
        required=True,
        help="package folder, MLflow model folder, or URI (models:/NAME/VERSION, runs:/ID/model)",
    )
    score.add_argument("paths", nargs="+", help="image files and folders (searched recursively)")
    score.add_argument("--output", default="droc_scores.csv", help="CSV file,score,is_anomaly")
    score.add_argument(
        "--errors", default=None, help="CSV file,error (default: <output>_errors.csv)"
    )
    score.add_argument("--tracking-uri", default=None, help="MLflow store of models:/ URIs")
    score.add_argument("--max-pixels", type=int, default=DEFAULT_MAX_PIXELS)
    score.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)

    try:
        package = load_model(args.model, tracking_uri=args.tracking_uri)
    except PackageError as error:
        print(f"droc: {error}", file=sys.stderr)
        return 2
    rows, errors = score_paths(
        package, args.paths, max_pixels=args.max_pixels, progress=not args.no_progress
    )
    output = Path(args.output)
    errors_path = (
        Path(args.errors) if args.errors else output.with_name(output.stem + "_errors.csv")
    )
    _write_csv(output, ["file", "score", "is_anomaly"], rows)
    _write_csv(errors_path, ["file", "error"], errors)
    flagged = sum(flag for _, _, flag in rows)
    print(
        f"droc: scored {len(rows)} image(s), {flagged} anomalous (threshold "
        f"{package.threshold:.6g}) -> {output}; {len(errors)} error(s) -> {errors_path}",
        file=sys.stderr,
    )
    for path, reason in errors:
        print(f"droc: error: {path}: {reason}", file=sys.stderr)
    if not rows:
        return 2
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
