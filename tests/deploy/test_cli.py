"""``droc score`` on a folder with broken images: the others scored, the broken ones named."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipeline_lib.deploy import cli
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.images import ImageSizeError, read_image_file
from pipeline_lib.runtime.io import load_image_dataset
from tests.data.hostile_images import forbid_decoding, wide_png
from tests.deploy.conftest import png_bytes, small_package

REPO = Path(__file__).resolve().parents[2]
_real_load = cli.load_model


def test_score_folder_with_a_broken_image(kde_package: Path, digits_cell, tmp_path: Path) -> None:
    images = load_image_dataset(digits_cell["dataset"]).test_images[:6]
    folder = tmp_path / "line"
    (folder / "sub").mkdir(parents=True)
    good = [folder / f"img{i}.png" for i in range(5)] + [folder / "sub" / "img5.png"]
    for path, image in zip(good, images, strict=True):
        path.write_bytes(png_bytes(image))
    (folder / "broken.png").write_bytes(png_bytes(images[0])[:60])  # truncated
    (folder / "fake.jpg").write_text("not a jpeg")
    (tmp_path / "empty").mkdir()
    output = tmp_path / "out" / "scores.csv"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline_lib.deploy.cli",
            "score",
            "--model",
            str(kde_package),
            str(folder),
            str(tmp_path / "empty"),
            "--output",
            str(output),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    with open(output) as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["file"] for row in rows) == sorted(str(path) for path in good)
    package = PackagedDetector.load(kde_package)
    expected = dict(zip(map(str, good), package.anomaly_scores(images), strict=True))
    for row in rows:
        assert (
            float(row["anomaly_score"]) == np.float64(expected[row["file"]]).round(12)
            or abs(float(row["anomaly_score"]) - expected[row["file"]]) < 1e-9
        )
        assert row["is_anomaly"] == str(expected[row["file"]] > package.threshold)
    with open(output.with_name("scores_errors.csv")) as handle:
        errors = {row["file"]: row["error"] for row in csv.DictReader(handle)}
    assert set(errors) == {
        str(folder / "broken.png"),
        str(folder / "fake.jpg"),
        str(tmp_path / "empty"),
    }
    assert "truncated" in errors[str(folder / "broken.png")]
    assert "broken.png" in result.stderr and "scored 6 image(s)" in result.stderr
    assert not list(output.parent.glob("*.partial"))


# Streaming, atomic CSVs and exit statuses (in-process: faults are injected by monkeypatch).


def _folder_of_pngs(digits_cell, folder: Path, n: int) -> list[Path]:
    images = load_image_dataset(digits_cell["dataset"]).test_images[:n]
    folder.mkdir(parents=True)
    paths = [folder / f"img{i}.png" for i in range(n)]
    for path, image in zip(paths, images, strict=True):
        path.write_bytes(png_bytes(image))
    return paths


def _failing_model(monkeypatch, *, on_call: int, error: BaseException) -> list[int]:
    """``cli.load_model`` whose package raises ``error`` on its ``on_call``-th scoring."""
    calls: list[int] = []
    real = cli.load_model

    def load(uri, **kwargs):
        package = real(uri, **kwargs)
        original = package.anomaly_scores

        def scores(images):
            calls.append(len(images))
            if len(calls) == on_call:
                raise error
            return original(images)

        package.anomaly_scores = scores
        return package

    monkeypatch.setattr(cli, "load_model", load)
    return calls


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_crash_after_the_first_chunk_keeps_its_rows_in_a_partial_file(
    kde_package: Path, digits_cell, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(cli, "CHUNK", 2)
    paths = _folder_of_pngs(digits_cell, tmp_path / "line", 5)
    calls = _failing_model(monkeypatch, on_call=2, error=RuntimeError("injected fault"))
    output = tmp_path / "out" / "scores.csv"
    argv = ["score", "--model", str(kde_package), str(tmp_path / "line"), "--output", str(output)]
    status = cli.main([*argv, "--no-progress"])
    assert status == cli.EXIT_INTERNAL == cli.EXIT_NOTHING_SCORED == 2
    assert calls == [2, 2]  # the first chunk scored, the second failed
    assert not output.exists() and not (tmp_path / "out" / "scores_errors.csv").exists()
    partial = _read_csv(tmp_path / "out" / "scores.csv.partial")
    package = PackagedDetector.load(kde_package)
    images = load_image_dataset(digits_cell["dataset"]).test_images[:2]
    expected = package.anomaly_scores(images)
    assert [row["file"] for row in partial] == [str(p) for p in paths[:2]]
    for row, score in zip(partial, expected, strict=True):
        assert abs(float(row["anomaly_score"]) - score) <= 1e-9 * max(1.0, abs(score))
    assert _read_csv(tmp_path / "out" / "scores_errors.csv.partial") == []
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("droc:")]
    assert len(lines) == 1 and "internal error: RuntimeError: injected fault" in lines[0]
    assert "2 scored row(s) kept in" in lines[0] and "scores.csv.partial" in lines[0]
    assert "Traceback" not in err and "--verbose" in lines[0]

    _failing_model(monkeypatch, on_call=1, error=RuntimeError("injected fault"))
    assert cli.main([*argv, "--no-progress", "--verbose"]) == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "Traceback" in err and "injected fault" in err
    assert _read_csv(tmp_path / "out" / "scores.csv.partial") == []  # rewritten by this run


def test_interrupt_keeps_partial_rows_and_a_clean_run_renames_them(
    kde_package: Path, digits_cell, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(cli, "CHUNK", 2)
    _folder_of_pngs(digits_cell, tmp_path / "line", 5)
    (tmp_path / "line" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    _failing_model(monkeypatch, on_call=3, error=KeyboardInterrupt())
    output = tmp_path / "scores.csv"
    argv = ["score", "--model", str(kde_package), str(tmp_path / "line"), "--output", str(output)]
    assert cli.main([*argv, "--no-progress"]) == cli.EXIT_INTERRUPTED == 130
    assert not output.exists()
    # Chunks of 2 files: (broken.png, img0) (img1, img2) scored, then Ctrl-C in the third.
    scored = _read_csv(tmp_path / "scores.csv.partial")
    assert [Path(row["file"]).name for row in scored] == ["img0.png", "img1.png", "img2.png"]
    errors = _read_csv(tmp_path / "scores_errors.csv.partial")
    assert [row["file"] for row in errors] == [str(tmp_path / "line" / "broken.png")]
    assert "interrupted: 3 scored row(s) kept in" in capsys.readouterr().err

    monkeypatch.setattr(cli, "load_model", _real_load)
    assert cli.main([*argv, "--no-progress"]) == cli.EXIT_SOME_ERRORS
    assert len(_read_csv(output)) == 5 and len(_read_csv(tmp_path / "scores_errors.csv")) == 1
    assert not list(tmp_path.glob("*.partial"))


def test_chunks_follow_the_pixel_budget_from_headers_alone(tmp_path: Path, monkeypatch) -> None:
    small = np.zeros((20, 30, 3), np.uint8)  # 600 pixels
    paths = []
    for name, data in [
        ("a.png", png_bytes(small)),
        ("b.png", png_bytes(small)),
        ("wide.png", wide_png()),
        ("c.png", png_bytes(small)),
        ("big.png", png_bytes(np.zeros((40, 50, 3), np.uint8))),  # 2,000 pixels
        ("d.png", png_bytes(small)),
        ("empty.png", b""),
    ]:
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    attempts = forbid_decoding(monkeypatch)
    chunks = list(cli.chunk_files(paths, size=16, chunk_pixels=1_500))
    assert attempts == []
    assert [[p.name for p in files] for files, _ in chunks] == [
        ["a.png", "b.png"],
        ["c.png"],
        ["big.png"],  # over the budget alone: a chunk of its own
        ["d.png"],
    ]
    errors = {Path(path).name: reason for _, found in chunks for path, reason in found}
    assert set(errors) == {"wide.png", "empty.png"}
    assert "intermediate" in errors["wide.png"] and "empty file" in errors["empty.png"]


def test_max_pixels_above_pillows_limit_reads_files_and_says_over_the_limit(
    tmp_path: Path, monkeypatch
) -> None:
    # Pillow's limit lowered to 100 stands for its 89.5 M: a 40 x 30 file is 12 times it.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    path = tmp_path / "big.png"
    path.write_bytes(png_bytes(np.full((30, 40, 3), 5, np.uint8)))
    assert np.all(read_image_file(path, size=8, max_pixels=2_000) == 5)
    assert cli.chunk_files([path], size=8, max_pixels=2_000).__next__() == ([path], [])
    for limit in (50, 500):  # below and above Pillow's own (lowered) limit
        with pytest.raises(ImageSizeError, match=f"over the limit of {limit:,}") as caught:
            read_image_file(path, size=8, max_pixels=limit)
        assert "corrupt" not in str(caught.value)
    assert Image.MAX_IMAGE_PIXELS == 100


def test_a_file_is_not_read_whole_before_its_header_passes(tmp_path: Path) -> None:
    path = tmp_path / "padded.png"
    path.write_bytes(png_bytes(np.full((10, 10, 3), 3, np.uint8)))
    with open(path, "r+b") as handle:  # 64 MiB of (sparse) trailing bytes after the image
        handle.truncate(64 * 2**20)
    tracemalloc.start()
    try:
        pixels = read_image_file(path, size=8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.all(pixels == 3)
    assert peak < 2**20, f"peak {peak:,} bytes: the file was read whole"


def test_a_folder_with_a_fifo_and_a_device_link_scores_the_images_and_names_the_rest(
    kde_package: Path, digits_cell, tmp_path: Path, capsys
) -> None:
    paths = _folder_of_pngs(digits_cell, tmp_path / "line", 3)
    os.mkfifo(tmp_path / "line" / "pipe.png")
    (tmp_path / "line" / "zero.png").symlink_to("/dev/zero")
    output = tmp_path / "scores.csv"
    argv = ["score", "--model", str(kde_package), str(tmp_path / "line"), "--output", str(output)]
    assert cli.main([*argv, "--no-progress"]) == cli.EXIT_SOME_ERRORS
    assert [row["file"] for row in _read_csv(output)] == [str(p) for p in paths]
    errors = {
        Path(row["file"]).name: row["error"] for row in _read_csv(tmp_path / "scores_errors.csv")
    }
    assert errors == {
        "pipe.png": "not a regular file: a FIFO (named pipe); not opened",
        "zero.png": "not a regular file: a symlink to /dev/zero, a character device; not opened",
    }
    assert "2 error(s)" in capsys.readouterr().err


def test_the_score_column_says_its_direction_and_the_expected_rates_are_printed(
    kde_package: Path, digits_cell, tmp_path: Path, capsys
) -> None:
    _folder_of_pngs(digits_cell, tmp_path / "line", 2)
    output = tmp_path / "scores.csv"
    argv = ["score", str(tmp_path / "line"), "--output", str(output), "--no-progress"]
    assert cli.main([*argv, "--model", str(kde_package)]) == cli.EXIT_OK
    assert output.read_text().splitlines()[0] == "file,anomaly_score,is_anomaly"
    err = capsys.readouterr().err
    metrics = PackagedDetector.load(kde_package).info["metrics"]
    assert "(anomaly_score > threshold" in err and "higher = more anomalous" in err
    assert (
        f"test split ({metrics['n_test']} images): TPR {metrics['test_tpr']:.3f}, "
        f"FPR {metrics['test_fpr']:.3f} (target FPR 0.05)"
    ) in err
    small_package(tmp_path / "unmeasured")  # written without the packaging step's metrics
    assert cli.main([*argv, "--model", str(tmp_path / "unmeasured")]) == cli.EXIT_OK
    assert "expected TPR / FPR at this threshold: not recorded in the package" in (
        capsys.readouterr().err
    )


def test_a_missing_model_folder_is_named_as_such(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.png").write_bytes(png_bytes(np.zeros((8, 8, 3), np.uint8)))
    argv = ["score", str(tmp_path / "a.png"), "--output", str(tmp_path / "out.csv")]
    assert cli.main([*argv, "--model", str(tmp_path / "missing_dir")]) == 2
    err = capsys.readouterr().err
    assert f"--model {tmp_path / 'missing_dir'}: no such folder" in err
    assert "models:/NAME/VERSION" in err and "tracking-uri" not in err
    (tmp_path / "file.txt").write_text("x")
    assert cli.main([*argv, "--model", str(tmp_path / "file.txt")]) == 2
    assert "is a file, not a package folder" in capsys.readouterr().err
    os.mkfifo(tmp_path / "pipe")
    assert cli.main([*argv, "--model", str(tmp_path / "pipe")]) == 2
    assert "is a FIFO (named pipe), not a package folder" in capsys.readouterr().err
