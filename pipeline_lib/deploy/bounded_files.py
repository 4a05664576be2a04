"""Opening the files of a package folder: once each, as regular files, sizes checked first.

Why: a package arrives as a tarball or a shared folder, and symlinks and special files are
ordinary material in both. ``detector.npz`` as a symlink to ``/dev/zero`` would have the
zip reader search an endless stream for its directory; a FIFO would block the open itself.
So every file the package reader opens (``package.json``, ``detector.json``,
``detector.npz``, ``representation.pt``) goes through :func:`open_package_file`:

* opened once, with ``O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC``: a symlink fails to
  open (where the platform has no ``O_NOFOLLOW``, the ``lstat`` and ``fstat`` inodes are
  compared instead), and a FIFO opens without waiting for a writer;
* ``fstat`` on that descriptor: anything but a regular file (a FIFO, a socket, a device, a
  directory) is refused, named, before a byte is read;
* the size from that ``fstat`` is checked against the file's limit before reading (a sparse
  100 GB file is refused by its size), and that one file object is what zipfile, numpy and
  torch then read.

The package folder itself may be a symlink: :func:`resolve_package_folder` resolves it once.

Archives (``detector.npz``, ``representation.pt``) are zip files: :func:`open_archive` reads
the end-of-archive record first and bounds the central directory it points to (members x
:data:`MAX_ENTRY_BYTES`), so the zip reader never parses a directory of millions of entries,
then checks the member count and the declared uncompressed sizes (a zip bomb declares more
than it may inflate, and Python's zip reader stops at the declared size). JSON files
(``package.json``, ``detector.json``) are read by :func:`read_json`: at most
:data:`MAX_JSON_BYTES`, standard JSON only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pipeline_lib.data.regular_files import describe_mode, not_regular_reason
from pipeline_lib.deploy.package_format import REDEPLOY, REWRITE, PackageError

#: ``open`` flags of a package file: read only, no symlink, no waiting on a FIFO, not
#: inherited by child processes.
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
#: Most bytes one member may take in the zip's central directory (46 fixed bytes, its name,
#: its extra fields). torch and numpy write under 100 (``archive/data/17``, ``a3.npy``).
MAX_ENTRY_BYTES = 1024
#: Most bytes of a JSON file of a package (``detector.json``, ``package.json``).
MAX_JSON_BYTES = 16 * 2**20
#: End-of-archive records (zip's "end of central directory", and its zip64 form).
_EOCD = struct.Struct("<4s4H2LH")
_EOCD_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_ZIP64_EOCD_SIGNATURE = b"PK\x06\x06"
_MAX_COMMENT = 0xFFFF


@dataclass(frozen=True)
class PackageFile:
    """A package file opened by :func:`open_package_file`: its path, reader and size."""

    path: Path
    handle: BinaryIO
    size: int


def resolve_package_folder(folder: str | os.PathLike) -> Path:
    """The package folder with every symlink on its way resolved, once.

    Raises
    ------
    PackageError
        If it does not exist or is not a folder.
    """
    given = Path(folder)
    try:
        resolved = given.resolve(strict=True)
    except (OSError, RuntimeError) as error:
        raise PackageError(
            f"{given}: no such package folder ({getattr(error, 'strerror', None) or error})"
        ) from error
    if not resolved.is_dir():
        raise PackageError(
            f"{given} is {describe_mode(resolved.stat().st_mode)}, not a package folder"
        )
    return resolved


@contextlib.contextmanager
def open_package_file(
    path: Path, *, max_bytes: int, what: str, error: type[PackageError] = PackageError
) -> Iterator[PackageFile]:
    """Open one file of a package as a regular file of at most ``max_bytes`` (module docstring).

    Parameters
    ----------
    path : Path
        The file, inside a folder from :func:`resolve_package_folder`.
    max_bytes : int
        Largest size accepted, from ``fstat``, before anything is read.
    what : str
        What the file is, for the size message (``"a package's JSON file"``).
    error : type, default=PackageError
        The exception class raised (a subclass of :class:`PackageError`).

    Raises
    ------
    PackageError
        (of class ``error``) If the file is missing, a symlink, not a regular file (the
        message names what it is), not readable, or larger than ``max_bytes``.
    """

    def refuse(reason: str) -> PackageError:
        return error(
            f"{path} is {reason}; a package's files must be regular files (no symlinks, FIFOs, "
            f"devices, sockets or folders), so it is refused unread. {REDEPLOY}"
        )

    try:
        fd = os.open(path, OPEN_FLAGS)
    except OSError as exc:
        reason = not_regular_reason(path, follow_symlinks=False)
        if reason == "missing":
            raise error(f"{path} is missing; {REDEPLOY}") from exc
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP) and reason is not None:
            raise refuse(reason) from exc
        raise error(f"{path} cannot be opened ({exc.strerror or exc}); {REDEPLOY}") from exc
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise refuse(describe_mode(status.st_mode))
        if not getattr(os, "O_NOFOLLOW", 0):
            link = os.lstat(path)  # no O_NOFOLLOW: the name must be the file that was opened
            if (link.st_dev, link.st_ino) != (status.st_dev, status.st_ino):
                raise refuse(not_regular_reason(path, follow_symlinks=False) or "replaced")
        if status.st_size > max_bytes:
            raise error(
                f"{path} holds {status.st_size:,} bytes, over the limit of {max_bytes:,} for "
                f"{what}; refused unread. {REDEPLOY}"
            )
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield PackageFile(path, handle, status.st_size)


def read_json(path: Path, *, error: type[PackageError] = PackageError) -> Any:
    """Parse a package's JSON file, opened as a regular file of at most :data:`MAX_JSON_BYTES`.

    Raises
    ------
    PackageError
        (of class ``error``) If the file is missing, not a regular file, over the size limit
        or not JSON (:func:`open_package_file`).
    """
    with open_json_file(path, error=error) as file:
        return parse_json(file, error=error)


def open_json_file(
    path: Path, *, error: type[PackageError] = PackageError
) -> contextlib.AbstractContextManager[PackageFile]:
    """A package's JSON file opened as a regular file of at most :data:`MAX_JSON_BYTES`."""
    return open_package_file(
        path, max_bytes=MAX_JSON_BYTES, what="a package's JSON file", error=error
    )


def parse_json(file: PackageFile, *, error: type[PackageError] = PackageError) -> Any:
    """The JSON value of an open package file (:func:`open_json_file`).

    Raises
    ------
    PackageError
        (of class ``error``) If it cannot be read, grew past :data:`MAX_JSON_BYTES` since
        it was opened, or is not (standard) JSON.
    """
    limit, path = MAX_JSON_BYTES, file.path
    try:
        data = file.handle.read(limit + 1)
    except OSError as exc:
        raise error(f"{path} cannot be read ({exc}); {REWRITE}") from exc
    if len(data) > limit:  # grew after its size was checked
        raise error(f"{path} grew past the limit of {limit:,} bytes while read; {REWRITE}")
    try:
        return json.loads(data, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise error(f"{path} is not JSON ({exc}); {REWRITE}") from exc


def _refuse_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def archive_file_limit(max_bytes: int, max_members: int) -> int:
    """Largest archive file of ``max_members`` members declaring at most ``max_bytes``.

    A member is stored (numpy and torch do not compress): its bytes plus a local header and
    a directory entry (each at most :data:`MAX_ENTRY_BYTES`, with torch's alignment padding),
    plus the end-of-archive records and their longest comment.
    """
    return max_bytes + max_members * 2 * MAX_ENTRY_BYTES + 2 * _MAX_COMMENT


def open_archive(
    file: PackageFile,
    *,
    max_bytes: int,
    max_members: int,
    error: type[PackageError] = PackageError,
) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    """The zip archive of ``file`` and its members, refused when over the limits.

    Reads only the end-of-archive record and the central directory, after bounding the
    directory's size by ``max_members`` x :data:`MAX_ENTRY_BYTES`; nothing of a member is
    read. The declared uncompressed sizes bound what a later read inflates.

    Raises
    ------
    PackageError
        (of class ``error``) If the file is not a zip archive (truncated, damaged), its
        directory is larger than ``max_members`` entries may take, it holds more than
        ``max_members`` members or declares more than ``max_bytes`` uncompressed bytes.
    """
    path = file.path

    def damaged(exc: Exception) -> PackageError:
        return error(
            f"{path} is not a zip archive, or a truncated or damaged one "
            f"({type(exc).__name__}: {exc}); {REDEPLOY}"
        )

    try:
        entries, directory = _declared_directory(file)
    except (OSError, EOFError, ValueError, struct.error, zipfile.BadZipFile) as exc:
        raise damaged(exc) from exc
    if entries > max_members or directory > max_members * MAX_ENTRY_BYTES:
        raise error(
            f"{path} declares a zip directory of {entries:,} members in {directory:,} bytes, "
            f"over the limit of {max_members} members of at most {MAX_ENTRY_BYTES} bytes "
            f"each; refused unread. {REDEPLOY}"
        )
    try:
        file.handle.seek(0)
        archive = zipfile.ZipFile(file.handle)
        members = archive.infolist()
    except (OSError, EOFError, ValueError, NotImplementedError, zipfile.BadZipFile) as exc:
        raise damaged(exc) from exc
    if len(members) > max_members:
        raise error(
            f"{path} holds {len(members)} members, over the limit of {max_members}; refused "
            f"unread. {REDEPLOY}"
        )
    declared = sum(member.file_size for member in members)
    if declared > max_bytes:
        raise error(
            f"{path} declares {declared:,} uncompressed bytes, over the limit of {max_bytes:,}; "
            f"refused unread as a possible zip bomb. {REDEPLOY}"
        )
    return archive, members


def _declared_directory(file: PackageFile) -> tuple[int, int]:
    """``(members, bytes)`` of the central directory, from the end-of-archive records alone.

    Raises
    ------
    zipfile.BadZipFile
        If there is no end-of-archive record in the last 64 KiB, or its zip64 form is damaged.
    """
    tail_size = min(file.size, _EOCD.size + _MAX_COMMENT)
    file.handle.seek(file.size - tail_size)
    tail = file.handle.read(tail_size)
    at = tail.rfind(_EOCD_SIGNATURE)
    if at < 0 or len(tail) - at < _EOCD.size:
        raise zipfile.BadZipFile("no end-of-archive record")
    *_, entries, directory, _, _ = _EOCD.unpack_from(tail, at)
    if entries != 0xFFFF and directory != 0xFFFFFFFF:
        return entries, directory
    # zip64: the locator just before the record points to the zip64 record.
    locator_at = file.size - tail_size + at - _ZIP64_LOCATOR.size
    if locator_at < 0:
        raise zipfile.BadZipFile("zip64 end-of-archive locator missing")
    file.handle.seek(locator_at)
    signature, _, record_at, _ = _ZIP64_LOCATOR.unpack(file.handle.read(_ZIP64_LOCATOR.size))
    if signature != _ZIP64_LOCATOR_SIGNATURE or record_at + _ZIP64_EOCD.size > file.size:
        raise zipfile.BadZipFile("zip64 end-of-archive locator damaged")
    file.handle.seek(record_at)
    record = _ZIP64_EOCD.unpack(file.handle.read(_ZIP64_EOCD.size))
    if record[0] != _ZIP64_EOCD_SIGNATURE:
        raise zipfile.BadZipFile("zip64 end-of-archive record damaged")
    return record[7], record[8]
