"""Links from the main table's cells to the MLflow runs behind them (no mlflow import).

``log_to_mlflow`` records, in ``mlflow/logged.json``, the experiment id and the run
id of every job result (``run_ids``: ``result_key`` -> run id). A main-table cell is the mean
over the classes and seeds of one (data set, representation, detector); its link opens
those runs in the MLflow UI: the run page (``#/experiments/<id>/runs/<run>``) for one run,
the compare page of all of them for several. Where the UI is:

- an ``http(s)://`` tracking URI: the server itself serves the UI (credentials dropped);
- a ``sqlite:`` store (the default, ``mlflow/mlflow.db``): ``mlflow ui`` on that
  file, which serves at :data:`LOCAL_UI` unless told otherwise;
- a file store (``file:`` URI or a path): no UI is needed, the link is relative: the run's
  folder ``<store>/<experiment id>/<run id>``, or the experiment's folder for several runs.

Without tracking (no ``logged.json``, or a store that was not reached) there are no links.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline_lib.paper.published import display_name

__all__ = ["LOCAL_UI", "cell_run_ids", "main_table_run_links", "runs_url", "ui_base"]

#: Where ``mlflow ui`` serves by default: the UI of a local SQLite store.
LOCAL_UI = "http://127.0.0.1:5000"


def ui_base(tracking_uri: str) -> tuple[str, str]:
    """Where a tracking URI's runs are opened: ``("ui", base URL)`` or ``("files", folder)``.

    Parameters
    ----------
    tracking_uri : str
        The URI runs were logged to (as ``logged.json`` records it: credentials may be
        redacted to ``***``; they are dropped from the link either way).

    Returns
    -------
    (kind, base) : tuple of str
        ``"ui"`` with the server's URL (or :data:`LOCAL_UI` for a SQLite store), or
        ``"files"`` with the file store's folder.
    """
    parsed = urllib.parse.urlsplit(tracking_uri)
    if parsed.scheme in ("http", "https"):
        netloc = parsed.netloc.rsplit("@", 1)[-1]  # no user:password in a link
        return "ui", urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "", ""))
    if parsed.scheme == "file":
        return "files", urllib.parse.unquote(parsed.path)
    if parsed.scheme == "" or len(parsed.scheme) == 1:  # a path (or a Windows drive)
        return "files", tracking_uri
    return "ui", LOCAL_UI


def runs_url(
    run_ids: Sequence[str],
    *,
    experiment_id: str,
    tracking_uri: str,
    relative_to: str | os.PathLike | None = None,
) -> str:
    """The link that opens ``run_ids`` (one or more runs of one experiment).

    Raises
    ------
    ValueError
        If ``run_ids`` is empty.
    """
    if not run_ids:
        raise ValueError("runs_url needs at least one run id")
    kind, base = ui_base(tracking_uri)
    if kind == "files":
        folder = Path(base) / str(experiment_id)
        target = folder / run_ids[0] if len(run_ids) == 1 else folder
        if relative_to is not None:
            return Path(os.path.relpath(target, relative_to)).as_posix()
        return target.as_posix()
    base = base.rstrip("/")
    if len(run_ids) == 1:
        return f"{base}/#/experiments/{experiment_id}/runs/{run_ids[0]}"
    query = urllib.parse.urlencode(
        {
            "runs": json.dumps(list(run_ids), separators=(",", ":")),
            "experiments": json.dumps([str(experiment_id)], separators=(",", ":")),
        }
    )
    return f"{base}/#/compare-runs?{query}"


def cell_run_ids(
    results: pd.DataFrame,
    run_ids: Mapping[str, str],
    *,
    contamination: float = 0.0,
    fitset: str = "train",
) -> dict[tuple[str, str, str], list[str]]:
    """The runs behind each main-table cell, by display names.

    Parameters
    ----------
    results : DataFrame
        The tidy results (``results.csv``, with ``result_key``).
    run_ids : mapping
        ``result_key`` -> run id (``logged.json``'s ``run_ids``).
    contamination, fitset
        The main table's setting (:func:`pipeline_lib.paper.aggregate.select_results`).

    Returns
    -------
    dict
        ``(representation, detector, data set)`` display names -> the run ids of its
        classes and seeds, sorted by class then seed; cells without a logged run are absent.
    """
    if "result_key" not in results.columns:
        return {}
    # the main table's rows (as select_results picks them), with their result keys
    mask = np.isclose(results["contamination"].astype(float), contamination)
    mask &= results["fitset"].astype(str).to_numpy() == fitset
    frame = results[mask].sort_values(["inlier", "seed"])
    cells: dict[tuple[str, str, str], list[str]] = {}
    for row in frame.itertuples(index=False):
        run = run_ids.get(str(row.result_key))
        if run is None:
            continue
        name = (
            display_name("method", str(row.method)),
            display_name("detector", str(row.detector)),
            display_name("dataset", str(row.dataset)),
        )
        cells.setdefault(name, []).append(run)
    return cells


def main_table_run_links(
    results: pd.DataFrame,
    logged: Mapping[str, Any] | None,
    *,
    relative_to: str | os.PathLike | None = None,
) -> dict[tuple[str, str, str], str]:
    """``(representation, detector, data set)`` -> the link to that cell's runs.

    Parameters
    ----------
    results : DataFrame
        The tidy results (``results.csv``).
    logged : mapping or None
        ``logged.json`` of ``log_to_mlflow`` (``status``, ``tracking_uri``,
        ``experiment_id``, ``run_ids``); None (tracking disabled) or any status other than
        ``"logged"`` gives no links.
    relative_to : path, optional
        The page's folder, for relative links into a file store.
    """
    if not logged or logged.get("status") != "logged" or not logged.get("run_ids"):
        return {}
    return {
        cell: runs_url(
            runs,
            experiment_id=str(logged["experiment_id"]),
            tracking_uri=str(logged["tracking_uri"]),
            relative_to=relative_to,
        )
        for cell, runs in cell_run_ids(results, logged["run_ids"]).items()
    }
