"""Read a data set from its standard layout into the pipeline's cache."""

import os

from pipeline_lib.data import load_dataset
from pipeline_lib.data.subsample import subsample_dataset
from pipeline_lib.runtime.io import save_image_dataset
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    settings = snakemake.params.settings
    dataset = load_dataset(
        snakemake.wildcards.dataset,
        download=os.environ.get("DROC_DOWNLOAD") == "1",
        **settings["options"],
    )
    dataset = subsample_dataset(
        dataset,
        max_train_per_class=settings.get("max_train_per_class"),
        max_test_per_class=settings.get("max_test_per_class"),
    )
    save_image_dataset(snakemake.output[0], dataset)
