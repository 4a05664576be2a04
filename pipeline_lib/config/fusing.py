"""How ``train.fuse`` groups a config's models into fused training jobs: one statement for the
workflow (``workflow/rules/common.smk``) and the planner
(:mod:`pipeline_lib.planning.best_setting`).

A fused group holds up to K models of one data set, contamination and method: inlier classes
*and seeds*. Seeds matter because the
costliest models of the paper are the one-class data sets: CelebA's single class is 72 % of
the main table's GPU-hours at fuse 1, and grouping classes alone leaves its five seeds five
separate jobs. Members are ordered seed by seed, classes in the data set's order within a
seed, and cut K at a time (the last group smaller).

A member is named ``<class>@<seed>``; a group is its members joined by ``+`` (the
``{group}`` wildcard of :data:`FUSED_GROUP`). Torch-free: the Snakefile imports it at parse
time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "FUSED_GROUP",
    "fused_groups",
    "group_members",
    "group_name",
    "member_name",
]

#: The folder of one fused group's job (its outcome.json, its models until unpacked).
FUSED_GROUP = "{dataset}/_fused/contam{contamination}/{method}/{group}"

_SEED_MARK = "@"
_JOIN = "+"


def member_name(inlier: str, seed: str | int) -> str:
    """``cat@0``: one model of a group (its folder in the group's, its key in outcome.json)."""
    return f"{inlier}{_SEED_MARK}{seed}"


def group_name(members: Iterable[tuple[str, str | int]]) -> str:
    """``cat@0+dog@0``: the ``{group}`` wildcard of a group's (class, seed) members."""
    return _JOIN.join(member_name(inlier, seed) for inlier, seed in members)


def group_members(name: str) -> list[tuple[str, str]]:
    """The (class, seed) members of a group named by :func:`group_name`, in order.

    Raises
    ------
    ValueError
        When a member lacks its ``@<seed>`` (a group named before seeds were fused).
    """
    members = []
    for member in name.split(_JOIN):
        inlier, mark, seed = member.rpartition(_SEED_MARK)
        if not mark or not inlier or not seed:
            raise ValueError(f"fused group {name!r}: member {member!r} is not <class>@<seed>")
        members.append((inlier, seed))
    return members


def fused_groups(
    models: Iterable[tuple[str, str]],
    fuse: int,
    *,
    classes: Sequence[str] | None = None,
) -> list[list[tuple[str, str]]]:
    """The (class, seed) models of one data set, contamination and method, ``fuse`` at a time.

    Ordered seed by seed (numerically), classes in ``classes`` order within a seed (else in
    the order first met), so one config always names the same groups.
    """
    if fuse < 1:
        raise ValueError(f"fuse must be at least 1, got {fuse}")
    unique = list(dict.fromkeys((str(inlier), str(seed)) for inlier, seed in models))
    order = {name: index for index, name in enumerate(classes or [])}
    first_met = {inlier: index for index, (inlier, _) in reversed(list(enumerate(unique)))}

    def position(member: tuple[str, str]) -> tuple[int, int, int]:
        inlier, seed = member
        return (int(seed), order.get(inlier, len(order)), first_met[inlier])

    ordered = sorted(unique, key=position)
    return [ordered[start : start + fuse] for start in range(0, len(ordered), fuse)]
