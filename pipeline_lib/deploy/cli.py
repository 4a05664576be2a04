"""``droc score --model URI PATH...``: score image files and folders with a packaged detector.

Writes a CSV ``file,score,is_anomaly`` (``score`` the anomaly score, higher = more
anomalous; ``is_anomaly`` = ``score > threshold`` of the package) for every image that could
be read, and a CSV ``file,error`` for every one that could not (and for paths that do not
exist or folders without images); the errors are also listed on stderr.

MVTec (patch) packages also write one heat-map PNG per scored image into ``--heatmaps``
(default: ``<output stem>_heatmaps/`` beside the CSV), named ``<input stem>_heatmap.png``
(``_2``, ``_3``, ... when two inputs share a stem); the CSV then has a fourth column
``heatmap`` with its path. The PNG is the model's input (the whole image resized to the
package's ``image_size``) with the anomaly map laid over it in the colour map of the
benchmark's figures, from the median held-out inlier pixel score (dark blue) to the
image threshold (red); package.json's ``anomaly_map.display_range``.

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
from pipeline_lib.deploy.package import PackageError
from pipeline_lib.deploy.packages import Package, has_maps, load_package_folder

#: Files read and scored together (one progress step).
CHUNK = 64


def load_model(uri: str, *, tracking_uri: str | None = None) -> Package:
    """A package folder, an MLflow model folder, or an MLflow URI (``models:/NAME/VERSION``).

    Raises
    ------
    PackageError
        If the folder is neither kind of model, or MLflow cannot resolve the URI.
    """
    path = Path(uri)
    if (path / "package.json").is_file():
        return load_package_folder(path)
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
    package: Package,
    paths: Sequence[str | os.PathLike],
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    progress: bool = True,
    heatmap_dir: Path | None = None,
) -> tuple[list[tuple], list[tuple[str, str]]]:
    """Score every image under ``paths``; returns rows and ``(file, reason)`` errors.

    Rows are ``(file, score, is_anomaly)``, plus the heat-map path for a package with maps
    (written into ``heatmap_dir``, which it then needs).
    """
    maps = has_maps(package)
    if maps and heatmap_dir is None:
        raise ValueError("a package with anomaly maps needs heatmap_dir")
    files, errors = collect_image_files(paths)
    rows: list[tuple] = []
    names = HeatmapNames(heatmap_dir) if maps else None
    with tqdm(total=len(files), desc="score", unit="img", disable=not progress) as bar:
        for start in range(0, len(files), CHUNK):
            chunk = files[start : start + CHUNK]
            good, bad = read_images(
                chunk, size=package.image_size, max_pixels=max_pixels, resize=package.resize
            )
            errors.extend(bad)
            if good:
                images = np.stack([pixels for _, pixels in good])
                if names is None:
                    scores = package.anomaly_scores(images)
                    rows.extend(
                        (str(path), float(score), bool(score > package.threshold))
                        for (path, _), score in zip(good, scores, strict=True)
                    )
                else:
                    from pipeline_lib.mvtec.heatmaps import overlay_heatmap  # matplotlib: lazily

                    result = package.score(images)
                    span = package.info["anomaly_map"]["display_range"]
                    for k, (path, pixels) in enumerate(good):
                        target = names.next(path)
                        write_png(target, overlay_heatmap(pixels, result.maps[k], span))
                        rows.append(
                            (
                                str(path),
                                float(result.scores[k]),
                                bool(result.is_anomaly[k]),
                                str(target),
                            )
                        )
            bar.update(len(chunk))
    return rows, errors


class HeatmapNames:
    """``<stem>_heatmap.png`` in a folder, numbered ``_2``, ``_3``... when stems repeat."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.used: set[str] = set()

    def next(self, source: Path) -> Path:
        stem, n = f"{source.stem}_heatmap", 1
        name = f"{stem}.png"
        while name in self.used:
            n += 1
            name = f"{stem}_{n}.png"
        self.used.add(name)
        return self.folder / name


def write_png(path: Path, pixels: np.ndarray) -> None:
    """Save uint8 RGB pixels as a PNG, creating the folder."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, format="PNG")


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
    score.add_argument(
        "--heatmaps",
        default=None,
        help="folder of the heat-map PNGs of MVTec packages (default: <output>_heatmaps/)",
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
    output = Path(args.output)
    heatmap_dir = (
        Path(args.heatmaps) if args.heatmaps else output.with_name(output.stem + "_heatmaps")
    )
    rows, errors = score_paths(
        package,
        args.paths,
        max_pixels=args.max_pixels,
        progress=not args.no_progress,
        heatmap_dir=heatmap_dir if has_maps(package) else None,
    )
    errors_path = (
        Path(args.errors) if args.errors else output.with_name(output.stem + "_errors.csv")
    )
    header = ["file", "score", "is_anomaly"] + (["heatmap"] if has_maps(package) else [])
    _write_csv(output, header, rows)
    _write_csv(errors_path, ["file", "error"], errors)
    flagged = sum(row[2] for row in rows)
    print(
        f"droc: scored {len(rows)} image(s), {flagged} anomalous (threshold "
        f"{package.threshold:.6g}) -> {output}; {len(errors)} error(s) -> {errors_path}"
        + (f"; heat maps -> {heatmap_dir}" if has_maps(package) and rows else ""),
        file=sys.stderr,
    )
    for path, reason in errors:
        print(f"droc: error: {path}: {reason}", file=sys.stderr)
    if not rows:
        return 2
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
