"""Representation learning: one self-supervised model per (data set, class, split, seed)."""

from pipeline_lib.dag.resources import mem_mb_by_attempt


rule train_representation:
    input:
        dataset="results/{dataset}/dataset.npz",
        split=os.path.join(SPLIT, "split.npz"),
    output:
        model=os.path.join(SPLIT, "{method}", "model.pt"),
        history=os.path.join(SPLIT, "{method}", "train_history.json"),
    log:
        "results/logs/train_representation/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.log",
    benchmark:
        "results/benchmarks/train_representation/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.tsv"
    wildcard_constraints:
        method=_one_of(TRAINED or ["none"]),
    # A killed, timed-out or out-of-memory job retries with more memory and resumes from its
    # checkpoint (docs/cluster.md).
    retries: 2
    conda:
        "../../environment.yml"
    threads: 2
    resources:
        mem_mb=mem_mb_by_attempt(12000),
        runtime=1440,
        gpu=0,
    params:
        method=get_base_method,
        training=get_training,
        train_size=get_train_size,
        width=config["embed"]["width"],
    script:
        "../scripts/train_representation.py"


rule embed_trained:
    input:
        dataset="results/{dataset}/dataset.npz",
        split=os.path.join(SPLIT, "split.npz"),
        model=os.path.join(SPLIT, "{method}", "model.pt"),
    output:
        os.path.join(SPLIT, "{method}", "features.npz"),
    log:
        "results/logs/embed_trained/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.log",
    benchmark:
        "results/benchmarks/embed_trained/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.tsv"
    wildcard_constraints:
        method=_one_of(TRAINED or ["none"]),
    retries: 1
    conda:
        "../../environment.yml"
    threads: 2
    resources:
        mem_mb=mem_mb_by_attempt(8000),
        runtime=60,
        gpu=0,
    params:
        method=get_base_method,
        batch_size=config["embed"]["batch_size"],
    script:
        "../scripts/embed_trained.py"
