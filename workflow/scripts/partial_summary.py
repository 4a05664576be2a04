"""Summary of whatever results exist now, every missing one marked (no job is started)."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

import dataclasses
import os
from pathlib import Path

from pipeline_lib.results.study_frames import collect_study, load_scores
from pipeline_lib.runtime.io import atomic_path
from pipeline_lib.runtime.logs import job_logging
from pipeline_lib.site.summary import build_summary, summary_html
from pipeline_lib.studies import build_study
from pipeline_lib.studies.files import write_study

with job_logging(snakemake.log[0]):
    out = Path(snakemake.output[0]).parent
    studies, links = {}, {}
    for name, grid in snakemake.params.grids.items():
        frame, expected = collect_study(
            list(zip(grid["keys"], grid["paths"], strict=True)),
            snakemake.params.variants,
            uniformity=grid["uniformity"],
        )
        scores = load_scores(frame) if grid["kind"] == "ensembles" else None
        studies[name] = dataclasses.replace(
            build_study(grid["kind"], frame, expected, options=grid["options"], scores=scores),
            protocol=list(grid["protocol"]),
        )
        paths = write_study(studies[name], out / name, name)
        links[name] = [Path(os.path.relpath(path, out)) for path in paths]
    with atomic_path(out / "index.md") as tmp:
        tmp.write_text(build_summary(studies, links))
    with atomic_path(snakemake.output[0]) as tmp:
        tmp.write_text(summary_html(studies, links))
