"""Embedding: cache f (and g(f)) so adding a detector never recomputes features."""

from pipeline_lib.config.resources import mem_mb_by_attempt


rule embed_frozen_dataset:
    input:
        dataset="{dataset}/dataset.npz",
    output:
        "{dataset}/_frozen/{method}/seed{seed}/features.npz",
    log:
        "logs/embed_frozen_dataset/{dataset}/{method}/seed{seed}.log",
    benchmark:
        "benchmarks/embed_frozen_dataset/{dataset}/{method}/seed{seed}.tsv"
    wildcard_constraints:
        method=_one_of(FROZEN),
    retries: 1
    conda:
        "../../environment.yml"
    threads: 2
    resources:
        mem_mb=mem_mb_by_attempt(12000),
        runtime=120,
        gpu=0,
    params:
        batch_size=config["embed"]["batch_size"],
        width=config["embed"]["width"],
        imagenet_size=get_imagenet_size,  # the weights path comes as $DROC_IMAGENET_WEIGHTS
    script:
        "../scripts/embed_frozen_dataset.py"
