"""The tidy CSV of every MVTec job, per-category tables and the object / texture / all
summary beside the paper, in four formats."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

from pipeline_lib.mvtec.tables import (
    METRICS,
    format_per_category,
    format_summary,
    group_summary,
    mvtec_results_frame,
    paper_comparison_notes,
    per_category_table,
)
from pipeline_lib.paper.intervals import interval_note
from pipeline_lib.paper.protocol import training_notes
from pipeline_lib.results.table_files import write_table
from pipeline_lib.runtime.io import atomic_path, load_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    results = mvtec_results_frame(
        [
            {**load_json(path), "result_key": Path(path).parent.as_posix()}
            for path in snakemake.input.results
        ]
    )
    with atomic_path(snakemake.output.results) as tmp:
        results.to_csv(tmp, index=False)
    folder = Path(snakemake.output.results).parent
    # Categories from mvtec.paths are the user's own data, whatever their name.
    own = snakemake.params.own_categories
    # How the run differs from the paper, and what its models trained on (their records).
    protocol = [
        *snakemake.params.protocol,
        *training_notes([load_json(path) for path in snakemake.input.histories]),
    ]
    summary = group_summary(results, own_categories=own)
    write_table(
        format_summary(summary),
        folder / "summary",
        notes=[*protocol, *paper_comparison_notes(results, own_categories=own)],
        footnotes=[interval_note(summary["ci_over"])],
        caption=(
            "MVTec AD: mean over categories, mean +- std over seeds (x100), beside the "
            "paper's Table 6 (no published AUPRO)."
        ),
    )
    for metric in snakemake.params.metrics:
        per_category = per_category_table(results, metric=metric)
        write_table(
            format_per_category(per_category),
            folder / f"per_category_{metric}",
            caption=f"MVTec AD per category: {METRICS[metric][0]} (x100), mean +- std over seeds.",
            notes=protocol,
            footnotes=[interval_note(per_category["ci_over"])],
        )
