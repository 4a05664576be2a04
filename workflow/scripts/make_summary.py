"""The summary page: every table and figure, largest deviations from the paper first."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pathlib import Path

import pandas as pd

from pipeline_lib.config.keys import ResultKey
from pipeline_lib.paper.aggregate import main_table
from pipeline_lib.paper.intervals import interval_note
from pipeline_lib.paper.plots import roc_title
from pipeline_lib.paper.protocol import data_notes, table_notes, training_notes
from pipeline_lib.paper.published import load_published
from pipeline_lib.paper.verdict import opening_line
from pipeline_lib.results.tidy_table import load_results_csv
from pipeline_lib.runtime.io import atomic_path, load_json
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.site.run_links import main_table_run_links
from pipeline_lib.site.sections import (
    data_set_section,
    explanation_section,
    files_section,
    mvtec_section,
    per_class_section,
)
from pipeline_lib.site.summary import build_summary, summary_html
from pipeline_lib.studies.files import load_study, study_files

with job_logging(snakemake.log[0]):
    studies, links = {}, {}
    for manifest in snakemake.input.manifests:
        folder, name = Path(manifest).parent, Path(manifest).stem
        studies[name] = load_study(folder, name)
        links[name] = study_files(folder, name)
    # Links are written relative to the page, so the results folder can be moved or zipped.
    out = Path(snakemake.output.html).parent
    results = load_results_csv(snakemake.input.results)
    published = load_published()
    provenance = [load_json(path) for path in snakemake.input.provenance]
    # The main table inline (its display form, as make_tables wrote it). Above it: the
    # count of reproduced cells, or why no cell has a published counterpart; how the run's
    # protocol and data differ from the paper's only where a published number is shown;
    # what its models trained on, from their own records.
    main_csv = Path(snakemake.input.main_table)
    verdicts = pd.read_csv(snakemake.input.verdicts, keep_default_na=False)
    beside_paper = bool((verdicts["verdict"] != "no paper value").any())
    main = {
        "count": opening_line(verdicts, snakemake.params.breaks, set(published["dataset"])),
        "table": pd.read_csv(main_csv, dtype=str, keep_default_na=False),
        "protocol": table_notes(
            protocol=snakemake.params.protocol,
            data=data_notes(provenance),
            training=training_notes([load_json(path) for path in snakemake.input.histories]),
            published=beside_paper,
        ),
        "notes": [interval_note(main_table(results, published)["ci_over"])],
        "links": [main_csv.with_suffix(suffix) for suffix in (".md", ".html", ".csv", ".tex")],
        # the mean-rank plot, written only with 3 data sets or more
        "ranks": Path(snakemake.input.ranks[0]) if snakemake.input.ranks else None,
        "n_datasets": snakemake.params.n_datasets,
        # each cell of ours links its MLflow runs, where tracking logged them
        "run_links": main_table_run_links(
            results,
            load_json(snakemake.input.logged[0]) if snakemake.input.logged else None,
            relative_to=out,
        ),
    }
    # Every other table and figure of the summary folder, inline or linked.
    per_class = {}
    for path in map(Path, snakemake.input.per_class):
        per_class.setdefault(path.stem, []).append(path)
    sections = [data_set_section(results, provenance)]
    for dataset, bars, roc, job in zip(
        snakemake.params.datasets,
        snakemake.input.bars,
        snakemake.input.roc,
        snakemake.params.roc_jobs,
        strict=True,
    ):
        sections.append(
            per_class_section(
                dataset,
                per_class[dataset],
                bars=Path(bars),
                roc=(Path(roc), roc_title(ResultKey.from_path(job))),
            )
        )
    if snakemake.input.mvtec:
        mvtec_tables = {}
        for path in map(Path, snakemake.input.mvtec):
            if path.suffix != ".png":
                mvtec_tables.setdefault(path.stem, []).append(path)
        heatmaps = [Path(p) for p in snakemake.input.mvtec if Path(p).suffix == ".png"]
        sections.append(mvtec_section(mvtec_tables, heatmaps))
    if snakemake.input.explanations:
        sections.append(explanation_section([Path(p) for p in snakemake.input.explanations]))
    run_provenance = {Path(p).suffix: Path(p) for p in snakemake.input.run_provenance}
    sections.append(
        files_section(
            [
                ("The tidy table of every job's result", Path(snakemake.input.results)),
                (
                    "Each main-table cell placed against the paper's number",
                    Path(snakemake.input.verdicts),
                ),
                (
                    "Paired Wilcoxon tests between the main table's rows",
                    Path(snakemake.input.comparisons),
                ),
                ("What made these results: code, config, packages", run_provenance[".html"]),
                ("The same record as JSON", run_provenance[".json"]),
                ("This page as Markdown", Path(snakemake.output.markdown)),
            ]
        )
    )
    markdown = build_summary(studies, links, main=main, sections=sections, relative_to=out)
    with atomic_path(snakemake.output.markdown) as tmp:
        tmp.write_text(markdown)
    with atomic_path(snakemake.output.html) as tmp:
        tmp.write_text(summary_html(studies, links, main=main, sections=sections, relative_to=out))
