"""The package kinds (image, patch) and opening a folder of either, by ``package.json``'s kind."""

from __future__ import annotations

import os

from pipeline_lib.deploy.bounded_files import resolve_package_folder
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.package_format import PackageError
from pipeline_lib.deploy.patch_package import PackagedPatchDetector
from pipeline_lib.deploy.saved_package import read_document

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
    regular file (:mod:`pipeline_lib.deploy.bounded_files`).

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
