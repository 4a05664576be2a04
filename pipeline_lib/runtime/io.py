"""File I/O with atomic writes: a failed job never leaves a file that looks complete."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np


def _current_umask() -> int:
    """The process umask, read without changing it where the OS allows.

    ``os.umask`` can only be read by setting it; between the two calls another thread's
    new file would get the temporary mask, so Linux's ``/proc/self/status`` is preferred.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


#: A folder ``fsync`` some file systems refuse (not a failure: they order metadata
#: themselves, or cannot sync a folder at all).
_DIR_SYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}


def _fsync_file(path: Path) -> None:
    """Flush ``path``'s data to the disk (through a new descriptor: the writer's is closed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Flush ``folder``'s entries, so a rename into it survives a crash."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as error:
        if error.errno in _DIR_SYNC_UNSUPPORTED:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in _DIR_SYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if absent, never truncated).

    Serialises processes on one machine (flock is unreliable on NFS); the file's content is
    not used.
    """
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it onto ``path`` only on success.

    The pipeline's one atomic writer: every result, table, figure and page goes through it,
    so a failed job never leaves a file that looks complete (readers see the old file or
    the whole new one; ``os.replace`` within one folder is atomic).

    Durable too: the file is ``fsync``-ed before the rename and its folder after it, so after
    a crash or power loss (a node going down mid-run) the path holds the old file or the
    whole new one, never an empty or partial file under the final name (``rename`` alone
    orders nothing on ext4/XFS with delayed allocation).

    ``mkstemp`` creates its file ``0o600``; a result must be readable by a colleague or a
    web server like any file ``open()`` creates, so the file gets ``0o666 & ~umask``. The
    temporary name keeps ``path``'s suffix, for writers that pick the format from it
    (``savefig``, pandas compression).

    Parameters
    ----------
    path : str or PathLike
        Final destination; its parent folder is created if needed.

    Yields
    ------
    Path
        The temporary path to write to. On an exception it is removed and ``path`` is left
        untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=target.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_current_umask())
    try:
        yield tmp
        replace_durably(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def replace_durably(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Move the finished file ``source`` onto ``target`` (same folder), surviving a crash.

    :func:`atomic_path`'s last step, for writers that stream into a temporary file of
    their own naming (``droc score``'s ``.partial`` CSVs): ``fsync`` the file, ``os.replace``
    it onto ``target`` (atomic within one folder), ``fsync`` the folder.
    """
    source, target = Path(source), Path(target)
    _fsync_file(source)
    os.replace(source, target)
    _fsync_dir(target.parent)


def save_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write arrays to an uncompressed ``.npz`` atomically."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)


@contextlib.contextmanager
def _reading_npz(path: str | os.PathLike) -> Iterator[Any]:
    """``np.load`` of an ``.npz`` whose errors name the file (numpy's do not).

    Outputs are written atomically, so a damaged file was damaged afterwards (a full disk, a
    copy cut short): the message says to delete it so Snakemake writes it again.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            yield data
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as error:
        raise ValueError(
            f"cannot read {path}: truncated or damaged .npz ({type(error).__name__}: {error}); "
            "delete it and re-run"
        ) from error


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz`` into memory (and close the file)."""
    with _reading_npz(path) as data:
        return {name: data[name] for name in data.files}


def save_json(path: str | os.PathLike, payload: Mapping[str, Any]) -> None:
    """Write JSON atomically, sorted and indented so diffs stay readable."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=_to_builtin) + "\n")


def load_json(path: str | os.PathLike) -> dict[str, Any]:
    """Read a JSON object, naming the file when it is not valid JSON."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON ({error}); delete it and re-run") from error


def _to_builtin(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")


def save_image_dataset(path: str | os.PathLike, dataset: Any) -> None:
    """Cache an :class:`~pipeline_lib.data.ImageDataset` as one ``.npz`` (fast to re-read)."""
    save_npz(
        path,
        {
            "name": np.array(dataset.name),
            "class_names": np.array(dataset.class_names),
            "train_images": dataset.train_images,
            "train_labels": dataset.train_labels,
            "test_images": dataset.test_images,
            "test_labels": dataset.test_labels,
        },
    )


def load_image_dataset(path: str | os.PathLike) -> Any:
    """Read a dataset cache written by :func:`save_image_dataset`."""
    from pipeline_lib.data import ImageDataset

    with _reading_npz(path) as data:
        return ImageDataset(
            name=str(data["name"]),
            train_images=data["train_images"],
            train_labels=data["train_labels"],
            test_images=data["test_images"],
            test_labels=data["test_labels"],
            class_names=tuple(str(name) for name in data["class_names"]),
        )


def load_dataset_labels(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Labels and class names of a dataset cache without reading its pixels (for splits)."""
    with _reading_npz(path) as data:
        names = tuple(str(name) for name in data["class_names"])
        return data["train_labels"], data["test_labels"], names


def _npz_shape(archive: zipfile.ZipFile, name: str) -> tuple[int, ...]:
    """Shape of one array of an open ``.npz`` from its ``.npy`` header (no data read)."""
    with archive.open(f"{name}.npy") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, _, _ = np.lib.format.read_array_header_1_0(handle)
        else:
            shape, _, _ = np.lib.format.read_array_header_2_0(handle)
    return tuple(int(n) for n in shape)


def image_dataset_sizes(path: str | os.PathLike) -> dict[str, Any]:
    """Images per split and their size, from a dataset cache's headers (pixels unread).

    Returns
    -------
    dict
        ``n_train``, ``n_test`` and ``image_size`` (``[height, width]``).

    Raises
    ------
    ValueError
        Naming the file when it is not a dataset cache of :func:`save_image_dataset`.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            train = _npz_shape(archive, "train_images")
            test = _npz_shape(archive, "test_images")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise ValueError(
            f"cannot read the image arrays of {path}: not a dataset cache "
            f"({type(error).__name__}: {error}); delete it to prepare the data set again"
        ) from error
    return {"n_train": train[0], "n_test": test[0], "image_size": list(train[1:3])}
