"""The summary page: every table and figure, largest deviations from the paper first."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

import os
from pathlib import Path

import pandas as pd

from pipeline_lib.paper.protocol import data_notes
from pipeline_lib.paper.verdict import count_line, verdict_counts
from pipeline_lib.results.tidy_table import load_results_csv
from pipeline_lib.runtime.io import atomic_path, load_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.site.run_links import main_table_run_links
from pipeline_lib.site.summary import build_summary, summary_html
from pipeline_lib.studies.files import load_study, study_files

with job_logging(snakemake.log[0]):
    studies, links = {}, {}
    for manifest in snakemake.input.manifests:
        folder, name = Path(manifest).parent, Path(manifest).stem
        studies[name] = load_study(folder, name)
        links[name] = study_files(folder, name)
    out = Path(snakemake.output.html).parent
    # Links relative to the page, so the results folder can be moved or zipped.
    links = {name: [Path(os.path.relpath(p, out)) for p in paths] for name, paths in links.items()}
    # The main table inline (its display form, as make_tables wrote it), with the lines on
    # how the run's protocol and data differ from the paper's above it.
    main_csv = Path(snakemake.input.main_table)
    verdicts = pd.read_csv(snakemake.input.verdicts, keep_default_na=False)["verdict"]
    main = {
        "count": count_line(verdict_counts(verdicts), snakemake.params.breaks),
        "table": pd.read_csv(main_csv, dtype=str, keep_default_na=False),
        "protocol": list(snakemake.params.protocol)
        + data_notes([load_json(path) for path in snakemake.input.provenance]),
        "links": [
            Path(os.path.relpath(main_csv.with_suffix(suffix), out))
            for suffix in (".md", ".html", ".csv", ".tex")
        ],
        # the mean-rank plot, written only with 3 data sets or more
        "ranks": Path(os.path.relpath(snakemake.input.ranks[0], out))
        if snakemake.input.ranks
        else None,
        "n_datasets": snakemake.params.n_datasets,
        # each cell of ours links its MLflow runs, where tracking logged them
        "run_links": main_table_run_links(
            load_results_csv(snakemake.input.results),
            load_json(snakemake.input.logged[0]) if snakemake.input.logged else None,
            relative_to=out,
        ),
    }
    markdown = build_summary(studies, links, main=main)
    with atomic_path(snakemake.output.markdown) as tmp:
        tmp.write_text(markdown)
    with atomic_path(snakemake.output.html) as tmp:
        tmp.write_text(summary_html(studies, links, main=main))
