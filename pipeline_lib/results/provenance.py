"""Provenance of a sweep's results: the config, the code version and the software versions.

Written beside the tables (``summary/provenance.{json,html}``) and shown in the
Snakemake report, so a table always travels with what produced it.
"""

from __future__ import annotations

import datetime
import html
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

#: Distributions whose versions change the numbers (or how they are produced).
PACKAGES: tuple[str, ...] = (
    "torch",
    "torchvision",
    "numpy",
    "scipy",
    "scikit-learn",
    "pandas",
    "snakemake",
    "mlflow",
    "droc-bench",
)


def _git(directory: str | os.PathLike, *args: str) -> str | None:
    try:
        result = subprocess.run(  # noqa: S603 - fixed git call
            ["git", "-C", str(directory), *args],  # noqa: S607 - git from PATH
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.rstrip("\n") or None


def code_provenance(directory: str | os.PathLike) -> dict[str, Any]:
    """Git commit, ``git describe`` and local changes of the workflow checkout.

    Returns
    -------
    dict
        ``commit`` (None outside a git checkout), ``describe`` (``--always --dirty --tags``),
        ``dirty`` (tracked files changed since the commit) and ``changed_files`` (their
        paths, so a result produced by uncommitted code says which files differed).
    """
    commit = (_git(directory, "rev-parse", "HEAD") or "").strip() or None
    status = _git(directory, "status", "--porcelain", "--untracked-files=no") or ""
    # Porcelain lines are "XY path": two status letters (either may be a space), a space.
    changed = sorted(line[3:] for line in status.splitlines() if len(line) > 3)
    return {
        "commit": commit,
        "describe": (_git(directory, "describe", "--always", "--dirty", "--tags") or "").strip()
        or None,
        "dirty": bool(changed),
        "changed_files": changed,
    }


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed versions of ``names`` (None when not installed), without importing them."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def collect_provenance(
    config: Mapping[str, Any], *, sweep: str, workflow_dir: str | os.PathLike
) -> dict[str, Any]:
    """Everything needed to say what produced a sweep's results.

    Parameters
    ----------
    config : mapping
        The validated config the sweep ran with (defaults filled in).
    sweep : str
        The sweep id (a hash of the config), as tagged on the MLflow runs.
    workflow_dir : str or PathLike
        The workflow checkout, for the git commit.

    Returns
    -------
    dict
        JSON-compatible: ``sweep``, ``created`` (UTC, ISO 8601), ``code``
        (:func:`code_provenance`), ``python``, ``platform``, ``packages``
        (:func:`package_versions`), ``config``.
    """
    return {
        "sweep": sweep,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "code": code_provenance(workflow_dir),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "config": json.loads(json.dumps(config, default=str)),
    }


def provenance_html(provenance: Mapping[str, Any]) -> str:
    """A small self-contained HTML page of :func:`collect_provenance`'s record (the report's
    view of it; the JSON file is the machine-readable one)."""
    code = provenance["code"]
    rows = [
        ("sweep", provenance["sweep"]),
        ("created (UTC)", provenance["created"]),
        ("git commit", code["commit"] or "unknown (not a git checkout)"),
        ("git describe", code["describe"] or "unknown"),
        ("local changes", ", ".join(code["changed_files"]) or "none"),
        ("python", provenance["python"]),
        ("platform", provenance["platform"]),
    ] + [
        (name, version or "not installed")
        for name, version in sorted(provenance["packages"].items())
    ]
    table = "\n".join(
        f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(str(value))}</td></tr>"
        for key, value in rows
    )
    config = html.escape(json.dumps(provenance["config"], indent=2, sort_keys=True))
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>Provenance</title>"
        "<style>body{font-family:sans-serif}th{text-align:left;padding-right:1em}"
        "pre{background:#f6f6f6;padding:1em}</style></head><body>\n"
        f"<h1>Provenance of sweep {html.escape(provenance['sweep'])}</h1>\n"
        f"<table>\n{table}\n</table>\n<h2>Config</h2>\n<pre>{config}</pre>\n"
        "</body></html>\n"
    )
