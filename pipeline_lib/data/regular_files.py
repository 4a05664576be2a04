"""Regular files only: what an entry is when it is not one, and a record of those left out.

Why: a folder from someone else (a data set, images to score, a package) can hold, under an
image's name, a FIFO (opening it blocks until a writer comes), a device (``/dev/zero``
reads without end), a socket or a dangling symlink. Such an entry is never opened: its kind
comes from ``lstat`` / ``stat`` alone, and it is named with that kind wherever it is left
out. A symlink to a regular file counts as a regular file here (data roots and image
folders are often links into shared storage).

The training-data readers report what they leave out through :func:`note_skipped`: a
warning in the job's log (count and names), and rows in whatever :func:`recording_skipped`
collects (the data provenance record, :mod:`pipeline_lib.data.provenance`).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pipeline_lib.data.collectors import Collectors

__all__ = [
    "describe_mode",
    "image_entries",
    "not_regular_reason",
    "note_skipped",
    "recording_skipped",
    "split_regular",
]

logger = logging.getLogger(__name__)

#: Names shown in a warning before "...": the record holds them all.
_N_LOGGED = 10
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISREG, "a regular file"),
)
_SKIPPED: Collectors[tuple[str, str]] = Collectors()


def describe_mode(mode: int) -> str:
    """What a ``st_mode`` is, for a message: ``"a FIFO (named pipe)"``, ``"a directory"``..."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a special file"


def not_regular_reason(path: str | os.PathLike, *, follow_symlinks: bool = True) -> str | None:
    """None for a regular file, else what ``path`` is instead; nothing is opened.

    Parameters
    ----------
    path : str or PathLike
    follow_symlinks : bool, default=True
        Whether a symlink to a regular file counts as one (image and data folders); False
        refuses every symlink (a package's files).

    Returns
    -------
    str or None
        ``"a FIFO (named pipe)"``, ``"a symlink to /dev/zero, a character device"``,
        ``"a dangling symlink to gone.png"``, ``"missing"``, ...
    """
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"not readable ({error.strerror or error})"
    if not stat.S_ISLNK(link.st_mode):
        return None if stat.S_ISREG(link.st_mode) else describe_mode(link.st_mode)
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    if not follow_symlinks:
        return f"a symlink to {target}"
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return f"a dangling symlink to {target}"
    except OSError as error:
        if error.errno == errno.ELOOP:
            return f"a looping symlink to {target}"
        return f"a symlink to {target}, not readable ({error.strerror or error})"
    if stat.S_ISREG(status.st_mode):
        return None
    return f"a symlink to {target}, {describe_mode(status.st_mode)}"


def split_regular(paths: Iterable[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The regular files among ``paths`` (symlinks to them included) and the others' reasons.

    Returns
    -------
    files : list of Path
        In the order given.
    skipped : list of (Path, str)
        Every other path with :func:`not_regular_reason`.
    """
    files: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for path in paths:
        reason = not_regular_reason(path)
        if reason is None:
            files.append(path)
        else:
            skipped.append((path, reason))
    return files, skipped


def image_entries(folder: Path, extensions: Iterable[str]) -> list[Path]:
    """The regular files of ``folder`` with one of ``extensions`` (any case), sorted.

    Hidden entries are not considered; an entry with such an extension that is not a regular
    file (a FIFO, a device, a directory, a dangling symlink...) is left out unopened and
    reported by :func:`note_skipped`.
    """
    wanted = {extension.lower() for extension in extensions}
    entries = sorted(
        path
        for path in folder.iterdir()
        if not path.name.startswith(".") and path.suffix.lower() in wanted
    )
    files, skipped = split_regular(entries)
    note_skipped(folder, skipped, len(entries))
    return files


def note_skipped(folder: Path, skipped: Sequence[tuple[Path, str]], n_entries: int) -> None:
    """Warn with the count and names of the entries of ``folder`` left out, and record them.

    Parameters
    ----------
    folder : Path
        Where the entries are (for the message).
    skipped : sequence of (Path, str)
        The entries left out and why (:func:`split_regular`, or a reader's own reasons).
    n_entries : int
        Entries of ``folder`` considered, left out ones included.
    """
    if not skipped:
        return
    shown = ", ".join(f"{path.name} ({reason})" for path, reason in skipped[:_N_LOGGED])
    more = f", and {len(skipped) - _N_LOGGED} more" if len(skipped) > _N_LOGGED else ""
    logger.warning(
        "skipped %d of %d image entries of %s: %s%s",
        len(skipped),
        n_entries,
        folder,
        shown,
        more,
    )
    with _SKIPPED.lock:
        for collected in _SKIPPED.open_collections():
            collected.extend((str(path), reason) for path, reason in skipped)


@contextmanager
def recording_skipped() -> Iterator[list[tuple[str, str]]]:
    """Collect the ``(path, reason)`` of every entry :func:`note_skipped` reports in the block."""
    with _SKIPPED.collecting() as skipped:
        yield skipped
