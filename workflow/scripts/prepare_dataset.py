"""Read a data set from its standard layout into the pipeline's cache."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

import os

from pipeline_lib.data.subsample import prepare_dataset
from pipeline_lib.runtime.io import save_image_dataset
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    dataset = prepare_dataset(
        snakemake.wildcards.dataset,
        snakemake.params.settings,
        download=os.environ.get("DROC_DOWNLOAD") == "1",
    )
    save_image_dataset(snakemake.output[0], dataset)
