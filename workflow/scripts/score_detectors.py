"""Fit each configured detector on one split's features; save AUC and scores per detector."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.config.keys import ResultKey
from pipeline_lib.data.split import load_split
from pipeline_lib.detection.runner import run_detection
from pipeline_lib.runtime.devices import select_device, set_threads
from pipeline_lib.runtime.io import load_npz, save_json, save_npz
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    wildcards = snakemake.wildcards
    split = load_split(snakemake.input.split)
    features = load_npz(snakemake.input.features)
    detectors = snakemake.params.detectors
    space = snakemake.params.get("space", "f")
    # The job's resources decide where torch detectors score (KDE, k-NN, RBF OC-SVM).
    device = select_device(int(snakemake.resources.get("gpu", 0)))
    for detector, result_path, scores_path in zip(
        detectors, snakemake.output.results, snakemake.output.scores, strict=True
    ):
        record, scores = run_detection(
            split,
            features,
            fitset=wildcards.fitset,
            detector=detector,
            detector_params=detectors[detector],
            max_fit=snakemake.params.max_fit,
            seed=int(wildcards.seed),
            space=space,
            device=device,
        )
        record.update(ResultKey.from_wildcards(wildcards, detector=detector, space=space).record())
        save_npz(scores_path, scores)
        save_json(result_path, record)
