"""droc-bench: deep one-class classification benchmark (Sohn et al., ICLR 2021).

Run `snakemake --cores 2` for the embedded default (config/config.yaml), or pass
`--configfile config/paper.yaml` for the paper's main table. See README.md.
"""

from pathlib import Path

import yaml
from snakemake.utils import min_version

from pipeline_lib.config.experiment import default_experiment

min_version("9.0")

# A --configfile replaces the embedded default instead of being merged into it, so a paper
# run never inherits the demo's data sets.
CONFIGFILES = list(workflow.overwrite_configfiles)
if not config:
    CONFIGFILES = [Path(workflow.basedir) / "config" / "config.yaml"]
    with open(CONFIGFILES[0]) as handle:
        config.update(yaml.safe_load(handle))
# A config without an experiment name is named after its file (results/<name>/).
config.setdefault("experiment", default_experiment(CONFIGFILES))


include: "workflow/rules/common.smk"
include: "workflow/rules/run_checks.smk"


# Each experiment runs in a folder of its own (pipeline_lib.config.experiment): its results,
# logs, benchmark timings, MLflow store and .snakemake/ stay apart from any other config's.
# EXPERIMENT_FOLDER is None when --directory chose the working directory.
if EXPERIMENT_FOLDER is not None:

    workdir: EXPERIMENT_FOLDER


# Checked when the Snakefile is parsed, in the working directory, so a dry run plans without
# data (and says what is missing); a real run stops in the onstart hook, before its first
# job (check_before_jobs, run_checks.smk). mvtec_common.smk adds the MVTec categories.
MISSING_DATA = _missing_image_data()


# Every wildcard is one of the config's values (lists built in common.smk); here rather than
# in common.smk, which `snakemake --lint` wants free of workflow directives.
wildcard_constraints:
    dataset=_one_of(CLASSES),
    inlier=_one_of(ALL_CLASSES),
    method=_one_of(METHODS),
    seed=_one_of(SEEDS),
    contamination=_one_of(CONTAMINATIONS),
    fitset=_one_of(FITSETS),
    detector=_one_of(DETECTORS + list(ROTATION_DETECTORS)),


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/detect.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/mvtec.smk"
include: "workflow/rules/explain.smk"
include: "workflow/rules/deploy.smk"


# Missing data: a warning now (dry runs plan without data), an error before the first job of
# a real run (onstart runs only then). MISSING_DATA: the image data sets (run_checks.smk)
# and the MVTec categories (mvtec_common.smk).
warn_missing_data(MISSING_DATA)


onstart:
    check_before_jobs(MISSING_DATA)
    start_warm_workers()


onsuccess:
    stop_warm_workers()


onerror:
    stop_warm_workers()


rule all:
    default_target: True
    input:
        get_final_output(),
