"""The planner's built-in numbers: which rules use the device, and the rates and job times
a plan falls back to when nothing measured them (rate tables, earlier runs).
"""

from __future__ import annotations

from pipeline_lib.config.gpus import IMAGE_GPU_RULES

#: Rules that run on the accelerator when given a GPU (the rest always use the CPU): the
#: training and embedding rules of the image benchmarks, which profiles/gpu gives a GPU.
DEVICE_RULES: tuple[str, ...] = IMAGE_GPU_RULES

#: Training instances per second (source images; contrastive DA: its expanded copies,
#: :func:`~pipeline_lib.registry.instances_per_image`), ResNet-18 width 64 on 32x32 images
#: at the paper's batch size, per device: measured with ``benchmarks/bench_train.py``.
#: ``cpu``: a 2-core CPU (the CI machine). ``cuda``: one job alone on an H200 (below);
#: earlier runs' benchmark files or ``--images-per-s`` take precedence.
DEFAULT_IMAGES_PER_S: dict[str, dict[str, float | None]] = {
    "cpu": {
        "rotnet": 5.8,
        "rotation": 6.7,
        "denoising": 26.4,
        "contrastive": 12.0,
        "contrastive_da": 3.0,
    },
    # One job alone on an NVIDIA H200 (bf16 autocast, channels-last, width 64) with the
    # graph-captured step, the default on CUDA: the fuse-1 graph rows of
    # benchmarks/rates/h200.csv (the median of a day's rows, as --rates takes them; device
    # sessions of 2026-11-27). The eager step trained 2.5-6.3x slower in the same run (those
    # rows: `--rates` with that file and `train.step_mode: eager`); a fused job of K captured
    # models side by side trains 1.3-2.4x one job's images (`train.fuse`;
    # benchmarks/rates/README.md).
    "cuda": {
        "rotnet": 11297.0,
        "rotation": 10687.0,
        "denoising": 23088.0,
        "contrastive": 10280.5,
        "contrastive_da": 10414.0,
    },
}

#: Wall seconds per job of the rules that do not train, at the paper's sizes, when no
#: ``benchmark:`` file measured them: rough guesses (a Python start with torch and
#: scikit-learn is ~5 s; embedding a 60,000-image data set through ResNet-18 takes minutes
#: on a CPU; OC-SVM and KDE on 5,000 x 512 features about a minute). Replace them by
#: measurements: run a few jobs first, then plan again in the same working directory.
DEFAULT_JOB_SECONDS: dict[str, float] = {
    "prepare_dataset": 120.0,
    "prepare_split": 5.0,
    "embed_frozen_dataset": 600.0,
    "embed_trained": 120.0,
    "score_detectors": 120.0,
    "score_rotation_classifier": 10.0,
}
#: Any rule not in :data:`DEFAULT_JOB_SECONDS` (aggregation, plots, MLflow, ...).
DEFAULT_OTHER_SECONDS = 30.0

#: The rules that train models (one alone, or fused).
TRAINING_RULES: tuple[str, ...] = ("train_representation", "train_fused")

#: Epochs between checkpoints of a config that does not set ``train.checkpoint_every``: the
#: schema's default (workflow/schemas/config.schema.yaml), which a validated config holds.
DEFAULT_CHECKPOINT_EVERY = 10
