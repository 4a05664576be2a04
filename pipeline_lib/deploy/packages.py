"""Open any package folder: image cells and MVTec patch cells, chosen by ``package.json``'s kind."""

from __future__ import annotations

import os

from pipeline_lib.deploy.package import PackagedDetector, PackageError, read_document
from pipeline_lib.deploy.package_files import resolve_package_folder
from pipeline_lib.deploy.patch_protocol import PackagedPatchDetector

#: Either kind of package; both have ``image_size``, ``resize``, ``threshold`` and
#: ``anomaly_scores``; only patch packages have ``score`` with maps.
Package = PackagedDetector | PackagedPatchDetector

_KINDS: dict[str, type[PackagedDetector] | type[PackagedPatchDetector]] = {
    PackagedDetector.kind: PackagedDetector,
    PackagedPatchDetector.kind: PackagedPatchDetector,
}


def load_package_folder(folder: str | os.PathLike) -> Package:
    """The package in ``folder``, of the class its ``kind`` names.

    ``folder`` may be a symlink (resolved once); every file in it is opened once, as a
    regular file (:mod:`pipeline_lib.deploy.package_files`).

    Raises
    ------
    PackageError
        If the folder does not exist, ``package.json`` is missing or unreadable, names an
        unknown kind, or another file of the package is refused (the message names it).
    """
    folder = resolve_package_folder(folder)
    document = read_document(folder)
    kind = document["kind"]
    if kind not in _KINDS:
        raise PackageError(
            f"{folder}/package.json has kind {kind!r}; this version reads {sorted(_KINDS)}"
        )
    return _KINDS[kind].from_document(folder, document)


def has_maps(package: Package) -> bool:
    """Whether the package returns an anomaly map per image (MVTec patch cells)."""
    return isinstance(package, PackagedPatchDetector)
