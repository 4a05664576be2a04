"""Record the files a data set is read from: their checksums and the official comparison."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

import os

from pipeline_lib.data.provenance import record_data_provenance
from pipeline_lib.runtime.io import image_dataset_sizes, save_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    record = record_data_provenance(
        snakemake.wildcards.dataset,
        snakemake.params.options,
        download=os.environ.get("DROC_DOWNLOAD") == "1",
    )
    # The data set as the pipeline holds it: images per split and their size (the page's
    # data-set table).
    save_json(snakemake.output[0], record | image_dataset_sizes(snakemake.input[0]))
