"""Fit each patch detector, score every test patch into maps; image / pixel AUC and AUPRO."""

from pipeline_lib.runtime.warm_jobs import hand_over

hand_over(snakemake)  # runs the job in the run's warm worker where one serves it

from pipeline_lib.data.mvtec import category_from_arrays
from pipeline_lib.mvtec.patches import score_category
from pipeline_lib.runtime.io import load_npz, save_json, save_npz
from pipeline_lib.runtime.torch_jobs import torch_job

with torch_job(snakemake) as device:
    category = category_from_arrays(load_npz(snakemake.input.category))
    features = load_npz(snakemake.input.features)
    detectors = snakemake.params.detectors
    for detector, result_path, scores_path in zip(
        detectors, snakemake.output.results, snakemake.output.scores, strict=True
    ):
        record, maps = score_category(
            category,
            features,
            detector=detector,
            detector_params=detectors[detector],
            device=device,
            patch_size=snakemake.params.patch_size,
            stride=snakemake.params.stride,
            sigma=snakemake.params.sigma,
            normalize=snakemake.params.normalize,
            pro_max_fpr=snakemake.params.pro_max_fpr,
        )
        record.update(method=snakemake.wildcards.method, seed=int(snakemake.wildcards.seed))
        save_npz(scores_path, maps)
        save_json(result_path, record)
