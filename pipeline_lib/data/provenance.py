"""What a data set was read from: each file's checksums, and whether they are the official ones.

The reader runs inside :func:`recording_reads`, which notes every file Python opens for
reading (an audit hook, :func:`sys.addaudithook`): the readers keep no second list of their
files that could drift from what they read. Of those, the files under the data root, under a
folder named by the data set's options (``image_folder``'s ``path``) or under a system data
folder (Debian's Fashion-MNIST) are kept; Python's own imports are not. Each is hashed once,
streamed: size, md5, sha256, and for a gzip file the md5 of its decompressed content, which
identifies a re-gzipped copy of the IDX files.

The official checksums (:data:`OFFICIAL_RELEASES`) are public values: CIFAR-10 and CIFAR-100
from torchvision's ``datasets/cifar.py`` (``train_list``, ``test_list``, ``meta``), the
``.gz`` files of MNIST and Fashion-MNIST from torchvision's ``datasets/mnist.py``
(``resources``). torchvision lists no md5 of the decompressed IDX content; for Fashion-MNIST
those below were computed from Debian's ``dataset-fashion-mnist`` package (upstream git
snapshot 0.0~git20200523.55506a9), whose ``.gz`` files are re-compressed but whose content is
the original data per the package's README; for MNIST they are unknown here, so a
decompressed or re-gzipped MNIST is ``official: "unknown"``, with that reason.

Entries a reader left out because they are not regular files (a FIFO, a device, a dangling
symlink under an image's name: :mod:`pipeline_lib.data.regular_files`) are listed in the
record's ``skipped``, with their reason, beside the files that were read.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_lib.data import DATASETS, DataError, load_dataset, resolve_data_root
from pipeline_lib.data.collectors import Collectors
from pipeline_lib.data.mnist import DEBIAN_FMNIST_DIR
from pipeline_lib.data.regular_files import recording_skipped

__all__ = [
    "OFFICIAL_RELEASES",
    "SYSTEM_DATA_DIRS",
    "OfficialFile",
    "OfficialRelease",
    "compare_with_official",
    "data_files",
    "data_provenance",
    "file_checksums",
    "record_data_provenance",
    "recording_reads",
    "release_of",
]

_CHUNK = 1 << 20

#: Folders outside the data root that a reader may read (:func:`pipeline_lib.data.mnist.
#: read_fmnist` falls back to Debian's package).
SYSTEM_DATA_DIRS: tuple[Path, ...] = (DEBIAN_FMNIST_DIR,)


@dataclass(frozen=True)
class OfficialFile:
    """Public checksums of one file of an official release.

    Parameters
    ----------
    md5 : str or None
        md5 of the file's content as read (the pickle; the decompressed IDX bytes); None
        when no public value is known.
    gz_md5 : str or None, default=None
        md5 of the ``.gz`` file as distributed, for releases shipped gzipped.
    """

    md5: str | None
    gz_md5: str | None = None


@dataclass(frozen=True)
class OfficialRelease:
    """The files of one official release, by file name without ``.gz``."""

    title: str
    files: Mapping[str, OfficialFile]
    source: str


def _idx(
    gz: tuple[str, str, str, str], content: tuple[str, str, str, str] | None
) -> dict[str, OfficialFile]:
    names = (
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    )
    contents = content or (None,) * 4
    return {n: OfficialFile(c, g) for n, g, c in zip(names, gz, contents, strict=True)}


#: Release id -> its official files (module docstring: where each value comes from).
OFFICIAL_RELEASES: Mapping[str, OfficialRelease] = {
    "cifar10": OfficialRelease(
        "CIFAR-10 (python version)",
        {
            "data_batch_1": OfficialFile("c99cafc152244af753f735de768cd75f"),
            "data_batch_2": OfficialFile("d4bba439e000b95fd0a9bffe97cbabec"),
            "data_batch_3": OfficialFile("54ebc095f3ab1f0389bbae665268c751"),
            "data_batch_4": OfficialFile("634d18415352ddfa80567beed471001a"),
            "data_batch_5": OfficialFile("482c414d41f54cd18b22e5b47cb7c3cb"),
            "test_batch": OfficialFile("40351d587109b95175f43aff81a1287e"),
            "batches.meta": OfficialFile("5ff9c542aee3614f3951f8cda6e48888"),
        },
        "torchvision datasets/cifar.py (CIFAR10.train_list, test_list, meta)",
    ),
    "cifar100": OfficialRelease(
        "CIFAR-100 (python version)",
        {
            "train": OfficialFile("16019d7e3df5f24257cddd939b257f8d"),
            "test": OfficialFile("f0ef6b0ae62326f3e7ffdfab6717acfc"),
            "meta": OfficialFile("7973b15100ade9c7d40fb424638fde48"),
        },
        "torchvision datasets/cifar.py (CIFAR100.train_list, test_list, meta)",
    ),
    "fmnist": OfficialRelease(
        "Fashion-MNIST",
        _idx(
            (
                "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                "25c81989df183df01b3e8a0aad5dffbe",
                "bef4ecab320f06d8554ea6380940ec79",
                "bb300cfdad3c16e7a12a480ee83cd310",
            ),
            # Decompressed content, computed from Debian's dataset-fashion-mnist package.
            (
                "f4a8712d7a061bf5bd6d2ca38dc4d50a",
                "9018921c3c673c538a1fc5bad174d6f9",
                "8181f5470baa50b63fa0f6fddb340f0a",
                "15d484375f8d13e6eb1aabb0c3f46965",
            ),
        ),
        "torchvision datasets/mnist.py (FashionMNIST.resources, the .gz files); the "
        "decompressed content's md5 from Debian's dataset-fashion-mnist package",
    ),
    "mnist": OfficialRelease(
        "MNIST",
        _idx(
            (
                "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                "d53e105ee54ea40749a09fcbcd1e9432",
                "9fb629c4189551a2d022fa330f9573f3",
                "ec29112dd5afa0611ce80d1b7f02629c",
            ),
            None,
        ),
        "torchvision datasets/mnist.py (MNIST.resources, the .gz files only)",
    ),
}

# Data set id -> the release its files come from (a derived data set reads its source's).
_RELEASE_OF = {
    "cifar10": "cifar10",
    "cifar10_rotated": "cifar10",
    "cifar100": "cifar100",
    "fmnist": "fmnist",
    "mnist": "mnist",
}


def release_of(dataset: str) -> str | None:
    """The id in :data:`OFFICIAL_RELEASES` of a data set's files (None: no official list)."""
    return _RELEASE_OF.get(dataset)


# --- recording what a reader opens --------------------------------------------------------

_READS: Collectors[str] = Collectors()
_HOOK_INSTALLED = False
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    # Runs on every audited event of the process: cheap, and it must never raise (an
    # exception here would make the open itself fail).
    if event != "open" or not _READS.open_collections():
        return
    try:
        path, mode, flags = args[0], args[1], args[2]
        if path is None or isinstance(path, int):
            return
        if mode is None:
            if isinstance(flags, int) and flags & _WRITE_FLAGS:
                return
        elif any(char in str(mode) for char in "wax+"):
            return
        name = os.fsdecode(path)
        for opened in _READS.open_collections():
            opened.append(name)
    except Exception:  # noqa: BLE001 - see above: the hook must not break an open
        return


@contextmanager
def recording_reads() -> Iterator[list[str]]:
    """Collect the paths of every file opened for reading while the block runs.

    Yields
    ------
    list of str
        Filled while the block runs (every thread of the process), in opening order, with
        repeats; :func:`data_provenance` keeps the data files among them.
    """
    global _HOOK_INSTALLED
    with _READS.lock:
        if not _HOOK_INSTALLED:
            sys.addaudithook(_on_audit)  # process-wide and permanent: installed once
            _HOOK_INSTALLED = True
    with _READS.collecting() as opened:
        yield opened


def data_files(opened: Iterable[str], locations: Sequence[Path]) -> list[Path]:
    """The regular files among ``opened`` inside one of ``locations``, first opening order.

    Parameters
    ----------
    opened : iterable of str
        Paths from :func:`recording_reads`.
    locations : sequence of Path
        Folders whose files count as data (the data root, :data:`SYSTEM_DATA_DIRS`, ...).

    Returns
    -------
    list of Path
        Absolute paths, each once.
    """
    places = [Path(os.path.abspath(p)) for p in locations]
    out: dict[Path, None] = {}
    for name in opened:
        path = Path(os.path.abspath(name))
        if path in out or not path.is_file():
            continue
        if any(path.is_relative_to(place) for place in places):
            out[path] = None
    return list(out)


# --- checksums and the verdict -------------------------------------------------------------


def file_checksums(path: str | os.PathLike) -> dict[str, Any]:
    """Size, md5 and sha256 of a file, streamed; for ``.gz`` also its content's md5.

    Returns
    -------
    dict
        ``bytes``, ``md5``, ``sha256``; for a gzip file ``content_md5`` (md5 of the
        decompressed bytes: equal for two compressions of the same content) and
        ``content_bytes``.

    Raises
    ------
    DataError
        If a ``.gz`` file is not a readable gzip stream.
    """
    path = Path(path)
    md5, sha256, size = hashlib.md5(usedforsecurity=False), hashlib.sha256(), 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            md5.update(chunk)
            sha256.update(chunk)
            size += len(chunk)
    record: dict[str, Any] = {"bytes": size, "md5": md5.hexdigest(), "sha256": sha256.hexdigest()}
    if path.suffix == ".gz":
        content, content_size = hashlib.md5(usedforsecurity=False), 0
        try:
            with gzip.open(path, "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    content.update(chunk)
                    content_size += len(chunk)
        except (OSError, EOFError) as err:
            raise DataError(f"cannot decompress {path} to hash it: {err}") from err
        record["content_md5"] = content.hexdigest()
        record["content_bytes"] = content_size
    return record


def compare_with_official(
    name: str, checksums: Mapping[str, Any], release: OfficialRelease
) -> dict[str, Any]:
    """The official check of one file: ``official`` True / False / None and what was compared.

    A ``.gz`` file is official if it is the distributed file (``gz_md5``) or if its
    decompressed content is the official content (``md5``): a re-compressed copy of the
    original data is the original data.

    Parameters
    ----------
    name : str
        File name (``data_batch_1``, ``train-images-idx3-ubyte.gz``).
    checksums : mapping
        :func:`file_checksums` of the file.
    release : OfficialRelease

    Returns
    -------
    dict
        ``official`` (True, False or None: nothing to compare with), ``compared`` (what was
        compared, or why nothing was) and, when compared, ``official_md5``.
    """
    stem = name[:-3] if name.endswith(".gz") else name
    expected = release.files.get(stem)
    if expected is None:
        return {"official": None, "compared": f"not a file of the official {release.title}"}
    if "content_md5" in checksums:  # a gzip file
        if expected.gz_md5 is not None and checksums["md5"] == expected.gz_md5:
            return {"official": True, "compared": "gzip file", "official_md5": expected.gz_md5}
        key, compared = "content_md5", "decompressed content"
        unknown = (
            "the gzip file differs from the official one (re-compressed?) and "
            "no official md5 of the decompressed content is known"
        )
    else:
        key, compared = "md5", "file"
        unknown = "no official md5 of the decompressed content is known (only of the gzip files)"
    if expected.md5 is None:
        return {"official": None, "compared": unknown}
    return {
        "official": checksums[key] == expected.md5,
        "compared": compared,
        "official_md5": expected.md5,
    }


def data_provenance(
    dataset: str,
    files: Sequence[str | os.PathLike],
    *,
    root: str | os.PathLike,
    skipped: Sequence[tuple[str | os.PathLike, str]] = (),
) -> dict[str, Any]:
    """The provenance record of a data set read from ``files``.

    Parameters
    ----------
    dataset : str
        Data set id (:data:`pipeline_lib.data.DATASETS`).
    files : sequence of path
        The files the reader read.
    root : path
        The data root: paths inside it are recorded relative to it, others in full.
    skipped : sequence of (path, str), default=()
        Entries the reader left out unopened and why
        (:func:`pipeline_lib.data.regular_files.recording_skipped`).

    Returns
    -------
    dict
        ``dataset``, ``release`` (title of the official release, or None), ``official``
        (``True``: every file matches the official checksums; ``False``: some file differs;
        ``"unknown"``: no official checksums to compare some file with, or no file was
        read), ``reason`` (the mismatching or unchecked files), ``checksum_source``, and
        ``files``: per file ``path``, ``bytes``, ``md5``, ``sha256`` (``content_md5`` for
        ``.gz``), ``official`` (True / False / None), ``compared`` and ``official_md5``;
        ``skipped``: per entry left out ``path`` and ``reason``.
    """
    root = Path(os.path.abspath(root))

    def shown_path(file: str | os.PathLike) -> str:
        path = Path(os.path.abspath(file))
        return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)

    release_id = release_of(dataset)
    release = OFFICIAL_RELEASES.get(release_id) if release_id else None
    records = []
    for file in files:
        path = Path(os.path.abspath(file))
        checksums = file_checksums(path)
        record = {"path": shown_path(path), **checksums}
        if release is not None:
            record.update(compare_with_official(path.name, checksums, release))
        records.append(record)
    official: bool | str
    if release is None:
        official, reason = "unknown", f"no official checksums are known for {dataset}"
    elif not records:
        official, reason = "unknown", "no file was read from the data root"
    else:
        names = [Path(r["path"]).name for r in records]
        wrong = [n for n, r in zip(names, records, strict=True) if r["official"] is False]
        unsure = [n for n, r in zip(names, records, strict=True) if r["official"] is None]
        if wrong:
            official, reason = False, "md5 mismatch: " + ", ".join(wrong)
        elif unsure:
            compared = {r["compared"] for r in records if r["official"] is None}
            official = "unknown"
            reason = f"not checked: {', '.join(unsure)} ({'; '.join(sorted(compared))})"
        else:
            official, reason = True, "every file matches the official md5"
    return {
        "dataset": dataset,
        "release": release.title if release else None,
        "official": official,
        "reason": reason,
        "checksum_source": release.source if release else None,
        "files": records,
        "skipped": [{"path": shown_path(path), "reason": reason} for path, reason in skipped],
    }


def record_data_provenance(
    dataset: str,
    options: Mapping[str, Any] | None = None,
    *,
    root: str | os.PathLike | None = None,
    download: bool = False,
) -> dict[str, Any]:
    """Read ``dataset`` as :func:`pipeline_lib.data.load_dataset` does and record its files.

    Parameters
    ----------
    dataset : str
        Data set id.
    options : mapping, optional
        The reader options (a config's ``datasets.<id>.options``).
    root : path, optional
        Data root, see :func:`pipeline_lib.data.resolve_data_root`.
    download : bool, default=False
        As for ``load_dataset``.

    Returns
    -------
    dict
        :func:`data_provenance` of the files the reader opened, and of the entries it left
        out (not regular files).

    Raises
    ------
    DataError
        As ``load_dataset``; or if ``dataset`` is unknown.
    """
    if dataset not in DATASETS:
        raise DataError(f"unknown dataset {dataset!r}; allowed: {', '.join(DATASETS)}")
    options = dict(options or {})
    data_root = resolve_data_root(root)
    with recording_reads() as opened, recording_skipped() as skipped:
        load_dataset(dataset, root=root, download=download, **options)
    locations = [data_root, *SYSTEM_DATA_DIRS]
    if options.get("path"):
        locations.append(Path(options["path"]))
    return data_provenance(dataset, data_files(opened, locations), root=data_root, skipped=skipped)
