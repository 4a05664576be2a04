"""Writers of tiny data sets in the standard on-disk layouts, offered as fixtures.

Each fixture returns a plain function (the "factory as fixture" pattern), so tests can write
several trees with different arguments; nothing here needs ``tests`` to be a package.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

CIFAR100_RAW_COARSE = (
    "aquatic_mammals",
    "fish",
    "flowers",
    "food_containers",
    "fruit_and_vegetables",
    "household_electrical_devices",
    "household_furniture",
    "insects",
    "large_carnivores",
    "large_man-made_outdoor_things",
    "large_natural_outdoor_scenes",
    "large_omnivores_and_herbivores",
    "medium_mammals",
    "non-insect_invertebrates",
    "people",
    "reptiles",
    "small_mammals",
    "trees",
    "vehicles_1",
    "vehicles_2",
)
CIFAR10_RAW = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


def _dump(path: Path, obj: dict, *, bytes_keys: bool) -> None:
    if bytes_keys:  # like the official Python 2 pickles
        obj = {k.encode(): v for k, v in obj.items()}
    with path.open("wb") as fh:
        pickle.dump(obj, fh, protocol=2 if bytes_keys else 5)


def _rows(images: np.ndarray) -> np.ndarray:
    """NHWC uint8 -> CIFAR rows (N, 3072), channel-major."""
    return images.transpose(0, 3, 1, 2).reshape(len(images), -1).copy()


def _write_cifar10(
    root: Path, *, per_batch: int = 4, n_test: int = 6, bytes_keys: bool = True
) -> dict[str, np.ndarray]:
    """Write ``root/cifar-10-batches-py`` with 5 x ``per_batch`` train and ``n_test`` test images.

    Returns the expected NHWC images and labels.
    """
    rng = np.random.default_rng(1)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    n_train = 5 * per_batch
    train_x = rng.integers(0, 256, size=(n_train, 32, 32, 3), dtype=np.uint8)
    train_y = np.arange(n_train) % 10
    test_x = rng.integers(0, 256, size=(n_test, 32, 32, 3), dtype=np.uint8)
    test_y = (np.arange(n_test) * 3) % 10
    for b in range(5):
        part = slice(b * per_batch, (b + 1) * per_batch)
        batch = {"batch_label": f"training batch {b + 1} of 5", "data": _rows(train_x[part])}
        batch["labels"] = [int(v) for v in train_y[part]]
        _dump(folder / f"data_batch_{b + 1}", batch, bytes_keys=bytes_keys)
    test = {"batch_label": "testing batch 1 of 1", "data": _rows(test_x)}
    test["labels"] = [int(v) for v in test_y]
    _dump(folder / "test_batch", test, bytes_keys=bytes_keys)
    names = [n.encode() for n in CIFAR10_RAW] if bytes_keys else list(CIFAR10_RAW)
    meta = {"label_names": names, "num_cases_per_batch": per_batch, "num_vis": 3072}
    _dump(folder / "batches.meta", meta, bytes_keys=bytes_keys)
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def _write_cifar100(root: Path, *, n_train: int = 40, n_test: int = 20) -> dict[str, np.ndarray]:
    """Write ``root/cifar-100-python`` (train, test, meta) with fine and coarse labels."""
    rng = np.random.default_rng(2)
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
        coarse = np.arange(n) % 20
        fine = (coarse * 5 + np.arange(n) % 5) % 100
        batch = {
            "data": _rows(x),
            "coarse_labels": [int(v) for v in coarse],
            "fine_labels": [int(v) for v in fine],
            "filenames": [f"img{i}.png".encode() for i in range(n)],
        }
        _dump(folder / split, batch, bytes_keys=True)
        out[f"{split}_x"], out[f"{split}_y"] = x, coarse
    meta = {
        "coarse_label_names": [n.encode() for n in CIFAR100_RAW_COARSE],
        "fine_label_names": [f"fine{i}".encode() for i in range(100)],
    }
    _dump(folder / "meta", meta, bytes_keys=True)
    return out


def _idx_bytes(array: np.ndarray) -> bytes:
    """Encode a uint8 array as an IDX file (magic 0x08 type, ndim dims)."""
    header = bytes([0, 0, 0x08, array.ndim])
    header += b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


IDX_NAMES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}


def _write_idx_set(
    folder: Path, *, gz: bool, n_train: int = 20, n_test: int = 10, seed: int = 3
) -> dict[str, np.ndarray]:
    """Write the four MNIST-style IDX files (gzipped or plain) into ``folder``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train_x": rng.integers(1, 256, size=(n_train, 28, 28), dtype=np.uint8),
        "train_y": (np.arange(n_train) % 10).astype(np.uint8),
        "test_x": rng.integers(1, 256, size=(n_test, 28, 28), dtype=np.uint8),
        "test_y": ((np.arange(n_test) * 7) % 10).astype(np.uint8),
    }
    for key, stem in IDX_NAMES.items():
        payload = _idx_bytes(arrays[key])
        if gz:
            (folder / f"{stem}.gz").write_bytes(gzip.compress(payload))
        else:
            (folder / stem).write_bytes(payload)
    return arrays


def _write_png(path: Path, array: np.ndarray) -> None:
    """Save an (H, W, 3) uint8 array as PNG, creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _solid(color: tuple[int, int, int], height: int = 12, width: int = 16) -> np.ndarray:
    """An (H, W, 3) image of one colour."""
    return np.broadcast_to(np.array(color, dtype=np.uint8), (height, width, 3)).copy()


@pytest.fixture
def write_cifar10():
    """Fixture: ``write_cifar10(root, *, per_batch=4, n_test=6, bytes_keys=True)`` -> arrays."""
    return _write_cifar10


@pytest.fixture
def write_cifar100():
    """Fixture: ``write_cifar100(root, *, n_train=40, n_test=20)`` -> expected arrays."""
    return _write_cifar100


@pytest.fixture
def idx_bytes():
    """Fixture: ``idx_bytes(array)`` -> the IDX encoding of a uint8 array."""
    return _idx_bytes


@pytest.fixture
def write_idx_set():
    """Fixture: ``write_idx_set(folder, *, gz, n_train=20, n_test=10, seed=3)`` -> arrays."""
    return _write_idx_set


@pytest.fixture
def write_png():
    """Fixture: ``write_png(path, array)`` saves an (H, W, 3) uint8 array as PNG."""
    return _write_png


@pytest.fixture
def solid():
    """Fixture: ``solid(color, height=12, width=16)`` -> an (H, W, 3) image of one colour."""
    return _solid


PET_COLORS = {"Cat": (40, 90, 200), "Dog": (200, 160, 40)}


def _pet_color(folder: str, index: int) -> tuple[int, int, int]:
    """Solid colour of pet image ``index``: red = 20 * index + 10 identifies the file."""
    _, green, blue = PET_COLORS[folder]
    return (20 * index + 10, green, blue)


def _write_pet_images(
    root: Path, *, n_cat: int = 7, n_dog: int = 6, broken: bool = True
) -> dict[str, list[str]]:
    """Write ``root/PetImages/{Cat,Dog}/<i>.jpg``: solid JPEGs of random sizes.

    Image ``i`` of a class has the colour :func:`_pet_color` and a random size between
    40 and 119 pixels a side (so some are upsampled). With ``broken``, ``Cat/666.jpg`` is a
    zero-byte file, ``Dog/corrupt.jpg`` a truncated JPEG (both unreadable) and ``Cat`` also
    holds a ``Thumbs.db`` (not an image), as in the Microsoft download.

    Returns the readable file names of each class folder in sorted order.
    """
    rng = np.random.default_rng(4)
    readable = {}
    for folder, n in (("Cat", n_cat), ("Dog", n_dog)):
        path = root / "PetImages" / folder
        path.mkdir(parents=True)
        for i in range(n):
            height, width = rng.integers(40, 120, size=2)
            Image.fromarray(_solid(_pet_color(folder, i), int(height), int(width))).save(
                path / f"{i}.jpg", quality=95
            )
        readable[folder] = sorted(f"{i}.jpg" for i in range(n))
    if broken:
        (root / "PetImages" / "Cat" / "666.jpg").write_bytes(b"")
        good = (root / "PetImages" / "Dog" / "0.jpg").read_bytes()
        (root / "PetImages" / "Dog" / "corrupt.jpg").write_bytes(good[: len(good) // 3])
        (root / "PetImages" / "Cat" / "Thumbs.db").write_bytes(b"\x00" * 64)
    return readable


CELEBA_ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose "
    "Black_Hair Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses "
    "Goatee Gray_Hair Heavy_Makeup High_Cheekbones Male Mouth_Slightly_Open Mustache "
    "Narrow_Eyes No_Beard Oval_Face Pale_Skin Pointy_Nose Receding_Hairline Rosy_Cheeks "
    "Sideburns Smiling Straight_Hair Wavy_Hair Wearing_Earrings Wearing_Hat Wearing_Lipstick "
    "Wearing_Necklace Wearing_Necktie Young"
).split()
# The 12 fixture images: partition (0 train, 1 valid, 2 test) and eyeglasses of 000001..000012.
CELEBA_PARTITION = (0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2)
CELEBA_EYEGLASSES = (0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1)


def _celeba_band(index: int) -> np.ndarray:
    """A 218x178 aligned-size image: rows 40..197 grey ``20 * index``, the rest white."""
    image = np.full((218, 178, 3), 255, dtype=np.uint8)
    image[40:198] = 20 * index
    return image


def _write_celeba(root: Path, *, flat: bool = False) -> Path:
    """Write the 12-image CelebA tree in torchvision's layout (``root/celeba/``) or flat.

    Image ``000<i>.jpg`` (i = 1..12) is :func:`_celeba_band` of ``i``, partition and
    eyeglasses from ``CELEBA_PARTITION`` and ``CELEBA_EYEGLASSES``; the text files follow
    the official formatting. Returns the folder holding the files.
    """
    folder = root if flat else root / "celeba"
    images = folder / "img_align_celeba"
    images.mkdir(parents=True)
    rng = np.random.default_rng(5)
    eyeglasses = CELEBA_ATTRIBUTES.index("Eyeglasses")
    attr_lines = [str(len(CELEBA_PARTITION)), " ".join(CELEBA_ATTRIBUTES) + " "]
    partition_lines = []
    pairs = zip(CELEBA_PARTITION, CELEBA_EYEGLASSES, strict=True)
    for i, (part, glasses) in enumerate(pairs, start=1):
        name = f"{i:06d}.jpg"
        Image.fromarray(_celeba_band(i)).save(images / name, quality=100, subsampling=0)
        values = rng.choice([-1, 1], size=len(CELEBA_ATTRIBUTES))
        values[eyeglasses] = 1 if glasses else -1
        attr_lines.append(f"{name} " + " ".join(f"{v:2d}" for v in values))
        partition_lines.append(f"{name} {part}")
    (folder / "list_attr_celeba.txt").write_text("\n".join(attr_lines) + "\n")
    (folder / "list_eval_partition.txt").write_text("\n".join(partition_lines) + "\n")
    return folder


@pytest.fixture
def write_pet_images():
    """Fixture: ``write_pet_images(root, *, n_cat=7, n_dog=6, broken=True)`` -> file names."""
    return _write_pet_images


@pytest.fixture
def pet_color():
    """Fixture: ``pet_color(folder, index)`` -> the solid colour of a fixture pet image."""
    return _pet_color


@pytest.fixture
def write_celeba():
    """Fixture: ``write_celeba(root, *, flat=False)`` -> the folder holding the CelebA files."""
    return _write_celeba
