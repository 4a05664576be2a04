"""Data: read a data set once into a compact cache, then one split per class and seed."""


rule prepare_dataset:
    output:
        "results/{dataset}/dataset.npz",
    log:
        "results/logs/prepare_dataset/{dataset}.log",
    benchmark:
        "results/benchmarks/prepare_dataset/{dataset}.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        settings=get_dataset_settings,
    script:
        "../scripts/prepare_dataset.py"


rule prepare_split:
    input:
        dataset="results/{dataset}/dataset.npz",
    output:
        os.path.join(SPLIT, "split.npz"),
    log:
        "results/logs/prepare_split/{dataset}/{inlier}/contam{contamination}/seed{seed}.log",
    benchmark:
        "results/benchmarks/prepare_split/{dataset}/{inlier}/contam{contamination}/seed{seed}.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        clean_inliers=CLEAN_INLIERS,  # every grid's sizes: one split file serves all studies
    script:
        "../scripts/prepare_split.py"
