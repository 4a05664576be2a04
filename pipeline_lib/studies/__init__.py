"""The paper's studies as pure functions: results frame + expected grid -> tables, figures,
deviations from the published numbers.

Every kind has the same signature::

    build(frame, expected, *, options, scores=None) -> StudyResult

``frame`` holds one row per detector result (:data:`~.contract.KEY_COLUMNS` plus ``auroc`` and
``mmd``), ``expected`` one row per job the study's grid should have; a job without a result
is counted in its cell's ``n_missing`` and marked, never averaged away. ``options`` are the
study's keyword settings (each kind rejects keys it does not read; every kind reads
``decimals``). ``scores`` is only read by ``"ensembles"``.

Each kind's module holds its :class:`~.spec.StudySpec` (which rows it reads, how its cells
are grouped, sorted and compared with the paper, its human table, figures and notes) and
the functions only it needs; :func:`.spec.build` runs the steps every study shares.

The shared machinery lives in modules named for their job: :mod:`.contract` (the columns,
:class:`~.contract.StudyResult`, the join to the expected grid), :mod:`.stats` (statistics
over seeds), :mod:`.paper` (the published numbers beside ours), :mod:`.display` (table
formatting), :mod:`.figures` (figure helpers) and :mod:`.files` (:func:`~.files.write_study`
writes a result's files, :func:`~.files.load_study` reads them back for the summary page,
:mod:`pipeline_lib.site.summary`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import pandas as pd

from pipeline_lib.studies import (
    classifiers,
    comparison,
    contamination,
    data_efficiency,
    distribution_sets,
    ensembles,
    head_depth,
    main,
    rotated,
    semi_supervised,
    uniformity,
)
from pipeline_lib.studies.contract import StudyResult
from pipeline_lib.studies.spec import StudySpec, build

__all__ = ["STUDY_KINDS", "STUDY_OPTIONS", "STUDY_SPECS", "StudyBuilder", "build_study"]

#: ``build(frame, expected, *, options, scores=None) -> StudyResult``.
StudyBuilder = Callable[..., StudyResult]

_MODULES = (
    contamination,
    semi_supervised,
    uniformity,
    head_depth,
    distribution_sets,
    ensembles,
    data_efficiency,
    rotated,
    classifiers,
    comparison,
    main,
)

#: Study kind -> its spec (what :func:`~.spec.build` needs to build it).
STUDY_SPECS: dict[str, StudySpec] = {module.SPEC.kind: module.SPEC for module in _MODULES}

#: Study kind -> builder.
STUDY_KINDS: dict[str, StudyBuilder] = {
    kind: partial(build, spec) for kind, spec in STUDY_SPECS.items()
}

#: Study kind -> the option keys it reads (besides ``decimals``).
STUDY_OPTIONS: dict[str, tuple[str, ...]] = {
    kind: spec.options for kind, spec in STUDY_SPECS.items()
}


def build_study(
    kind: str,
    frame: pd.DataFrame,
    expected: pd.DataFrame,
    *,
    options: Mapping[str, Any] | None = None,
    scores: Mapping | None = None,
) -> StudyResult:
    """Run the builder of ``kind``.

    Raises
    ------
    ValueError
        If ``kind`` is not in :data:`STUDY_KINDS` (naming the kinds), or as the builder.
    """
    if kind not in STUDY_KINDS:
        raise ValueError(f"unknown study kind {kind!r}; known: {sorted(STUDY_KINDS)}")
    return STUDY_KINDS[kind](frame, expected, options=dict(options or {}), scores=scores)
