"""The identity of one detection result: which job made it, where it lies, what it records.

Before this module the identity was rebuilt in several places: the rules built paths with
``f"{ratio:g}"``, two scripts copied the same ``record.update(...)`` block, the study join
matched keys with ``round(..., 9)``, and five modules kept their own list of key columns.
:class:`ResultKey` is the one statement of it; the rules (``common.smk``), the scoring
scripts, the tidy table, the study frames, the aggregation and MLflow all use it.

It sits in :mod:`pipeline_lib.config` (torch-free, imported by the Snakefile at parse time)
so that both the workflow and the results and report packages may import it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

from pipeline_lib.registry import ROTATION_DETECTORS

__all__ = [
    "KEY_COLUMNS",
    "OUTPUTS",
    "RESULT",
    "RESULT_G",
    "SPACES",
    "SPLIT",
    "STUDY_KEY_COLUMNS",
    "ResultKey",
    "contamination_text",
    "contamination_value",
]

#: Columns that identify a job of the main sweep (the wildcards), in display order.
KEY_COLUMNS: tuple[str, ...] = (
    "dataset",
    "inlier",
    "contamination",
    "seed",
    "method",
    "fitset",
    "detector",
)

#: Studies also compare feature spaces (f, the head's g, the rotation classifier).
STUDY_KEY_COLUMNS: tuple[str, ...] = (*KEY_COLUMNS, "space")

#: Feature spaces a result can be scored in: the representation ``f``, the projection
#: head's output ``g`` (results under ``.../g/``), or RotNet's own rotation classifier.
SPACES: tuple[str, ...] = ("f", "g", "rotation_classifier")

#: Where the data sets' folders start inside the working directory, as a path prefix: empty,
#: they lie directly in it, since the working directory is the experiment's own folder
#: (``results/<experiment>/``, :mod:`pipeline_lib.config.experiment`). The patterns below
#: and :meth:`ResultKey.from_path` are built on it.
OUTPUTS = ""

#: Snakemake patterns of a split's folder and of a result's folder (f and g spaces).
SPLIT = OUTPUTS + "{dataset}/{inlier}/contam{contamination}/seed{seed}"
RESULT = SPLIT + "/{method}/{fitset}/{detector}"
RESULT_G = SPLIT + "/{method}/{fitset}/g/{detector}"

_SEGMENT = r"[^/]+"
_FROM_PATH = re.compile(
    rf"(?:^|/){re.escape(OUTPUTS)}(?P<dataset>{_SEGMENT})/(?P<inlier>{_SEGMENT})"
    rf"/contam(?P<contamination>{_SEGMENT})/seed(?P<seed>-?\d+)/(?P<method>{_SEGMENT})"
    rf"/(?P<fitset>{_SEGMENT})(?P<g>/g)?/(?P<detector>{_SEGMENT})(?:/[^/]+\.\w+)?$"
)


def contamination_text(ratio: float | str) -> str:
    """The contamination as the path writes it (``0.1``, ``0``): ``f"{ratio:g}"``.

    The path is the identity Snakemake sees, so two ratios with the same text are the
    same job; comparing the numbers through this text replaces ad-hoc rounding.
    """
    return f"{float(ratio):g}"


def contamination_value(ratio: float | str) -> float:
    """The contamination as a job identity compares it: the float of its path text."""
    return float(contamination_text(ratio))


@dataclass(frozen=True)
class ResultKey:
    """One detection job: split (data set, inlier class, contamination, seed), method,
    fit set, detector and feature space.

    Values are normalised on construction (``contamination`` to the float of its path
    text, ``seed`` to int, the rest to str), so keys built from wildcards, from a config
    or from a path compare equal when they name the same job.

    Attributes
    ----------
    dataset, inlier, method, fitset, detector : str
        The wildcards of the job.
    contamination : float
        Outlier ratio of the training split.
    seed : int
        Seed of the split and the model.
    space : str, default="f"
        One of :data:`SPACES`; ``g`` results live under ``.../{fitset}/g/{detector}``.
    """

    dataset: str
    inlier: str
    contamination: float
    seed: int
    method: str
    fitset: str
    detector: str
    space: str = "f"

    def __post_init__(self) -> None:
        if self.space not in SPACES:
            raise ValueError(f"space {self.space!r} is not one of {list(SPACES)}")
        for name in ("dataset", "inlier", "method", "fitset", "detector"):
            value = str(getattr(self, name))
            if not value or "/" in value:
                raise ValueError(f"{name} {value!r} cannot be a path segment")
            object.__setattr__(self, name, value)
        object.__setattr__(self, "contamination", contamination_value(self.contamination))
        object.__setattr__(self, "seed", int(self.seed))

    @classmethod
    def from_wildcards(cls, wildcards: Mapping[str, Any] | Any, **overrides: Any) -> ResultKey:
        """The key of a job from its Snakemake wildcards (or a dict), ``overrides`` first.

        A scoring job writes several detectors (and the rotation classifier a fixed fit
        set), so those are passed as overrides.
        """
        values = dict(wildcards.items()) if hasattr(wildcards, "items") else dict(wildcards)
        values.update(overrides)
        names = [*STUDY_KEY_COLUMNS]
        missing = [name for name in KEY_COLUMNS if name not in values]
        if missing:
            raise ValueError(f"a result key needs {missing}; got {sorted(values)}")
        return cls(**{name: values[name] for name in names if name in values})

    @classmethod
    def from_path(cls, path: str | Any) -> ResultKey:
        """Read the key back from a result folder or a file in it (``result.json``).

        Raises
        ------
        ValueError
            If the path does not follow :data:`RESULT` / :data:`RESULT_G`.
        """
        text = PurePosixPath(str(path).replace("\\", "/")).as_posix()
        match = _FROM_PATH.search(text)
        if match is None:
            raise ValueError(
                f"{path} is not a result path ({RESULT} or {RESULT_G}, optionally a file in it)"
            )
        parts = match.groupdict()
        space = "g" if parts.pop("g") else "f"
        if space == "f" and parts["detector"] in ROTATION_DETECTORS:
            space = "rotation_classifier"  # its scores share the f folder layout
        return cls(**parts, space=space)

    def wildcards(self) -> dict[str, str]:
        """The key as path text (``contamination`` as ``:g``, ``seed`` as str), with space."""
        return {
            **{name: str(getattr(self, name)) for name in STUDY_KEY_COLUMNS},
            "contamination": contamination_text(self.contamination),
        }

    def folder(self) -> str:
        """The result folder the rules write: :data:`RESULT`, or :data:`RESULT_G` for g."""
        pattern = RESULT_G if self.space == "g" else RESULT
        return pattern.format(**self.wildcards())

    def model_folder(self) -> str:
        """The folder of the representation the result scores (``SPLIT/{method}``): where
        its features, model and ``uniformity.json`` live."""
        return f"{SPLIT.format(**self.wildcards())}/{self.method}"

    def path(self, name: str = "result.json") -> str:
        """A file of the result folder (``result.json``, ``scores.npz``)."""
        return f"{self.folder()}/{name}"

    def record(self) -> dict[str, Any]:
        """The key columns a result record carries (contamination float, seed int, space)."""
        return asdict(self)
