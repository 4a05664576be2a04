"""RotNet's own detector: AUC of the rotation classifier's scores (nothing is fitted)."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.config.keys import ResultKey
from pipeline_lib.data.split import load_split
from pipeline_lib.detection.runner import run_rotation_detection
from pipeline_lib.runtime.io import load_npz, save_json, save_npz
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    wildcards = snakemake.wildcards
    split = load_split(snakemake.input.split)
    features = load_npz(snakemake.input.features)
    for detector, result_path, scores_path in zip(
        snakemake.params.detectors, snakemake.output.results, snakemake.output.scores, strict=True
    ):
        record, scores = run_rotation_detection(split, features, detector=detector)
        key = ResultKey.from_wildcards(
            wildcards, fitset="train", detector=detector, space="rotation_classifier"
        )
        record.update(key.record())
        save_npz(scores_path, scores)
        save_json(result_path, record)
