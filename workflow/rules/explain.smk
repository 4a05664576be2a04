"""Visual explanations of the image benchmarks (paper Sec. 5.3, App. A.6).

`explain_detectors` draws integrated gradients and GradCAM of each representation's KDE score
(and RotNet's rotation classifier) for chosen test images of one class, when the config has
an `explain` section.
"""

from pipeline_lib.config.resources import mem_mb_by_attempt


include: "explain_common.smk"


if EXPLAIN:

    rule explain_detectors:
        input:
            dataset=f"{_explain_dataset}/dataset.npz",
            split=os.path.join(_explain_split, "split.npz"),
            features=list(_explain_features.values()),
            models=[
                os.path.join(_explain_split, method, "model.pt")
                for method in EXPLAIN["methods"]
                if is_trained(method)
            ],
        output:
            figure=f"summary/explanations/{_explain_dataset}/{_explain_inlier}.png",
            maps=f"summary/explanations/{_explain_dataset}/{_explain_inlier}.npz",
        log:
            f"logs/explain_detectors/{_explain_dataset}/{_explain_inlier}.log",
        benchmark:
            f"benchmarks/explain_detectors/{_explain_dataset}/{_explain_inlier}.tsv"
        retries: 1
        conda:
            "../../environment.yml"
        threads: 2
        resources:
            mem_mb=mem_mb_by_attempt(8000),
            runtime=60,
            gpu=0,
        params:
            methods=EXPLAIN["methods"],
            features=json.dumps(_explain_features),
            rotation=[
                m for m in EXPLAIN["methods"] if method_spec(m).rotation_classifier
            ],
            n_images=EXPLAIN["n_images"],
            test_index=EXPLAIN["test_index"],
            ig_steps=EXPLAIN["ig_steps"],
            baseline=EXPLAIN["baseline"],
            seed=int(SEEDS[0]),
            max_fit=config["detect"]["max_fit"],
            detector_params=config["detectors"].get("kde", {}),
            width=config["embed"]["width"],
            imagenet_size=config["embed"]["imagenet_size"],
        script:
            "../scripts/explain_detectors.py"
