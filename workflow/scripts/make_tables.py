"""The main table and per-class tables, beside the published numbers, in four formats."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.paper.aggregate import (
    format_main_table,
    format_per_class_table,
    main_table,
    per_class_table,
    table_verdicts,
)
from pipeline_lib.paper.intervals import interval_note
from pipeline_lib.paper.paired import main_table_comparisons
from pipeline_lib.paper.protocol import data_notes, table_notes, training_notes
from pipeline_lib.paper.published import load_published
from pipeline_lib.paper.verdict import opening_line
from pipeline_lib.results.table_files import write_table
from pipeline_lib.results.tidy_table import load_results_csv, save_results_csv
from pipeline_lib.runtime.io import atomic_path, load_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    results = load_results_csv(snakemake.input[0])
    published = load_published()
    published_datasets = set(published["dataset"])
    # Which data sets were not read from the official files: a line above each table.
    provenance = {r["dataset"]: r for r in map(load_json, snakemake.input.provenance)}
    training = training_notes([load_json(path) for path in snakemake.input.histories])
    main = main_table(results, published)
    # Each cell against the paper's number; the count opens the table and the summary page.
    breaks = list(snakemake.params.breaks)
    verdicts = table_verdicts(main, breaks=breaks)
    save_results_csv(verdicts, snakemake.output.verdicts)
    beside = bool(main["published_mean"].notna().any())  # a published number is shown
    write_table(
        format_main_table(main),
        Path(snakemake.output.main[0]).with_suffix(""),
        caption="Mean +- std [95 % interval] of the class-mean ROC AUC (x100)"
        + (", beside the paper." if beside else "."),
        notes=[
            opening_line(verdicts, breaks, published_datasets),
            *table_notes(
                protocol=snakemake.params.protocol,
                data=data_notes(list(provenance.values())),
                training=training,
                published=beside,
            ),
            interval_note(main["ci_over"]),
        ],
    )
    with atomic_path(snakemake.output.comparisons) as tmp:
        tmp.write_text(main_table_comparisons(results), encoding="utf-8")
    for dataset in snakemake.params.datasets:
        per_class = per_class_table(results, dataset, published)
        beside = bool(per_class["published_mean"].notna().any())
        write_table(
            format_per_class_table(per_class),
            Path(snakemake.output.main[0]).parent / "per_class" / dataset,
            caption=f"Per-class ROC AUC (x100) on {dataset}"
            + (", beside the paper." if beside else "."),
            notes=[
                opening_line(table_verdicts(per_class, breaks=breaks), breaks, published_datasets),
                *table_notes(
                    protocol=snakemake.params.protocol,
                    data=data_notes([provenance[dataset]]),
                    training=training,
                    published=beside,
                ),
                interval_note(per_class["ci_over"]),
            ],
        )
