"""Write the sweep's provenance (config, git commit, package versions) for the report."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.results.provenance import collect_provenance, provenance_html
from pipeline_lib.runtime.io import atomic_path, save_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    provenance = collect_provenance(
        snakemake.params.config,
        sweep=snakemake.params.sweep,
        workflow_dir=Path(snakemake.scriptdir),
    )
    save_json(snakemake.output.json, provenance)
    with atomic_path(snakemake.output.html) as tmp:
        tmp.write_text(provenance_html(provenance))
