"""The deploy package's error type and format, in their own module so every reader can use them."""

from __future__ import annotations

#: Format 3 stores the detector as ``detector.npz`` + ``detector.json``; format 2 added
#: ``kind`` (``image`` or ``patch``) to format 1. Only format 3 is read.
PACKAGE_FORMAT = "droc-deploy-package/3"
READABLE_FORMATS = (PACKAGE_FORMAT,)
#: Earlier formats, whose ``detector.pkl`` is a pickle: refused unread.
PICKLE_FORMATS = ("droc-deploy-package/1", "droc-deploy-package/2")
#: What a reader of an old or damaged package is told to do.
REDEPLOY = (
    "re-run the deploy step (snakemake --forcerun deploy_model ... with the same config) to "
    "write a " + PACKAGE_FORMAT + " package"
)


class PackageError(ValueError):
    """A package cannot be built or read; the message names the file and what to do."""
