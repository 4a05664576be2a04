"""MVTec AD with the patch protocol (docs/mvtec.md).

prepare_mvtec_category -> train_patch_representation (trained methods) -> embed_patches
-> score_patches (score_patches_and_rotation_classifier for RotNet / rotation prediction)
-> make_mvtec_tables (the tidy CSV and the tables), plot_mvtec_heatmaps
(-> log_mvtec_to_mlflow: the image benchmarks' MLflow script on MVTec AD's results). Runs
when the config has an `mvtec` section. Helpers (targets, params) are in mvtec_common.smk.
"""

from pipeline_lib.config.resources import mem_mb_by_attempt


include: "mvtec_common.smk"


if MVTEC:

    wildcard_constraints:
        category=_one_of(MVTEC_CATEGORIES),

    # Rules with {seed} or {method} also constrain them themselves: the global constraints
    # (common.smk) list only the image benchmarks' seeds and methods.
    rule prepare_mvtec_category:
        output:
            os.path.join(MVTEC_CATEGORY, "category.npz"),
        log:
            "logs/prepare_mvtec_category/{category}.log",
        benchmark:
            "benchmarks/prepare_mvtec_category/{category}.tsv"
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=4000,
            runtime=30,
        params:
            group=get_category_group,
            image_size=MVTEC["image_size"],
            masks=MVTEC["masks"],
            max_train=MVTEC["max_train_images"],
            max_test_per_type=MVTEC["max_test_per_type"],
        script:
            "../scripts/prepare_mvtec_category.py"

    rule train_patch_representation:
        input:
            os.path.join(MVTEC_CATEGORY, "category.npz"),
        output:
            model=os.path.join(MVTEC_MODEL, "model.pt"),
            history=os.path.join(MVTEC_MODEL, "train_history.json"),
        log:
            "logs/train_patch_representation/{category}/seed{seed}/{method}.log",
        benchmark:
            "benchmarks/train_patch_representation/{category}/seed{seed}/{method}.tsv"
        wildcard_constraints:
            seed=_one_of(MVTEC_SEEDS),
            method=_one_of(
                [m for m in MVTEC_METHODS if m in TRAINED_METHODS] or ["none"]
            ),
        # As the image benchmarks' training (train.smk): a killed, timed-out or
        # out-of-memory job retries with more memory and resumes from its checkpoint.
        retries: 2
        conda:
            "../../environment.yml"
        threads: 2
        resources:
            mem_mb=mem_mb_by_attempt(12000),
            runtime=1440,
            gpu=0,
        params:
            training=get_patch_training,
            width=config["embed"]["width"],
            patch_size=MVTEC["patches"]["size"],
            per_image=MVTEC["patches"]["per_image"],
        script:
            "../scripts/train_patch_representation.py"

    rule embed_patches:
        input:
            category=os.path.join(MVTEC_CATEGORY, "category.npz"),
            model=get_patch_model,
        output:
            # Dense features are large (about 2 GB per job at the paper's sizes): kept only
            # until the scoring jobs have read them.
            temp(os.path.join(MVTEC_MODEL, "patch_features.npz")),
        log:
            "logs/embed_patches/{category}/seed{seed}/{method}.log",
        benchmark:
            "benchmarks/embed_patches/{category}/seed{seed}/{method}.tsv"
        wildcard_constraints:
            seed=_one_of(MVTEC_SEEDS),
            method=_one_of(MVTEC_METHODS),
        retries: 1
        conda:
            "../../environment.yml"
        threads: 2
        resources:
            mem_mb=mem_mb_by_attempt(16000),
            runtime=240,
            gpu=0,
        params:
            patch_size=MVTEC["patches"]["size"],
            stride=MVTEC["patches"]["stride"],
            batch_size=MVTEC["embed"]["batch_size"],
            max_fit_patches=MVTEC["embed"]["max_fit_patches"],
            width=config["embed"]["width"],
            imagenet_size=config["embed"]["imagenet_size"],
            rotation=get_patch_rotation,
        script:
            "../scripts/embed_patches.py"

    rule score_patches:
        input:
            category=os.path.join(MVTEC_CATEGORY, "category.npz"),
            features=os.path.join(MVTEC_MODEL, "patch_features.npz"),
        output:
            results=expand(
                os.path.join(MVTEC_RESULT, "result.json"),
                detector=MVTEC_DETECTORS,
                allow_missing=True,
            ),
            scores=expand(
                os.path.join(MVTEC_RESULT, "score_maps.npz"),
                detector=MVTEC_DETECTORS,
                allow_missing=True,
            ),
        log:
            "logs/score_patches/{category}/seed{seed}/{method}.log",
        benchmark:
            "benchmarks/score_patches/{category}/seed{seed}/{method}.tsv"
        wildcard_constraints:
            seed=_one_of(MVTEC_SEEDS),
            # "none" when every method is a rotation one: an empty pattern would match all.
            method=_one_of(
                [m for m in MVTEC_METHODS if m not in MVTEC_SCORED_ROTATION]
                or ["none"]
            ),
        retries: 1
        conda:
            "../../environment.yml"
        threads: 2
        resources:
            mem_mb=mem_mb_by_attempt(16000),
            runtime=240,
            gpu=0,
        params:
            detectors=MVTEC["detectors"],
            patch_size=MVTEC["patches"]["size"],
            stride=MVTEC["patches"]["stride"],
            sigma=MVTEC["localize"]["sigma"],
            normalize=MVTEC["localize"]["normalize"],
            pro_max_fpr=MVTEC["pro_max_fpr"],
        script:
            "../scripts/score_patches.py"

    # RotNet / rotation prediction: the same job also scores RotNet's own classifier (its
    # per-patch scores come with the features; nothing is fitted), saving a job start.
    rule score_patches_and_rotation_classifier:
        input:
            category=os.path.join(MVTEC_CATEGORY, "category.npz"),
            features=os.path.join(MVTEC_MODEL, "patch_features.npz"),
        output:
            results=expand(
                os.path.join(MVTEC_RESULT, "result.json"),
                detector=[*MVTEC_DETECTORS, "rotation_classifier"],
                allow_missing=True,
            ),
            scores=expand(
                os.path.join(MVTEC_RESULT, "score_maps.npz"),
                detector=[*MVTEC_DETECTORS, "rotation_classifier"],
                allow_missing=True,
            ),
        log:
            "logs/score_patches/{category}/seed{seed}/{method}.log",
        benchmark:
            "benchmarks/score_patches/{category}/seed{seed}/{method}.tsv"
        wildcard_constraints:
            seed=_one_of(MVTEC_SEEDS),
            method=_one_of(MVTEC_SCORED_ROTATION or ["none"]),
        retries: 1
        conda:
            "../../environment.yml"
        threads: 2
        resources:
            mem_mb=mem_mb_by_attempt(16000),
            runtime=240,
            gpu=0,
        params:
            detectors={**MVTEC["detectors"], "rotation_classifier": {}},
            patch_size=MVTEC["patches"]["size"],
            stride=MVTEC["patches"]["stride"],
            sigma=MVTEC["localize"]["sigma"],
            normalize=MVTEC["localize"]["normalize"],
            pro_max_fpr=MVTEC["pro_max_fpr"],
        script:
            "../scripts/score_patches.py"

    rule make_mvtec_tables:
        input:
            results=mvtec_results(),
            # what each model trained on, in which precision: the tables' training line
            histories=mvtec_histories(),
        output:
            results=f"{MVTEC_SUMMARY}/results.csv",
            tables=mvtec_table_outputs(),
        log:
            "logs/make_mvtec_tables/make_mvtec_tables.log",
        benchmark:
            "benchmarks/make_mvtec_tables/make_mvtec_tables.tsv"
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        params:
            metrics=MVTEC_METRICS,
            protocol=mvtec_protocol_notes(config),
            own_categories=list(config["mvtec"]["paths"]),
        script:
            "../scripts/make_mvtec_tables.py"

    rule plot_mvtec_heatmaps:
        input:
            category=os.path.join(MVTEC_CATEGORY, "category.npz"),
            scores=get_heatmap_scores,
        output:
            f"{MVTEC_SUMMARY}/heatmaps/{{category}}.png",
        log:
            "logs/plot_mvtec_heatmaps/{category}.log",
        benchmark:
            "benchmarks/plot_mvtec_heatmaps/{category}.tsv"
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=4000,
            runtime=10,
        params:
            methods=MVTEC_METHODS,
            detector=MVTEC_DETECTORS[0],
            n_images=MVTEC["figures"]["n_images"],
            patch_size=MVTEC["patches"]["size"],
            stride=MVTEC["patches"]["stride"],
            sigma=MVTEC["localize"]["sigma"],
            normalize=MVTEC["localize"]["normalize"],
        script:
            "../scripts/plot_mvtec_heatmaps.py"

    rule log_mvtec_to_mlflow:
        input:
            store="mlflow/store.json",
            # One MLflow writer at a time: after the image benchmarks' logger, if it runs.
            after=image_tracking_log(),
            results=f"{MVTEC_SUMMARY}/results.csv",
            histories=mvtec_histories(),
            tables=mvtec_table_outputs(),
            plots=mvtec_heatmap_outputs(),
        output:
            "mlflow/mvtec_logged.json",
        log:
            "logs/log_mvtec_to_mlflow/log_mvtec_to_mlflow.log",
        benchmark:
            "benchmarks/log_mvtec_to_mlflow/log_mvtec_to_mlflow.tsv"
        # A SQLite store is written on the host that holds it (docs/cluster.md).
        localrule: True
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=4000,
            runtime=60,
        params:
            benchmark="mvtec_ad",
            experiment=config["experiment"],
            # Its own parent run, beside the image benchmarks' sweep.
            sweep=f"{SWEEP}-mvtec",
            tags={"benchmark": "mvtec"},
            timeout_s=config["tracking"]["timeout_s"],
        script:
            "../scripts/log_to_mlflow.py"
