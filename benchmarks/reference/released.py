"""Import the authors' released code (google-research/deep_representation_one_class) from a
checkout named on the command line, with the few adapters a current TensorFlow and NumPy need.

Runs only inside the reference environment (`make reference-env`): TensorFlow CPU with
tf-keras, never the project's own environment. Nothing of the released code is copied into
this repository; each adapter below is listed in benchmarks/reference/README.md.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

# Set before TensorFlow is imported: the released code is written against tf.keras 2.x
# (tf-keras), and oneDNN's reordered kernels would make two traces of one input differ.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

RELEASED_REPOSITORY = "google-research/deep_representation_one_class"


@dataclass(frozen=True)
class Released:
    """The released code, imported, with what a trace records about it."""

    root: Path
    commit: str
    tf: ModuleType

    def module(self, name: str) -> ModuleType:
        """A module of the released code by its dotted name (``"util.train"``)."""
        return importlib.import_module(name)

    @property
    def versions(self) -> dict[str, str]:
        import numpy
        import sklearn

        return {
            "tensorflow": self.tf.__version__,
            "tf_keras": _version("tf_keras"),
            "numpy": numpy.__version__,
            "scikit-learn": sklearn.__version__,
        }


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def released_commit(root: Path) -> str:
    """The checkout's commit: every trace names the code it was made from."""
    try:
        # A fixed git command on a folder the user named; no input becomes a command.
        out = subprocess.run(  # noqa: S603
            ["git", "-C", str(root), "rev-parse", "HEAD"],  # noqa: S607
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(
            f"{root} is not a git checkout of {RELEASED_REPOSITORY}: clone it "
            f"(git clone https://github.com/{RELEASED_REPOSITORY}) and pass its folder"
        ) from error
    return out.stdout.strip()


def load_released(root: str | os.PathLike) -> Released:
    """Put the checkout on ``sys.path``, apply the adapters and import TensorFlow once."""
    root = Path(root).resolve()
    if not (root / "util" / "train.py").is_file():
        raise SystemExit(
            f"{root} has no util/train.py: pass the root of a {RELEASED_REPOSITORY} checkout"
        )
    commit = released_commit(root)
    import numpy as np
    import tensorflow as tf

    tf.config.experimental.enable_op_determinism()
    # NumPy 2 removed the alias that data/data_util.py uses (`np.int(np.ceil(...))`).
    if not hasattr(np, "int"):
        setattr(np, "int", int)  # noqa: B010
    sys.path.insert(0, str(root))
    _adapt_optimizer(importlib.import_module("util.train"), tf)
    _adapt_detectors(importlib.import_module("util.train"))
    return Released(root=root, commit=commit, tf=tf)


def _adapt_optimizer(train: ModuleType, tf: ModuleType) -> None:
    """tf-keras 2.21's SGD cannot be asked ``learning_rate(iterations)`` (util/train.py's
    ``train_epoch_begin``); the legacy SGD is TF 2.3's optimizer and kernel
    (``ResourceApplyKerasMomentum``: v <- m v - lr g; w <- w + v)."""

    def get_optimizer(scheduler, optim_type="sgd", learning_rate=0.03, **kwargs):
        if optim_type != "sgd":
            raise NotImplementedError(f"the harness adapts only SGD, not {optim_type!r}")
        momentum = kwargs.get("momentum", 0.9)
        nesterov = kwargs.get("nesterov", False)
        optimizer = tf.keras.optimizers.legacy.SGD(
            learning_rate=scheduler, momentum=momentum, nesterov=nesterov
        )
        name = f"sgd_lr{learning_rate:g}_mom{momentum:g}" + ("_nesterov" if nesterov else "")
        return optimizer, name

    train.BaseTrain.get_optimizer = staticmethod(get_optimizer)


def _adapt_detectors(train: ModuleType) -> None:
    """util/train.py hands scikit-learn a ``tf.Tensor`` gamma, which a current scikit-learn's
    parameter validation refuses; the same value as a Python float."""
    from sklearn.svm import OneClassSVM

    def one_class_svm(kernel="rbf", gamma="scale", **kwargs):
        if not isinstance(gamma, str):
            gamma = float(gamma)
        return OneClassSVM(kernel=kernel, gamma=gamma, **kwargs)

    train.OneClassSVM = one_class_svm


def keep_first_inliers(count: int) -> None:
    """Train the released CIFAR loaders on the first ``count`` training inliers, in the
    order of the data files (``data/cifar.py``, ``process_for_ood``, keeps every inlier).

    The side-by-side runs (``side_by_side.py``) give both implementations the same images;
    the test split stays whole.
    """
    cifar = importlib.import_module("data.cifar")
    keep_all = cifar.CIFAR.process_for_ood

    def process_for_ood(self, category=0):
        keep_all(self, category)
        if len(self.trainval_data[0]) < count:
            raise SystemExit(
                f"class {category} has {len(self.trainval_data[0])} training images, "
                f"fewer than the {count} asked for"
            )
        self.trainval_data = [part[:count] for part in self.trainval_data]

    cifar.CIFAR.process_for_ood = process_for_ood


def redraw_initial_weights(model, seed: int) -> int:
    """Draw every kernel of ``model`` again from its own seeded copy of its initializer.

    Under tf-keras 2.21 one unseeded initializer instance returns the same values on every
    call, and the released convolutions share one default-argument instance
    (``model/resnet_util.py:31, 54, 65``): same-shape 3x3 convolutions start with identical
    kernels. Under TF 2.3, where the paper ran, each call drew new numbers. Here each layer
    gets a copy of its initializer (same class and configuration, so the same distribution)
    with a seed of its own, derived from ``seed`` and the layer's position. Biases and
    BatchNorm start constant and are left alone. Returns how many kernels were drawn.
    """
    import numpy as np

    drawn = 0
    for position, layer in enumerate(model.layers):
        initializer = getattr(layer, "kernel_initializer", None)
        if initializer is None or not hasattr(layer, "kernel"):
            continue
        layer_seed = int(np.random.SeedSequence([seed, position]).generate_state(1)[0] >> 1)
        own = type(initializer).from_config({**initializer.get_config(), "seed": layer_seed})
        layer.kernel.assign(own(layer.kernel.shape, dtype=layer.kernel.dtype))
        drawn += 1
    if drawn == 0:
        raise ValueError(f"{model.name} has no layer with a kernel initializer")
    return drawn
