"""The package format's version, its error type and what a reader is told to do.

The bottom of the deploy modules: every writer and reader of a package imports these, and
this module imports none of them.
"""

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
#: What a reader of a damaged file of a current package is told to do.
REWRITE = (
    "re-run the deploy step (snakemake --forcerun deploy_model ... with the same config) to "
    "write the package again"
)


class PackageError(ValueError):
    """A package cannot be built or read; the message names the file and what to do."""
