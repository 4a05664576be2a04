"""Package the configured cell (main table or MVTec category); register_model registers it."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.deploy.workflow_step import package_deploy_cell
from pipeline_lib.runtime.devices import set_threads
from pipeline_lib.runtime.io import save_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    set_threads(snakemake.threads)
    params = snakemake.params
    record, example = package_deploy_cell(
        snakemake.output.package,
        cell=params.cell,
        results_csv=snakemake.input.results,
        files=params.files,
        detector_params=params.detectors,
        width=params.width,
        max_fit=params.max_fit,
        target_fpr=params.target_fpr,
        patches=params.patches,
    )
    save_json(snakemake.output.record, record)
    save_json(snakemake.output.example, example.to_dict(orient="list"))
