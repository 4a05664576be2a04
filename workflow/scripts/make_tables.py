"""The main table and per-class tables, beside the published numbers, in four formats."""

from pathlib import Path

from pipeline_lib.report.aggregate import (
    format_main_table,
    format_per_class_table,
    main_table,
    per_class_table,
)
from pipeline_lib.report.protocol import data_notes
from pipeline_lib.report.published import load_published
from pipeline_lib.report.results import load_results_csv
from pipeline_lib.report.tables import write_table
from pipeline_lib.runtime.io import load_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    results = load_results_csv(snakemake.input[0])
    published = load_published()
    # Which data sets were not read from the official files: a line above each table.
    provenance = {r["dataset"]: r for r in map(load_json, snakemake.input.provenance)}
    protocol = list(snakemake.params.protocol)
    main = main_table(results, published)
    write_table(
        format_main_table(main),
        Path(snakemake.output.main[0]).with_suffix(""),
        caption="Mean +- std over seeds of the class-mean ROC AUC (x100), beside the paper.",
        notes=protocol + data_notes(list(provenance.values())),
    )
    for dataset in snakemake.params.datasets:
        write_table(
            format_per_class_table(per_class_table(results, dataset, published)),
            Path(snakemake.output.main[0]).parent / "per_class" / dataset,
            caption=f"Per-class ROC AUC (x100) on {dataset}, beside the paper.",
            notes=protocol + data_notes([provenance[dataset]]),
        )
