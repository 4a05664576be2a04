"""Data provenance: the files a reader opened, their checksums, and the official comparison."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np
import pytest

from pipeline_lib.data.provenance import (
    OFFICIAL_RELEASES,
    OfficialFile,
    OfficialRelease,
    compare_with_official,
    data_files,
    data_provenance,
    file_checksums,
    record_data_provenance,
    recording_reads,
)
from pipeline_lib.paper.protocol import data_notes

CIFAR10_FILES = [
    "batches.meta",
    "data_batch_1",
    "data_batch_2",
    "data_batch_3",
    "data_batch_4",
    "data_batch_5",
    "test_batch",
]


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_fake_cifar10_pickles_are_not_the_official_files(tmp_path, write_cifar10) -> None:
    write_cifar10(tmp_path)
    record = record_data_provenance("cifar10", root=tmp_path)
    # Every file the reader opened, once, relative to the data root, with its checksums.
    assert sorted(f["path"] for f in record["files"]) == [
        f"cifar-10-batches-py/{name}" for name in CIFAR10_FILES
    ]
    for entry in record["files"]:
        path = tmp_path / entry["path"]
        assert entry["bytes"] == path.stat().st_size
        assert entry["md5"] == _md5(path)
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        expected = OFFICIAL_RELEASES["cifar10"].files[path.name].md5
        assert entry["official"] is False and entry["official_md5"] == expected
    assert record["official"] is False and record["release"] == "CIFAR-10 (python version)"
    assert record["reason"] == "md5 mismatch: " + ", ".join(
        Path(f["path"]).name for f in record["files"]
    )


def test_files_whose_md5_is_the_official_one_are_official(
    tmp_path, write_cifar10, monkeypatch
) -> None:
    write_cifar10(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    real = {name: OfficialFile(_md5(folder / name)) for name in CIFAR10_FILES}
    release = OfficialRelease("CIFAR-10 (python version)", real, "this test")
    monkeypatch.setitem(OFFICIAL_RELEASES, "cifar10", release)
    record = record_data_provenance("cifar10", root=tmp_path)
    assert record["official"] is True
    assert all(f["official"] is True for f in record["files"])
    assert data_notes([record]) == []
    # One file back to torchvision's value: that one, and only it, is named.
    one_off = {**real, "data_batch_3": OfficialFile("c" * 32)}
    monkeypatch.setitem(OFFICIAL_RELEASES, "cifar10", OfficialRelease("C", one_off, "test"))
    record = record_data_provenance("cifar10_rotated", root=tmp_path)  # the same files
    assert record["official"] is False and record["reason"] == "md5 mismatch: data_batch_3"


def test_cifar100_pickles_are_compared_with_cifar100s_list(tmp_path, write_cifar100) -> None:
    write_cifar100(tmp_path)
    record = record_data_provenance("cifar100", root=tmp_path)
    names = sorted(Path(f["path"]).name for f in record["files"])
    assert names == ["meta", "test", "train"]
    assert record["official"] is False and record["release"] == "CIFAR-100 (python version)"


def _gzip_idx(folder: Path, payloads: dict[str, bytes], mtime: int) -> None:
    folder.mkdir(parents=True)
    for stem, payload in payloads.items():
        (folder / f"{stem}.gz").write_bytes(gzip.compress(payload, mtime=mtime))


def test_gzip_files_are_identified_by_their_decompressed_content(
    tmp_path, write_idx_set, monkeypatch
) -> None:
    plain = tmp_path / "plain"
    write_idx_set(plain, gz=False)
    payloads = {p.name: p.read_bytes() for p in plain.iterdir()}
    # The same content gzipped twice, with different mtimes in the gzip header.
    _gzip_idx(tmp_path / "a" / "fashion-mnist", payloads, mtime=1)
    _gzip_idx(tmp_path / "b" / "fashion-mnist", payloads, mtime=2)
    first = record_data_provenance("fmnist", root=tmp_path / "a")
    second = record_data_provenance("fmnist", root=tmp_path / "b")
    assert [f["path"] for f in first["files"]] == [f["path"] for f in second["files"]]
    assert len(first["files"]) == 4
    for one, two in zip(first["files"], second["files"], strict=True):
        assert one["md5"] != two["md5"]  # the .gz files differ ...
        assert one["content_md5"] == two["content_md5"]  # ... their content does not
        stem = Path(one["path"]).name[:-3]
        assert one["content_md5"] == hashlib.md5(payloads[stem]).hexdigest()
        assert one["content_bytes"] == len(payloads[stem])
    assert first["official"] is False and second["official"] is False
    assert first["files"][0]["compared"] == "decompressed content"
    # With this content as the official one, both copies are official.
    content = {
        Path(f["path"]).name[:-3]: OfficialFile(f["content_md5"], gz_md5="0" * 32)
        for f in first["files"]
    }
    monkeypatch.setitem(OFFICIAL_RELEASES, "fmnist", OfficialRelease("F", content, "test"))
    for root in ("a", "b"):
        assert record_data_provenance("fmnist", root=tmp_path / root)["official"] is True


def test_mnist_without_an_official_content_md5_is_unknown(tmp_path, write_idx_set) -> None:
    write_idx_set(tmp_path / "mnist", gz=False)
    record = record_data_provenance("mnist", root=tmp_path)
    assert record["official"] == "unknown" and len(record["files"]) == 4
    assert record["reason"].startswith("not checked: train-images-idx3-ubyte")
    assert "only of the gzip files" in record["reason"]
    [line] = data_notes([record])
    assert line.startswith("Data: mnist files are not checked against an official release")


def test_official_gzip_files_match_without_their_content_md5() -> None:
    release = OFFICIAL_RELEASES["mnist"]
    stem = "t10k-labels-idx1-ubyte"
    gz_md5 = release.files[stem].gz_md5
    matched = compare_with_official(f"{stem}.gz", {"md5": gz_md5, "content_md5": "x"}, release)
    assert matched["official"] is True and matched["compared"] == "gzip file"
    other = compare_with_official(f"{stem}.gz", {"md5": "0" * 32, "content_md5": "x"}, release)
    assert other["official"] is None and "re-compressed" in other["compared"]


def test_the_gzip_header_does_not_change_the_content_md5(tmp_path) -> None:
    payload = np.arange(1000, dtype=np.uint8).tobytes()
    a, b = tmp_path / "a.gz", tmp_path / "b.gz"
    a.write_bytes(gzip.compress(payload, mtime=10))
    b.write_bytes(gzip.compress(payload, mtime=20, compresslevel=1))
    ra, rb = file_checksums(a), file_checksums(b)
    assert ra["md5"] != rb["md5"] and ra["sha256"] != rb["sha256"]
    assert ra["content_md5"] == rb["content_md5"] == hashlib.md5(payload).hexdigest()
    assert {k: v for k, v in ra.items() if k.startswith("content")} == {
        k: v for k, v in rb.items() if k.startswith("content")
    }


def test_only_reads_inside_the_data_locations_are_kept(tmp_path) -> None:
    inside, outside = tmp_path / "root" / "x.bin", tmp_path / "elsewhere.bin"
    inside.parent.mkdir()
    with recording_reads() as opened:
        inside.write_bytes(b"written, not read")  # a write is not recorded
        outside.write_bytes(b"x")
        inside.read_bytes()
        outside.read_bytes()
        inside.read_bytes()  # a second read is one file
    assert opened.count(str(inside)) == 2 and str(outside) in opened
    assert data_files(opened, [tmp_path / "root"]) == [inside]
    outside.read_bytes()
    assert str(outside) in opened and opened.count(str(outside)) == 1  # recording stopped


def test_a_data_set_with_no_official_list_is_unknown() -> None:
    record = record_data_provenance("digits")  # ships with scikit-learn: no data-root file
    assert record["official"] == "unknown" and record["files"] == []
    assert record["reason"] == "no official checksums are known for digits"


def test_table_notes_name_the_data_sets_that_are_not_official(tmp_path) -> None:
    file = tmp_path / "data_batch_1"
    file.write_bytes(b"not CIFAR")
    record = data_provenance("cifar10", [file], root=tmp_path / "root")
    assert record["files"][0]["path"] == str(file)  # outside the data root: the full path
    assert data_notes([record]) == [
        "Data: cifar10 files differ from the official CIFAR-10 (python version) release "
        "(md5 mismatch: data_batch_1)."
    ]
    with pytest.raises(ValueError, match="lacks"):
        data_notes([{"dataset": "cifar10"}])
