"""The planner's built-in numbers: which rules use the device, and the rates and job times
a plan falls back to when nothing measured them (rate tables, earlier runs).
"""

from __future__ import annotations

from pipeline_lib.config.gpus import IMAGE_GPU_RULES
from pipeline_lib.registry import method_spec

#: Rules that run on the accelerator when given a GPU (the rest always use the CPU): the
#: training and embedding rules of the image benchmarks, which profiles/gpu gives a GPU.
DEVICE_RULES: tuple[str, ...] = IMAGE_GPU_RULES


def default_images_per_s(device: str, method: str) -> float | None:
    """Training instances per second of ``method`` on a ``device`` kind when nothing measured
    them: the method's :attr:`~pipeline_lib.registry.MethodSpec.rates` (source images;
    contrastive DA: its expanded copies, :func:`~pipeline_lib.registry.instances_per_image`),
    None where the method has none (unmeasured). Rate tables, earlier runs' benchmark files
    and ``--images-per-s`` take precedence.
    """
    return method_spec(method).rates.get(device)


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
