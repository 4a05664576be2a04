"""Draw the (class, contamination, seed) split and save its indices beside the results."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.data.split import one_class_split, save_split
from pipeline_lib.runtime.io import load_dataset_labels
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    train_labels, test_labels, class_names = load_dataset_labels(snakemake.input.dataset)
    split = one_class_split(
        train_labels,
        test_labels,
        inlier=class_names.index(snakemake.wildcards.inlier),
        contamination=float(snakemake.wildcards.contamination),
        seed=int(snakemake.wildcards.seed),
        clean_inliers=snakemake.params.clean_inliers,
    )
    save_split(snakemake.output[0], split)
