"""Write the sweep's provenance (config, git commit, package versions) for the report."""

from pathlib import Path

from pipeline_lib.io import atomic_path, save_json
from pipeline_lib.logs import job_logging
from pipeline_lib.provenance import collect_provenance, provenance_html

with job_logging(snakemake.log[0]):
    provenance = collect_provenance(
        snakemake.params.config,
        sweep=snakemake.params.sweep,
        workflow_dir=Path(snakemake.scriptdir),
    )
    save_json(snakemake.output.json, provenance)
    with atomic_path(snakemake.output.html) as tmp:
        tmp.write_text(provenance_html(provenance))
