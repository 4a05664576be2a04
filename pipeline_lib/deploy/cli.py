"""``droc score --model URI PATH...``: score image files and folders with a packaged detector.

Writes a CSV ``file,anomaly_score,is_anomaly`` (higher = more anomalous; ``is_anomaly`` =
``anomaly_score > threshold`` of the package; the exported ONNX / TorchScript graphs return
the opposite, a normality) for every image that could be read, and a CSV ``file,error`` for
every one that could not (and for paths that do not exist, entries that are not regular
files, such as a FIFO or a symlink to a device, which are never opened, and folders without
images); the errors are also listed on stderr, after a summary line and the TPR / FPR the
package measured at its threshold on its test split (:func:`expected_rates`).

MVTec (patch) packages also write one heat-map PNG per scored image into ``--heatmaps``
(default: ``<output stem>_heatmaps/`` beside the CSV), named ``<input stem>_heatmap.png``
(``_2``, ``_3``, ... when two inputs share a stem); the CSV then has a fourth column
``heatmap`` with its path. The PNG is the model's input (the whole image resized to the
package's ``image_size``) with the anomaly map laid over it in the colour map of the
benchmark's figures, from the median held-out inlier pixel score (dark blue) to the
image threshold (red); package.json's ``anomaly_map.display_range``.

The CSVs are written as the images are scored, a chunk at a time (at most :data:`CHUNK`
files and ``--chunk-pixels`` header pixels), into ``<output>.partial`` and
``<errors>.partial``, flushed after each chunk, and renamed to their names only when every
input is done: a file under the final name is always complete. Each file's header (format,
size, resize intermediate) is checked before its pixels are read; a file that fails is an
error row and costs no decoding.

Exit status:

* 0: every input was scored;
* 1: some inputs were errors (the others are scored and written);
* 2: nothing could be scored, the model cannot be loaded, a usage error, or an internal
  error (a bug, a full disk, ...): then a one-line message (the traceback with
  ``--verbose``), the rows scored so far kept in the ``.partial`` files;
* 130: interrupted (Ctrl-C): the rows scored so far kept in the ``.partial`` files.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import sys
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pipeline_lib.data.regular_files import not_regular_reason
from pipeline_lib.deploy.images import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_REQUEST_PIXELS,
    ImageError,
    collect_image_files,
    image_file_pixels,
    read_images,
)
from pipeline_lib.deploy.package_format import PackageError
from pipeline_lib.deploy.package_kinds import Package, has_maps, load_package_folder
from pipeline_lib.runtime.io import atomic_path, replace_durably

#: Most files read and scored together (one progress step, one flush of the CSVs).
CHUNK = 64
#: Exit statuses (module docstring).
EXIT_OK, EXIT_SOME_ERRORS, EXIT_NOTHING_SCORED, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 2, 130
#: Suffix of a CSV being written (and of the rows kept when a run is cut short).
PARTIAL = ".partial"
#: The score column: the anomaly score, higher = more anomalous (the exported graphs' output
#: is the opposite, a normality).
SCORE_COLUMN = "anomaly_score"
#: What ``--model`` holds when it is a URI rather than a local path (``models:/``,
#: ``runs:/``, ``file://``...): a scheme of two letters or more (``C:`` is a drive).
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def load_model(uri: str, *, tracking_uri: str | None = None) -> Package:
    """A package folder, an MLflow model folder, or an MLflow URI (``models:/NAME/VERSION``).

    Raises
    ------
    PackageError
        If the folder is neither kind of model, or MLflow cannot resolve the URI.
    """
    path = Path(uri)
    if path.is_dir():
        # lexists: a package.json that is a symlink or a FIFO is the package reader's to
        # refuse by name, not a reason to try MLflow.
        if os.path.lexists(path / "package.json"):
            return load_package_folder(path)
        if not os.path.lexists(path / "MLmodel"):
            raise PackageError(
                f"{path} is neither a package folder (package.json) nor an MLflow model (MLmodel)"
            )
    elif os.path.lexists(path):
        raise PackageError(
            f"--model {uri}: is {not_regular_reason(path) or 'a file'}, not a package folder "
            "(package.json) or an MLflow model folder (MLmodel)"
        )
    elif not _URI_SCHEME.match(uri):
        raise PackageError(
            f"--model {uri}: no such folder; give a package folder written by the deploy "
            "step (results/<experiment>/deploy/<name>/package), an MLflow model folder, or an "
            "MLflow URI (models:/NAME/VERSION, runs:/RUN_ID/model)"
        )
    # mlflow only when needed: a package folder scores without it.
    import mlflow
    from mlflow.exceptions import MlflowException

    from pipeline_lib.deploy.mlflow_model import load_package

    if tracking_uri:
        mlflow.set_tracking_uri(tracking_uri)
    try:
        return load_package(uri)
    except (MlflowException, OSError) as error:
        raise PackageError(
            f"cannot load model {uri!r} ({error}); for models:/NAME/VERSION set "
            "--tracking-uri or $MLFLOW_TRACKING_URI to the registry's store"
        ) from error


def expected_rates(info: dict) -> str:
    """What the package measured at its threshold on its test split, as one line.

    ``package.json``'s ``metrics`` (``test_tpr``, ``test_fpr``, ``n_test``, and the
    threshold's ``target_fpr``), written when the cell was packaged; a package without them
    (written by hand, or by an older version) says "not recorded".
    """
    metrics = info.get("metrics")
    metrics = metrics if isinstance(metrics, dict) else {}
    rates = [metrics.get("test_tpr"), metrics.get("test_fpr")]
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in rates):
        return "expected TPR / FPR at this threshold: not recorded in the package"
    n_test, target = metrics.get("n_test"), info.get("target_fpr")
    return (
        "expected at this threshold, as measured on the cell's test split"
        + (f" ({n_test} images)" if isinstance(n_test, int) else "")
        + f": TPR {rates[0]:.3f}, FPR {rates[1]:.3f}"
        + (f" (target FPR {target:g})" if isinstance(target, int | float) else "")
    )


def chunk_files(
    files: Sequence[Path],
    *,
    size: int,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    resize: str = "crop",
    chunk_pixels: int = DEFAULT_REQUEST_PIXELS,
) -> Iterator[tuple[list[Path], list[tuple[str, str]]]]:
    """Group files to decode together, from their headers; a header that fails is an error.

    A group holds at most :data:`CHUNK` files (good and failed together, so progress moves
    through a folder of broken files too) and at most ``chunk_pixels`` header pixels (the
    request budget of the server, :data:`~pipeline_lib.deploy.images.DEFAULT_REQUEST_PIXELS`
    by default), unless one file alone is larger: then it is a group of its own. The budget
    bounds the decoding work of a chunk, and with it the rows a crash can lose.

    Yields
    ------
    files : list of Path
        The chunk's files whose header passed :func:`image_file_pixels`.
    errors : list of (str, str)
        ``(path, reason)`` of the files whose header did not.
    """
    chunk: list[Path] = []
    errors: list[tuple[str, str]] = []
    pixels = 0
    for path in files:
        try:
            count = image_file_pixels(path, size=size, max_pixels=max_pixels, resize=resize)
        except ImageError as error:
            errors.append((str(path), str(error)))
            count = None
        if count is not None:
            if chunk and pixels + count > chunk_pixels:
                yield chunk, errors
                chunk, errors, pixels = [], [], 0
            chunk.append(path)
            pixels += count
        if len(chunk) + len(errors) >= CHUNK:
            yield chunk, errors
            chunk, errors, pixels = [], [], 0
    if chunk or errors:
        yield chunk, errors


def score_files(
    package: Package,
    files: Sequence[Path],
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    chunk_pixels: int = DEFAULT_REQUEST_PIXELS,
    heatmap_dir: Path | None = None,
) -> Iterator[tuple[list[tuple], list[tuple[str, str]], int]]:
    """Score image files a chunk at a time (:func:`chunk_files`).

    Yields
    ------
    rows : list of tuple
        ``(file, score, is_anomaly)``, plus the heat-map path for a package with maps
        (written into ``heatmap_dir``, which it then needs).
    errors : list of (str, str)
        ``(file, reason)`` of the chunk's files that could not be read.
    done : int
        Files the chunk covered (rows plus errors), for progress.
    """
    maps = has_maps(package)
    if maps and heatmap_dir is None:
        raise ValueError("a package with anomaly maps needs heatmap_dir")
    names = HeatmapNames(heatmap_dir) if maps else None
    for chunk, header_errors in chunk_files(
        files,
        size=package.image_size,
        max_pixels=max_pixels,
        resize=package.resize,
        chunk_pixels=chunk_pixels,
    ):
        good, bad = read_images(
            chunk, size=package.image_size, max_pixels=max_pixels, resize=package.resize
        )
        errors = header_errors + bad
        rows: list[tuple] = []
        if good:
            images = np.stack([pixels for _, pixels in good])
            if names is None:
                scores = package.anomaly_scores(images)
                rows = [
                    (str(path), float(score), bool(score > package.threshold))
                    for (path, _), score in zip(good, scores, strict=True)
                ]
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
        yield rows, errors, len(chunk) + len(header_errors)


def score_paths(
    package: Package,
    paths: Sequence[str | os.PathLike],
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    chunk_pixels: int = DEFAULT_REQUEST_PIXELS,
    progress: bool = True,
    heatmap_dir: Path | None = None,
) -> tuple[list[tuple], list[tuple[str, str]]]:
    """Score every image under ``paths`` in memory; returns rows and ``(file, reason)`` errors.

    :func:`score_files` over :func:`~pipeline_lib.deploy.images.collect_image_files`, for
    callers that want the lists; :func:`main` streams them to disk instead.
    """
    files, errors = collect_image_files(paths)
    rows: list[tuple] = []
    with tqdm(total=len(files), desc="score", unit="img", disable=not progress) as bar:
        for chunk_rows, chunk_errors, done in score_files(
            package,
            files,
            max_pixels=max_pixels,
            chunk_pixels=chunk_pixels,
            heatmap_dir=heatmap_dir,
        ):
            rows.extend(chunk_rows)
            errors.extend(chunk_errors)
            bar.update(done)
    return rows, errors


class PartialCsv:
    """A CSV written as ``<path>.partial``, flushed per batch of rows, renamed when complete.

    Why: ``droc score`` on a large folder runs for hours; a crash or Ctrl-C must keep the
    rows scored so far, and must never leave a file under the final name that looks
    complete. A reader of ``path`` sees the previous file (if any) or the whole new one.
    """

    def __init__(self, path: Path, header: Sequence[str]) -> None:
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + PARTIAL)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.partial, "w", newline="")  # noqa: SIM115 - closed by commit/keep
        self.writer = csv.writer(self.handle)
        self.rows = 0
        self.write([header], count=False)

    def write(self, rows: Sequence[Sequence[object]], *, count: bool = True) -> None:
        """Append rows and push them to the disk (flush and ``fsync``)."""
        self.writer.writerows(rows)
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.rows += len(rows) if count else 0

    def commit(self) -> None:
        """Close and rename the complete file to its name."""
        self.handle.close()
        replace_durably(self.partial, self.path)

    def keep(self) -> Path:
        """Close the file cut short, left as ``<path>.partial``; returns that path."""
        if not self.handle.closed:
            self.handle.close()
        return self.partial


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
    """Save uint8 RGB pixels as a PNG atomically, creating the folder."""
    from PIL import Image

    with atomic_path(path) as tmp:
        Image.fromarray(pixels).save(tmp, format="PNG")


def _positive_int(text: str) -> int:
    value = int(text.replace("_", ""))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="droc", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    score = commands.add_parser("score", help="score image files and folders")
    score.add_argument(
        "--model",
        required=True,
        help="package folder, MLflow model folder, or URI (models:/NAME/VERSION, runs:/ID/model)",
    )
    score.add_argument("paths", nargs="+", help="image files and folders (searched recursively)")
    score.add_argument(
        "--output", default="droc_scores.csv", help="CSV file,anomaly_score,is_anomaly"
    )
    score.add_argument(
        "--errors", default=None, help="CSV file,error (default: <output>_errors.csv)"
    )
    score.add_argument(
        "--heatmaps",
        default=None,
        help="folder of the heat-map PNGs of MVTec packages (default: <output>_heatmaps/)",
    )
    score.add_argument("--tracking-uri", default=None, help="MLflow store of models:/ URIs")
    score.add_argument(
        "--max-pixels",
        type=_positive_int,
        default=DEFAULT_MAX_PIXELS,
        help="most pixels of one image and of its resize intermediate, from its header "
        f"(default {DEFAULT_MAX_PIXELS:,}; may exceed Pillow's own limit)",
    )
    score.add_argument(
        "--chunk-pixels",
        type=_positive_int,
        default=DEFAULT_REQUEST_PIXELS,
        help="most header pixels decoded per chunk, as the server's request budget "
        f"(default {DEFAULT_REQUEST_PIXELS:,}; a larger single image is a chunk of its own)",
    )
    score.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    score.add_argument(
        "--verbose", action="store_true", help="print the traceback of an internal error"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``droc`` console script; returns the exit status (docstring)."""
    args = _parser().parse_args(argv)
    try:
        return _score_command(args)
    except KeyboardInterrupt:
        print("droc: interrupted; nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - the distinct status of a bug, not a traceback
        _report_internal(error, args.verbose, "nothing written")
        return EXIT_INTERNAL


def _report_internal(error: Exception, verbose: bool, where: str) -> None:
    if verbose:
        traceback.print_exc(file=sys.stderr)
    hint = "" if verbose else "; rerun with --verbose for the traceback"
    print(f"droc: internal error: {type(error).__name__}: {error}; {where}{hint}", file=sys.stderr)


def _score_command(args: argparse.Namespace) -> int:
    try:
        package = load_model(args.model, tracking_uri=args.tracking_uri)
    except PackageError as error:
        print(f"droc: {error}", file=sys.stderr)
        return EXIT_NOTHING_SCORED
    maps = has_maps(package)
    output = Path(args.output)
    heatmap_dir = (
        Path(args.heatmaps) if args.heatmaps else output.with_name(output.stem + "_heatmaps")
    )
    errors_path = (
        Path(args.errors) if args.errors else output.with_name(output.stem + "_errors.csv")
    )
    files, errors = collect_image_files(args.paths)
    header = ["file", SCORE_COLUMN, "is_anomaly"] + (["heatmap"] if maps else [])
    scores_csv = PartialCsv(output, header)
    errors_csv = PartialCsv(errors_path, ["file", "error"])
    flagged = 0
    try:
        errors_csv.write(errors)
        with tqdm(total=len(files), desc="score", unit="img", disable=args.no_progress) as bar:
            for rows, chunk_errors, done in score_files(
                package,
                files,
                max_pixels=args.max_pixels,
                chunk_pixels=args.chunk_pixels,
                heatmap_dir=heatmap_dir if maps else None,
            ):
                scores_csv.write(rows)
                errors_csv.write(chunk_errors)
                errors.extend(chunk_errors)
                flagged += sum(row[2] for row in rows)
                bar.update(done)
    except (KeyboardInterrupt, Exception) as error:
        kept = (
            f"{scores_csv.rows} scored row(s) kept in {scores_csv.keep()}, "
            f"{errors_csv.rows} error row(s) in {errors_csv.keep()}; {output} not written"
        )
        if isinstance(error, KeyboardInterrupt):
            print(f"droc: interrupted: {kept}", file=sys.stderr)
            return EXIT_INTERRUPTED
        _report_internal(error, args.verbose, kept)
        return EXIT_INTERNAL
    errors_csv.commit()  # first: a complete scores CSV then has its complete error list
    scores_csv.commit()
    print(
        f"droc: scored {scores_csv.rows} image(s), {flagged} anomalous ({SCORE_COLUMN} > "
        f"threshold {package.threshold:.6g}; higher = more anomalous) -> {output}; "
        f"{len(errors)} error(s) -> {errors_path}"
        + (f"; heat maps -> {heatmap_dir}" if maps and scores_csv.rows else ""),
        file=sys.stderr,
    )
    print(f"droc: {expected_rates(package.info)}", file=sys.stderr)
    for path, reason in errors:
        print(f"droc: error: {path}: {reason}", file=sys.stderr)
    if not scores_csv.rows:
        return EXIT_NOTHING_SCORED
    return EXIT_SOME_ERRORS if errors else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
