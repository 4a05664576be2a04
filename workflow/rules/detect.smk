"""Detection: one small result per (data set, class, split, seed, method, fit set, detector).

The detectors of one feature set run in one job: starting Python and importing torch and
scikit-learn costs more than fitting a detector on a few thousand features. A detector added
to the config re-runs only these light jobs; the cached features are reused.
"""

from pipeline_lib.config.resources import mem_mb_by_attempt


rule score_detectors:
    input:
        split=os.path.join(SPLIT, "split.npz"),
        features=get_features,
    output:
        results=expand(
            os.path.join(RESULT, "result.json"), detector=DETECTORS, allow_missing=True
        ),
        scores=expand(
            os.path.join(RESULT, "scores.npz"), detector=DETECTORS, allow_missing=True
        ),
    log:
        "logs/score_detectors/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}/{fitset}.log",
    benchmark:
        "benchmarks/score_detectors/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}/{fitset}.tsv"
    retries: 1
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=mem_mb_by_attempt(8000),
        runtime=60,
        gpu=0,
    params:
        detectors=DETECTOR_PARAMS,
        max_fit=config["detect"]["max_fit"],
    script:
        "../scripts/score_detectors.py"


rule score_rotation_classifier:
    input:
        split=os.path.join(SPLIT, "split.npz"),
        features=os.path.join(SPLIT, "{method}", "features.npz"),
    output:
        results=expand(
            os.path.join(RESULT, "result.json"),
            detector=ROTATION_DETECTORS,
            fitset="train",
            allow_missing=True,
        ),
        scores=expand(
            os.path.join(RESULT, "scores.npz"),
            detector=ROTATION_DETECTORS,
            fitset="train",
            allow_missing=True,
        ),
    log:
        "logs/score_rotation_classifier/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.log",
    benchmark:
        "benchmarks/score_rotation_classifier/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.tsv"
    wildcard_constraints:
        method=_one_of(ROTATION_MODELS or ["none"]),
    retries: 1
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=mem_mb_by_attempt(2000),
        runtime=10,
    params:
        detectors=ROTATION_DETECTORS,
    script:
        "../scripts/score_rotation_classifier.py"
