"""Move one model of a fused group to where embed_trained reads it, or fail with its error."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

import contextlib
import os
from pathlib import Path

from pipeline_lib.config.fusing import member_name
from pipeline_lib.runtime.io import load_json
from pipeline_lib.runtime.logs import job_logging

with job_logging(snakemake.log[0]):
    member = member_name(snakemake.wildcards.inlier, snakemake.wildcards.seed)
    folder = Path(snakemake.input.outcome).parent
    record = load_json(snakemake.input.outcome)["models"][member]
    if record["status"] != "trained":
        raise RuntimeError(
            f"model {Path(snakemake.output.model).parent} ({record['status']} in the fused "
            f"group {folder}): {record['error']}"
        )
    missing = [
        name for name in ("model.pt", "train_history.json") if not (folder / member / name).exists()
    ]
    if missing:
        raise FileNotFoundError(
            f"{folder / member} lacks {', '.join(missing)}; delete {snakemake.input.outcome} "
            "and re-run to train the group again"
        )
    # A move, not a copy: the group's outcome.json is temporary, and nothing else reads these.
    os.replace(folder / member / "train_history.json", snakemake.output.history)
    os.replace(folder / member / "model.pt", snakemake.output.model)
    with contextlib.suppress(OSError):  # the member's folder, now empty
        (folder / member).rmdir()
