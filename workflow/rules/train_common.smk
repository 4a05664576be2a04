"""Helpers of train.smk: the groups of fused training. No rules.

The trained models of one data set, contamination and method, over its classes and seeds,
are trained K at a time (train.fuse) by one train_fused job each
(pipeline_lib.config.fusing says how they are grouped and named); fuse 1 (the default)
keeps one train_representation job per model.
"""

from pipeline_lib.config.fusing import FUSED_GROUP
from pipeline_lib.config.fusing import fused_groups as group_fused_models
from pipeline_lib.config.fusing import group_name as fused_group_name
from pipeline_lib.registry import fuse_setting

FUSE = fuse_setting(config["train"])
FUSED = TRAINED if FUSE > 1 else []
_FUSED_GROUPS = {}


def fused_groups():
    """(data set, contamination, method) -> its groups, each a list of (class, seed).

    Every trained model a grid or the explanation figure reads, grouped FUSE at a time
    (pipeline_lib.config.fusing.fused_groups). Memoised; called only from input and param
    functions (after every include), so explain_common.smk is read.
    """
    if _FUSED_GROUPS or not FUSED:
        return _FUSED_GROUPS
    models = {
        (name, inlier, contamination_text(contamination), str(seed), method)
        for grid in GRIDS
        for name, classes in GRID_CLASSES[grid.name].items()
        for inlier in classes
        for contamination in grid.contamination
        for seed in grid.seeds
        for method in grid.methods
        if method in FUSED
    }
    if EXPLAIN:
        dataset, inlier, _ = _explain_target()
        models |= {
            (dataset, inlier, CONTAMINATIONS[0], SEEDS[0], method)
            for method in EXPLAIN["methods"]
            if method in FUSED
        }
    members = {}
    for dataset, inlier, contamination, seed, method in models:
        members.setdefault((dataset, contamination, method), set()).add((inlier, seed))
    for key, pairs in members.items():
        _FUSED_GROUPS[key] = group_fused_models(pairs, FUSE, classes=CLASSES[key[0]])
    return _FUSED_GROUPS


def _fused_key(wildcards):
    return (wildcards.dataset, wildcards.contamination, wildcards.method)


def fused_members(wildcards):
    """The (class, seed) members of the fused group {group}, in training order."""
    for group in fused_groups().get(_fused_key(wildcards), []):
        if fused_group_name(group) == wildcards.group:
            return group
    raise ValueError(
        f"{FUSED_GROUP.format(**wildcards)} is not a fused group of this config"
    )


def fused_group_splits(wildcards):
    return [
        os.path.join(
            SPLIT.format(**dict(wildcards.items(), inlier=inlier, seed=seed)),
            "split.npz",
        )
        for inlier, seed in fused_members(wildcards)
    ]


def fused_outcome(wildcards):
    """outcome.json of the fused group that trains model SPLIT/{method}."""
    member = (wildcards.inlier, wildcards.seed)
    for group in fused_groups().get(_fused_key(wildcards), []):
        if member in group:
            folder = FUSED_GROUP.format(
                **dict(wildcards.items(), group=fused_group_name(group))
            )
            return os.path.join(folder, "outcome.json")
    raise ValueError(
        f"{SPLIT.format(**wildcards)}/{wildcards.method} is in no fused group of this config"
    )
