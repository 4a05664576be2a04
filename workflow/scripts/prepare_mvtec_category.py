"""Read one MVTec AD category (or a user category in that layout) into a compact cache."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.data.mvtec import category_path_from_env, category_to_arrays, read_mvtec_category
from pipeline_lib.runtime.io import save_npz
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    name = snakemake.wildcards.category
    category = read_mvtec_category(
        category_path_from_env(name),
        name=name,
        group=snakemake.params.group,
        image_size=snakemake.params.image_size,
        masks=snakemake.params.masks,
        max_train=snakemake.params.max_train,
        max_test_per_type=snakemake.params.max_test_per_type,
    )
    save_npz(snakemake.output[0], category_to_arrays(category))
