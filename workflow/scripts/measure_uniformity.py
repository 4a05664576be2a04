"""Uniformity of a trained model: MMD of normalize(g(f)) to the uniform distribution."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.detection.metrics import feature_uniformity
from pipeline_lib.runtime.io import load_npz, save_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    record = feature_uniformity(load_npz(snakemake.input[0]), seed=int(snakemake.wildcards.seed))
    save_json(snakemake.output[0], record)
