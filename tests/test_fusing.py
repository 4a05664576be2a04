"""pipeline_lib.config.fusing: which models a fused training job trains, and their names."""

from __future__ import annotations

import pytest

from pipeline_lib.config.fusing import fused_groups, group_members, group_name, member_name


def test_groups_run_seed_by_seed_in_class_order_and_cross_seeds() -> None:
    models = [("8", "1"), ("0", "0"), ("8", "0"), ("1", "1"), ("0", "1"), ("1", "0")]
    groups = fused_groups(models, 2, classes=["0", "1", "8"])
    assert [group_name(group) for group in groups] == ["0@0+1@0", "8@0+0@1", "1@1+8@1"]
    # Seeds sort as numbers, classes not in ``classes`` after those that are.
    ordered = fused_groups([("b", "10"), ("a", "2"), ("z", "2")], 5, classes=["z"])
    assert ordered == [[("z", "2"), ("a", "2"), ("b", "10")]]
    # A one-class data set's five seeds: one group at fuse 5, two at fuse 4.
    celeba = [("no_eyeglasses", str(seed)) for seed in range(5)]
    assert [len(group) for group in fused_groups(celeba, 5)] == [5]
    assert [len(group) for group in fused_groups(celeba, 4)] == [4, 1]
    # Duplicates count once; fuse 1 is one model a group.
    assert fused_groups([("a", "0"), ("a", "0")], 1) == [[("a", "0")]]
    with pytest.raises(ValueError, match="at least 1"):
        fused_groups(celeba, 0)


def test_names_round_trip_and_old_names_are_refused() -> None:
    members = [("no_eyeglasses", "0"), ("a@b", "3")]  # '@' inside a class name survives
    assert member_name("cat", 2) == "cat@2"
    assert group_members(group_name(members)) == members
    with pytest.raises(ValueError, match=r"member 'cat' is not <class>@<seed>"):
        group_members("cat+dog")  # a group named before seeds were fused
