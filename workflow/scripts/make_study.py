"""One study: its tidy results, its table (CSV, Markdown, LaTeX, HTML) and its figures,
beside the paper's numbers."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

import dataclasses
from pathlib import Path

from pipeline_lib.paper.protocol import data_notes, table_notes, training_notes
from pipeline_lib.results.study_frames import collect_study, load_scores, save_frames
from pipeline_lib.runtime.io import load_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.studies import build_study
from pipeline_lib.studies.files import write_comparisons, write_study

with job_logging(snakemake.log[0]):
    kind = snakemake.params.kind
    frame, expected = collect_study(
        list(zip(snakemake.params.result_keys, snakemake.input.results, strict=True)),
        snakemake.params.variants,
        uniformity=snakemake.params.uniformity,
    )
    study = Path(snakemake.output.manifest).parent
    save_frames(frame, expected, study)
    # Ensembles combine the per-seed test scores saved beside each result.
    scores = load_scores(frame) if kind == "ensembles" else None
    result = build_study(kind, frame, expected, options=snakemake.params.options, scores=scores)
    # Beside published numbers: how this grid's protocol differs from the paper's and which
    # of its data sets were not read from the official files; always: what its models
    # trained on (their own records). Lines above its table.
    paper = result.table.get("paper_mean")
    protocol = table_notes(
        protocol=snakemake.params.protocol,
        data=data_notes([load_json(path) for path in snakemake.input.provenance]),
        training=training_notes([load_json(path) for path in snakemake.input.histories]),
        published=len(result.deviations) > 0 or (paper is not None and paper.notna().any()),
    )
    result = dataclasses.replace(result, protocol=protocol)
    figures = Path(snakemake.output.figures)
    figures.mkdir(parents=True, exist_ok=True)
    # The main grid's human tables are summary/main_table.* (make_tables writes
    # them once); its study links them instead of writing a second copy.
    tables = snakemake.input.get("main_table")
    for path in write_study(result, study, snakemake.wildcards.study, tables=tables):
        if path.suffix == ".png":  # the report shows the figures folder as one gallery
            path.replace(figures / path.name)
    # Paired Wilcoxon tests between the study's rows, blocked on inlier classes.
    write_comparisons(frame, study, snakemake.wildcards.study)
