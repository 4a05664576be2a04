"""Uniformity of a trained model: MMD of normalize(g(f)) to the uniform distribution."""

import numpy as np

from pipeline_lib.detection.metrics import uniformity_mmd
from pipeline_lib.runtime.io import load_npz, save_json
from pipeline_lib.runtime.logs import job_logging

MAX_POINTS = 2000

with job_logging(snakemake.log[0]):
    features = load_npz(snakemake.input[0])
    # The paper measures the projection g(f); a model whose head is the identity has g = f.
    space = "g" if "g_train" in features else "f"
    sample = features[f"{space}_train"]
    # The MMD's kernel matrices grow as n^2: 2,000 points (a seeded subset) keep it to seconds.
    if len(sample) > MAX_POINTS:
        rng = np.random.default_rng(int(snakemake.wildcards.seed))
        sample = sample[np.sort(rng.choice(len(sample), MAX_POINTS, replace=False))]
    mmd = uniformity_mmd(sample, seed=int(snakemake.wildcards.seed))
    save_json(snakemake.output[0], {"mmd": mmd, "space": space, "n": len(sample)})
