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


def script_module(released: Released, name: str, data_dir: Path) -> ModuleType:
    """A preparation script of ``script/`` (``prepare_dogvscat``, ``prepare_celeba``) imported
    with ``DATA_DIR`` set: both read it when they are imported."""
    os.environ["DATA_DIR"] = str(data_dir)
    module = f"script.{name}"
    sys.modules.pop(module, None)  # read DATA_DIR anew
    return importlib.import_module(module)


class _IdxBuilder:
    """What ``tfds.builder('fashion_mnist', data_dir=root)`` gives ``data/fmnist.py``, read
    from the four IDX files in ``root`` (plain or ``.gz``) in file order: ``as_dataset(split)``
    yields ``{'image': uint8 (28, 28, 1), 'label': int64}`` as TF tensors, as the tfds
    builder's examples. (The tfds builder itself writes its examples in an order of hashed
    keys; the set of examples is the same.)"""

    FILES = {
        "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
        "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
    }

    def __init__(self, tf: ModuleType, root: Path) -> None:
        self.tf, self.root = tf, Path(root)

    def _read(self, stem: str, header: int) -> bytes:
        import gzip

        plain = self.root / stem
        raw = (
            plain.read_bytes()
            if plain.is_file()
            else gzip.decompress((self.root / f"{stem}.gz").read_bytes())
        )
        return raw[header:]

    def download_and_prepare(self) -> None:
        raise RuntimeError("the harness never downloads: pass a folder holding the IDX files")

    def as_dataset(self, split: str) -> list[dict]:
        import numpy as np

        images_file, labels_file = self.FILES[split]
        images = np.frombuffer(self._read(images_file, 16), np.uint8).reshape(-1, 28, 28, 1)
        labels = np.frombuffer(self._read(labels_file, 8), np.uint8).astype(np.int64)
        return [
            {"image": self.tf.constant(image), "label": self.tf.constant(label)}
            for image, label in zip(images, labels, strict=True)
        ]


def adapt_fashion_mnist(released: Released) -> None:
    """``data/fmnist.py:28`` loads Fashion-MNIST through ``tfds.builder('fashion_mnist',
    data_dir=root)``, which would download and prepare it; give that module a ``tfds`` whose
    ``builder`` reads the IDX files of ``root`` instead (:class:`_IdxBuilder`)."""
    from types import SimpleNamespace

    fmnist = released.module("data.fmnist")
    fmnist.tfds = SimpleNamespace(builder=lambda name, data_dir: _IdxBuilder(released.tf, data_dir))


class _CelebAFolder:
    """What ``tfds.builder('celeb_a')`` gives ``script/prepare_celeba.py``, read from the
    torchvision layout of ``folder`` (``img_align_celeba/``, ``list_attr_celeba.txt``,
    ``list_eval_partition.txt``): ``as_dataset(split)`` yields, in partition-file order,
    ``{'image': uint8 (218, 178, 3), 'attributes': {name: bool}}``. The image is decoded by
    ``tf.io.decode_jpeg`` with ``dct_method`` (``""``, TF's default, is what tfds's
    ``tf.image.decode_image`` runs: libjpeg's ``INTEGER_FAST`` inverse DCT;
    ``"INTEGER_ACCURATE"`` is libjpeg's ``ISLOW``, which PIL and OpenCV use). Splits: train
    0, validation 1, test 2. (tfds stores its examples in an order of hashed keys; the set
    of each split is the same.)"""

    SPLITS = {"train": "0", "validation": "1", "test": "2"}

    def __init__(self, tf: ModuleType, folder: Path, dct_method: str = "") -> None:
        self.tf, self.folder, self.dct_method = tf, Path(folder), dct_method

    def download_and_prepare(self) -> None:
        """Nothing to download: the folder is already there."""

    def as_dataset(self, split: str) -> list[dict]:
        lines = (self.folder / "list_attr_celeba.txt").read_text().split("\n")
        names = lines[1].split()
        attributes = {}
        for line in lines[2:]:
            if line.strip():
                fields = line.split()
                attributes[fields[0]] = {
                    n: v == "1" for n, v in zip(names, fields[1:], strict=True)
                }
        wanted = self.SPLITS[split]
        rows = [
            line.split()
            for line in (self.folder / "list_eval_partition.txt").read_text().split("\n")
        ]
        files = [fields[0] for fields in rows if len(fields) == 2 and fields[1] == wanted]
        decode = self.tf.io.decode_jpeg
        read = self.tf.io.read_file
        return [
            {
                "image": decode(
                    read(str(self.folder / "img_align_celeba" / f)),
                    channels=3,
                    dct_method=self.dct_method,
                ),
                "attributes": attributes[f],
            }
            for f in files
        ]


def adapt_celeba(
    released: Released, folder: Path, data_dir: Path, dct_method: str = ""
) -> ModuleType:
    """``data/celeba.py:48`` calls ``self.prepare_numpy_data``, which exists only as a function
    of ``script/prepare_celeba.py`` (that loads CelebA through ``tfds.builder('celeb_a')``):
    make the script's function the class's, with a ``tfds`` whose builder reads ``folder``
    (:class:`_CelebAFolder`, decoding with ``dct_method``); the script caches its arrays
    under ``data_dir/celeba_npy``. Returns the script module."""
    from types import SimpleNamespace

    script = script_module(released, "prepare_celeba", data_dir)
    script.tfds = SimpleNamespace(
        builder=lambda name: _CelebAFolder(released.tf, folder, dct_method)
    )
    celeba = released.module("data.celeba")
    celeba.CelebA.prepare_numpy_data = staticmethod(script.prepare_numpy_data)
    return script


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
