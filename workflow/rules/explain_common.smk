"""Helpers of explain.smk: the explanation target, its inputs and outputs."""

EXPLAIN = config.get("explain")


def _explain_target():
    """(data set, inlier, split folder) of the explanation figure."""
    dataset = EXPLAIN["dataset"]
    inlier = EXPLAIN["inlier"] or CLASSES[dataset][0]
    if inlier not in CLASSES[dataset]:
        sys.exit(
            f"Invalid config: config key 'explain.inlier': {inlier!r} is not a class of the "
            f"sweep's {dataset} ({', '.join(CLASSES[dataset])})"
        )
    split = SPLIT.format(
        dataset=dataset, inlier=inlier, contamination=CONTAMINATIONS[0], seed=SEEDS[0]
    )
    return dataset, inlier, split


def explanation_outputs():
    if not EXPLAIN:
        return []
    dataset, inlier, _ = _explain_target()
    return [f"summary/explanations/{dataset}/{inlier}.png"]


if EXPLAIN:
    _explain_dataset, _explain_inlier, _explain_split = _explain_target()
    # Same files as get_features (common.smk): frozen features are shared by the classes.
    _explain_features = {
        method: (
            f"{_explain_dataset}/_frozen/{method}/seed{SEEDS[0]}/features.npz"
            if method in FROZEN
            else os.path.join(_explain_split, method, "features.npz")
        )
        for method in EXPLAIN["methods"]
    }
