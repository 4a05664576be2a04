"""Representation learning: one self-supervised model per (data set, class, split, seed).

One job per model (train_representation), or with train.fuse K > 1 one train_fused job per
K models (classes and seeds) of a data set, contamination and method, whose models
unpack_fused_model puts where a separate job would (docs/cluster.md, "Fused training").
Helpers (the fused groups) are in train_common.smk.
"""

from pipeline_lib.config.resources import mem_mb_by_attempt


include: "train_common.smk"


rule train_representation:
    input:
        dataset="{dataset}/dataset.npz",
        split=os.path.join(SPLIT, "split.npz"),
    output:
        model=os.path.join(SPLIT, "{method}", "model.pt"),
        history=os.path.join(SPLIT, "{method}", "train_history.json"),
    log:
        "logs/train_representation/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.log",
    benchmark:
        "benchmarks/train_representation/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.tsv"
    wildcard_constraints:
        method=_one_of([m for m in TRAINED if m not in FUSED] or ["none"]),
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
        execution=TRAINING_EXECUTION,
    script:
        "../scripts/train_representation.py"


# K models as one computation (pipeline_lib.ssl.fused); each checkpoints where its separate
# job would, so a killed group resumes and a separate job can take over a fused checkpoint.
rule train_fused:
    input:
        dataset="{dataset}/dataset.npz",
        splits=fused_group_splits,
    output:
        # Per class: trained or diverged (the models sit beside it until unpacked). One model
        # that diverges does not fail the job, which would delete the other models' work.
        outcome=temp(os.path.join(FUSED_GROUP, "outcome.json")),
    log:
        "logs/train_fused/{dataset}/contam{contamination}/{method}/{group}.log",
    benchmark:
        "benchmarks/train_fused/{dataset}/contam{contamination}/{method}/{group}.tsv"
    wildcard_constraints:
        method=_one_of(FUSED or ["none"]),
        group=r"[^/]+",
    retries: 2
    conda:
        "../../environment.yml"
    threads: 2
    resources:
        mem_mb=mem_mb_by_attempt(12000),
        runtime=1440,
        gpu=0,
    params:
        members=fused_members,
        method=get_base_method,
        training=get_training,
        train_size=get_train_size,
        width=config["embed"]["width"],
        execution=TRAINING_EXECUTION,
    script:
        "../scripts/train_fused.py"


# Moves one fused model to SPLIT/{method}, or fails with the error that stopped it.
rule unpack_fused_model:
    input:
        outcome=fused_outcome,
    output:
        model=os.path.join(SPLIT, "{method}", "model.pt"),
        history=os.path.join(SPLIT, "{method}", "train_history.json"),
    log:
        "logs/unpack_fused_model/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.log",
    wildcard_constraints:
        method=_one_of(FUSED or ["none"]),
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/unpack_fused_model.py"


localrules:
    unpack_fused_model,


rule embed_trained:
    input:
        dataset="{dataset}/dataset.npz",
        split=os.path.join(SPLIT, "split.npz"),
        model=os.path.join(SPLIT, "{method}", "model.pt"),
    output:
        os.path.join(SPLIT, "{method}", "features.npz"),
    log:
        "logs/embed_trained/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.log",
    benchmark:
        "benchmarks/embed_trained/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.tsv"
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
