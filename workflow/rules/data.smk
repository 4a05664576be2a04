"""Data: read a data set once into a compact cache, then one split per class and seed; and a
record of the files it was read from (their checksums, and whether they are the official
release's), which every table beside published numbers reads."""


rule prepare_dataset:
    output:
        "{dataset}/dataset.npz",
    log:
        "logs/prepare_dataset/{dataset}.log",
    benchmark:
        "benchmarks/prepare_dataset/{dataset}.tsv"
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


# A rule of its own rather than an output of prepare_dataset: a result folder prepared
# before the record existed keeps its data set and everything computed from it. It runs
# after prepare_dataset (the files are there, downloaded if need be) and reads the files again.
rule record_data_provenance:
    input:
        "{dataset}/dataset.npz",
    output:
        "{dataset}/data_provenance.json",
    log:
        "logs/record_data_provenance/{dataset}.log",
    benchmark:
        "benchmarks/record_data_provenance/{dataset}.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        options=get_dataset_options,
    script:
        "../scripts/record_data_provenance.py"


rule prepare_split:
    input:
        dataset="{dataset}/dataset.npz",
    output:
        os.path.join(SPLIT, "split.npz"),
    log:
        "logs/prepare_split/{dataset}/{inlier}/contam{contamination}/seed{seed}.log",
    benchmark:
        "benchmarks/prepare_split/{dataset}/{inlier}/contam{contamination}/seed{seed}.tsv"
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
