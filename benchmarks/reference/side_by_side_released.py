"""The released side of ``side_by_side.py``: its trainers driven in-process, as its
``train_and_eval_loop.py`` drives them, with the scripts' flags (reference environment only).

The flags are those of ``script/run_rotation.sh`` (rotation prediction) and
``script/run_contrastive_da.sh`` (contrastive DA); RotNet is rotation prediction with a
linear classifier on ``f`` (``--head_dims=''``). What the side-by-side changes: the inlier
class (``--category=1``, automobile), the width (``--net_width=0.25``), the budget
(``--num_epoch=30``), the seed and the data root; and, through the harness's adapters
(README.md), the first 1,000 training inliers and one seeded initializer per layer.
"""

from __future__ import annotations

import functools
import pickle
import shutil
import time
from pathlib import Path

from released import keep_first_inliers, load_released, redraw_initial_weights
from side_by_side_runs import (
    INLIER,
    RELEASED_WIDTH,
    TRAIN_IMAGES,
    RunResult,
    detectors_of,
)

#: CIFAR-10's label of the inlier class (``batches.meta``'s order).
INLIER_LABEL = 1
#: The released scripts' view augmentation (``--aug_list``'s first entry).
VIEWS = "cnr0.5+hflip+jitter_b0.4_c0.4_s0.4_h0.4+gray0.2+blur0.5"
ROTATIONS = "+rotate90,+rotate180,+rotate270"
COMMON = {
    "dataset": "cifar10ood",
    "net_type": "ResNet18",
    "input_shape": "32,32,3",
    "optim_type": "sgd",
    "sched_type": "cos",
    "learning_rate": "0.01",
    "momentum": "0.9",
    "weight_decay": "0.0003",
}
#: Per method, the flags of its script (RotNet: rotation's, without the MLP head).
METHOD_FLAGS = {
    "rotation": {
        "method": "UnsupEmbed",
        "latent_dim": "4",
        "aug_list": f"{VIEWS},{ROTATIONS}",
        "aug_list_for_test": f"x,{ROTATIONS}",
        "head_dims": ",".join(["512"] * 8),
        "batch_size": "64",
    },
    "rotnet": {
        "method": "UnsupEmbed",
        "latent_dim": "4",
        "aug_list": f"{VIEWS},{ROTATIONS}",
        "aug_list_for_test": f"x,{ROTATIONS}",
        "head_dims": "",
        "batch_size": "64",
    },
    "contrastive_da": {
        "method": "Contrastive",
        "latent_dim": "0",
        "aug_list": f"{VIEWS},+",
        "aug_list_for_test": "x",
        "head_dims": ",".join(["512"] * 8 + ["128"]),
        "batch_size": "32",
        "temperature": "0.2",
        "distaug_type": "rot",
    },
}
#: Where the released ``eval_embed`` keeps each score (``pool`` = ``f``).
RELEASED_METRICS = {
    "kde": "pool.kde",
    "ocsvm": "pool.kocsvm",
    "rotation_released": "dscore.auc",
    "rotation_p0": "logit.auc",
}


def released_flags(
    method: str, seed: int, *, epochs: int, cifar_folder: Path, model_dir: Path
) -> list[str]:
    """The command line of one run, as ``train_and_eval_loop.py`` would be called."""
    flags = {
        **COMMON,
        **METHOD_FLAGS[method],
        "model_dir": str(model_dir),
        "file_path": f"{method}_s{seed}",
        "category": str(INLIER_LABEL),
        "seed": str(seed),
        "root": str(cifar_folder),
        "net_width": str(RELEASED_WIDTH),
        "num_epoch": str(epochs),
    }
    return [f"--{name}={value}" for name, value in flags.items()]


class ReleasedRunner:
    """Imports the released code once; each :meth:`run` trains and scores one model."""

    def __init__(self, checkout: Path, data_root: Path, *, threads: int, workdir: Path) -> None:
        self.released = load_released(checkout)
        # Before the first operation runs; TensorFlow's default is every core.
        self.released.tf.config.threading.set_intra_op_parallelism_threads(threads)
        self.released.tf.config.threading.set_inter_op_parallelism_threads(threads)
        keep_first_inliers(TRAIN_IMAGES)
        # Importing the binary defines its absl flags (and their defaults) without running it.
        self.loop = self.released.module("train_and_eval_loop")
        self.lib = self.released.module("train_and_eval_lib")
        self.cifar_folder = data_root / "cifar-10-batches-py"
        self.workdir = workdir
        _check_inlier_label(self.cifar_folder)
        print(f"released code at {self.released.commit[:12]}, {self.released.versions}")

    def run(self, method: str, seed: int, *, epochs: int) -> RunResult:
        from absl import flags

        tf = self.released.tf
        model_dir = self.workdir / f"{method}_s{seed}"
        shutil.rmtree(model_dir, ignore_errors=True)
        argv = released_flags(
            method, seed, epochs=epochs, cifar_folder=self.cifar_folder, model_dir=model_dir
        )
        FLAGS = flags.FLAGS  # noqa: N806 (absl's name)
        FLAGS.unparse_flags()
        FLAGS(["train_and_eval_loop", *argv])
        hparams = self.loop.HParams(
            {flag.name: flag.value for flag in FLAGS.get_flags_for_module(self.loop.__name__)}
        )
        trainer = self.lib.get_trainer(hparams)
        eval_seconds = []
        evaluate = trainer.eval_epoch

        def timed_eval(trainset, testset):
            started = time.perf_counter()
            evaluate(trainset=trainset, testset=testset)
            eval_seconds.append(time.perf_counter() - started)

        trainer.eval_epoch = timed_eval
        loaders = []
        get_dataset = trainer.get_dataset

        def keep_loader(*args, **kwargs):
            loaders.append(get_dataset(*args, **kwargs))
            return loaders[-1]

        trainer.get_dataset = keep_loader
        trainer.monitor_progress = functools.partial(_log_epoch, trainer)
        with trainer.strategy.scope():
            trainer.config()
            drawn = redraw_initial_weights(trainer.model, seed)
            print(f"{method} seed {seed}: {drawn} kernels drawn from their own initializers")
            started = time.perf_counter()
            trainer.train()
            total = time.perf_counter() - started
        (loader,) = loaders
        result = RunResult(
            impl="released",
            method=method,
            seed=seed,
            auroc={
                name: float(trainer.eval_metrics[RELEASED_METRICS[name]])
                for name in detectors_of(method, "released")
            },
            n_train=len(loader.trainval_data[0]),
            n_test=len(loader.test_data[0]),
            steps=int(trainer.optimizer.iterations.numpy()),
            train_seconds=total - sum(eval_seconds),
            eval_seconds=sum(eval_seconds),
            code=f"released {self.released.commit[:10]}",
            epochs=epochs,
        )
        tf.keras.backend.clear_session()
        shutil.rmtree(model_dir, ignore_errors=True)
        return result


def _log_epoch(trainer, verbose: bool = False) -> None:
    """In place of ``BaseTrain.monitor_progress``, whose ``tf.summary.scalar`` needs
    TensorBoard (not in the reference environment): the same numbers, printed."""
    del verbose
    print(
        f"epoch {trainer.epoch + 1}/{trainer.num_epoch}: loss "
        f"{float(trainer.metrics['loss.train'].result()):.4f}, acc "
        f"{float(trainer.metrics['acc.train'].result()):.3f}, lr "
        f"{float(trainer.monitor['learning_rate']):.6f}, "
        f"{float(trainer.monitor['step_per_second']):.2f} steps/s",
        flush=True,
    )


class _PlainUnpickler(pickle.Unpickler):
    """``batches.meta`` is a dict of lists and bytes (a copy written by Python 3 may encode
    them with ``_codecs.encode``): anything else that names code is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) == ("_codecs", "encode"):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"batches.meta names {module}.{name}: not a CIFAR-10 file")


def _check_inlier_label(cifar_folder: Path) -> None:
    """The released ``--category`` is a label number: make sure it names the inlier."""
    with (cifar_folder / "batches.meta").open("rb") as handle:
        names = _PlainUnpickler(handle, encoding="bytes").load()[b"label_names"]
    if names[INLIER_LABEL].decode() != INLIER:
        raise SystemExit(f"{cifar_folder}: label {INLIER_LABEL} is {names[INLIER_LABEL]!r}")
