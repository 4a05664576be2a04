"""Config checks of a data set's classes and split settings against the data registry's facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline_lib.config.errors import ConfigError
from pipeline_lib.data import DATASETS

__all__ = ["check_dataset_settings", "resolve_classes"]


def resolve_classes(
    dataset: str, requested: str | list[str], available: tuple[str, ...]
) -> list[str]:
    """Expand ``"all"`` and check requested class names against the data set's names.

    ``"all"`` means the classes that can be inliers (the data set registry's
    :attr:`~pipeline_lib.data.DatasetSpec.inliers`): for CelebA only ``no_eyeglasses``,
    since its training split holds no image with eyeglasses.

    Raises
    ------
    ConfigError
        Naming the key ``datasets.<dataset>.classes``, the bad name and the allowed names,
        or the class that cannot be an inlier and why.
    """
    spec = DATASETS.get(dataset)
    inliers = spec.inliers if spec is not None and spec.inliers is not None else available
    if requested == "all":
        return [name for name in available if name in inliers]
    unknown = [name for name in requested if name not in available]
    if unknown:
        named = ", ".join(map(repr, unknown))
        raise ConfigError(
            f"config key 'datasets.{dataset}.classes': unknown class"
            f"{'es' if len(unknown) > 1 else ''} {named}; allowed: {', '.join(available)}"
        )
    outliers_only = [name for name in requested if name not in inliers]
    if outliers_only:
        reason = spec.inlier_reason if spec is not None else ""
        raise ConfigError(
            f"config key 'datasets.{dataset}.classes': class {outliers_only[0]!r} cannot be "
            f"an inlier class{': ' + reason if reason else ''}; allowed inlier classes: "
            f"{', '.join(inliers)} (what `classes: all` runs)"
        )
    return list(requested)


def check_dataset_settings(
    dataset: str, settings: Mapping[str, Any], splits: Mapping[str, Any]
) -> list[str] | None:
    """Check a data set's classes and the split settings against the registry's facts.

    Runs at config validation, before any job: a class that cannot be an inlier, a
    contamination the training split cannot provide, or more clean inliers than a class has
    training images would otherwise fail in ``prepare_split``, after the data set was read
    and embedded.

    Parameters
    ----------
    dataset : str
        Data set id (a key of :data:`pipeline_lib.data.DATASETS`).
    settings : mapping
        Its ``datasets.<dataset>`` entry (``classes``, ``max_train_per_class``, ...).
    splits : mapping
        The grid's ``splits`` (``contamination``, ``clean_inliers``).

    Returns
    -------
    list of str or None
        The inlier classes to run; None when the class names are only known from the files
        (``image_folder``: checked by :func:`resolve_classes` when the workflow reads them).

    Raises
    ------
    ConfigError
        Naming the key, the data set, the class by name and the reason.
    """
    spec = DATASETS[dataset]
    classes = None
    if isinstance(spec.class_names, tuple):
        classes = resolve_classes(dataset, settings.get("classes", "all"), spec.class_names)
    contamination = [float(c) for c in splits.get("contamination", [0.0])]
    impossible = [c for c in contamination if c > 0]
    if spec.contamination_reason and impossible:
        raise ConfigError(
            f"config key 'splits.contamination': {impossible[0]:g} is not possible with data "
            f"set '{dataset}': {spec.contamination_reason}; run '{dataset}' with contamination "
            "0 only (the contaminated setting in a config or study without it)"
        )
    if classes is None:
        return None
    limit = settings.get("max_train_per_class")
    for n_clean in splits.get("clean_inliers", []):
        for name in classes:
            known = (spec.train_per_class or {}).get(name)
            sizes = [size for size in (known, limit) if size is not None]
            if sizes and n_clean > min(sizes):
                source = (
                    f"datasets.{dataset}.max_train_per_class keeps {limit}"
                    if limit is not None and (known is None or limit < known)
                    else f"the standard split has {known}"
                )
                raise ConfigError(
                    f"config key 'splits.clean_inliers': {n_clean} clean inliers are more than "
                    f"class {name!r} of '{dataset}' has training images ({source}); use at "
                    f"most {min(sizes)}"
                )
    return classes
