"""Atomic writes and the file formats of ``pipeline_lib.runtime.io``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data import ImageDataset
from pipeline_lib.runtime.io import (
    atomic_path,
    load_dataset_labels,
    load_image_dataset,
    load_json,
    load_npz,
    save_image_dataset,
    save_json,
    save_npz,
)


def test_atomic_path_renames_onto_target_on_success(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.txt"
    with atomic_path(target) as tmp:
        assert tmp.parent == target.parent
        assert tmp != target
        assert not target.exists()
        tmp.write_text("done")
    assert target.read_text() == "done"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]


def test_atomic_path_leaves_nothing_when_the_body_raises(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError, match="boom"), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_path_keeps_the_old_file_when_the_body_raises(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    save_json(target, {"a": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("{trunc")
        raise RuntimeError("boom")
    assert load_json(target) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_atomic_path_syncs_the_file_before_the_rename_and_the_folder_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str, int]] = []
    fsync, replace = os.fsync, os.replace

    def counting_fsync(fd: int) -> None:
        info = os.fstat(fd)
        kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
        events.append(
            ("fsync", os.readlink(f"/proc/self/fd/{fd}"), info.st_size if kind == "file" else -1)
        )
        fsync(fd)

    def recording_replace(source, target) -> None:
        events.append(("replace", str(target), 0))
        replace(source, target)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    target = tmp_path / "sub" / "result.json"
    save_json(target, {"auroc": 0.5})
    size = target.stat().st_size
    assert [event[0] for event in events] == ["fsync", "replace", "fsync"]
    synced_file, renamed, synced_dir = events
    # the temporary file, whole (its final size), then the rename, then the folder
    assert Path(synced_file[1]).parent == target.parent and synced_file[1] != str(target)
    assert synced_file[2] == size > 0
    assert renamed[1] == str(target)
    assert synced_dir[1] == str(target.parent) and synced_dir[2] == -1

    events.clear()
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "failed.txt") as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert events == []  # a failed body is neither synced nor renamed


def test_npz_round_trip(tmp_path: Path) -> None:
    arrays = {
        "f": np.arange(12, dtype=np.float32).reshape(3, 4),
        "index": np.array([5, 1, 9], dtype=np.int64),
        "flag": np.array([0, 1, 1], dtype=np.int8),
    }
    path = tmp_path / "features.npz"
    save_npz(path, arrays)
    loaded = load_npz(path)
    assert set(loaded) == set(arrays)
    for name, value in arrays.items():
        assert loaded[name].dtype == value.dtype
        np.testing.assert_array_equal(loaded[name], value)
    assert [p.name for p in tmp_path.iterdir()] == ["features.npz"]


def test_json_round_trip_with_numpy_values(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    save_json(
        path,
        {"auroc": np.float64(91.5), "n_fit": np.int64(40), "a": np.array([1, 2]), "p": Path("x")},
    )
    assert load_json(path) == {"auroc": 91.5, "n_fit": 40, "a": [1, 2], "p": "x"}
    text = path.read_text()
    assert text.endswith("}\n")
    assert text.index('"a"') < text.index('"auroc"') < text.index('"n_fit"')


def test_save_json_rejects_unserialisable_values_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    with pytest.raises(TypeError, match="cannot serialise object"):
        save_json(path, {"x": object()})
    assert list(tmp_path.iterdir()) == []


def test_load_json_on_truncated_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    path.write_text('{"auroc": 9')
    with pytest.raises(ValueError, match="is not valid JSON") as info:
        load_json(path)
    assert str(path) in str(info.value)
    assert "re-run" in str(info.value)


@pytest.fixture
def dataset() -> ImageDataset:
    rng = np.random.default_rng(0)
    return ImageDataset(
        name="digits",
        train_images=rng.integers(0, 256, size=(6, 8, 8, 3), dtype=np.uint8),
        train_labels=np.array([0, 1, 2, 0, 1, 2], dtype=np.int64),
        test_images=rng.integers(0, 256, size=(4, 8, 8, 3), dtype=np.uint8),
        test_labels=np.array([2, 1, 0, 0], dtype=np.int64),
        class_names=("0", "1", "t_shirt_top"),
    )


def test_image_dataset_round_trip(tmp_path: Path, dataset: ImageDataset) -> None:
    path = tmp_path / "cache" / "digits.npz"
    save_image_dataset(path, dataset)
    loaded = load_image_dataset(path)
    assert isinstance(loaded, ImageDataset)
    assert loaded.name == "digits"
    assert loaded.class_names == ("0", "1", "t_shirt_top")
    assert all(isinstance(name, str) for name in loaded.class_names)
    for field in ("train_images", "train_labels", "test_images", "test_labels"):
        assert getattr(loaded, field).dtype == getattr(dataset, field).dtype
        np.testing.assert_array_equal(getattr(loaded, field), getattr(dataset, field))


def test_load_dataset_labels_round_trip(tmp_path: Path, dataset: ImageDataset) -> None:
    path = tmp_path / "digits.npz"
    save_image_dataset(path, dataset)
    train_labels, test_labels, names = load_dataset_labels(path)
    np.testing.assert_array_equal(train_labels, dataset.train_labels)
    np.testing.assert_array_equal(test_labels, dataset.test_labels)
    assert train_labels.dtype == np.int64
    assert names == ("0", "1", "t_shirt_top")


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_atomic_path_gives_the_mode_a_plain_open_gives(tmp_path: Path, umask: int) -> None:
    # mkstemp creates 0o600; results must be readable like any file open() creates.
    previous = os.umask(umask)
    try:
        (tmp_path / "plain.txt").write_text("x")
        with atomic_path(tmp_path / "atomic.txt") as tmp:
            tmp.write_text("x")
    finally:
        os.umask(previous)
    plain = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    atomic = stat.S_IMODE((tmp_path / "atomic.txt").stat().st_mode)
    assert plain == 0o666 & ~umask
    assert atomic == plain


def test_atomic_path_keeps_the_suffix_for_format_sniffing_writers(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "figure.png") as tmp:
        assert tmp.suffix == ".png"
        tmp.write_bytes(b"")
