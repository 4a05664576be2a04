"""Trace the released data preparation on small source sets in the standard layouts.

Each part writes its source files into a scratch folder, runs the released reader on them and
records the sources (so the comparison can write the same files for our readers) and what
the released code made of them:

- **CIFAR-10**: ``data/cifar.py`` (``CIFAR``, ``CIFAROOD``) on pickles holding the first
  ``CIFAR_ROWS`` rows of each batch of the real data set (``$DROC_DATA_ROOT`` or
  ``/work/data``, ``cifar-10-batches-py``);
- **Fashion-MNIST**: ``data/fmnist.py`` (``FashionMNISTOOD``: pad 28 -> 32, three channels)
  on IDX files holding the first images of the real ones, read through the IDX adapter of
  ``released.py``;
- **Cat-vs-Dog**: ``script/prepare_dogvscat.py`` (sorted ``.jpg`` list, labels by name,
  ``cv2.imread`` + ``INTER_AREA`` resize of the shorter side to 64, centre crop) on a few
  synthetic JPEGs of the Kaggle layout, sizes chosen to reach each of OpenCV's paths (integer
  and fractional shrink, enlargement, an EXIF rotation, a grey JPEG); then
  ``data/dogvscat.py``'s seed-0 split, on those images and on the 25,000 instance ids of the
  real set's file list (12,500 cats, then 12,500 dogs);
- **CelebA**: ``script/prepare_celeba.py`` (crop ``[40:-20, 10:-10]``, PIL ``resize`` with its
  default filter, attributes as an array) through ``data/celeba.py`` (the adapter of
  ``released.py`` makes the script's function the class's method) on synthetic aligned
  218x178 JPEGs with attribute and partition files; and the order in which the script lays
  out the attribute columns (it enumerates a ``frozenset``), in this process and under
  ``CELEBA_HASH_SEEDS`` values of ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import gzip
import io
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from trace_io import released_meta, write_trace

CIFAR_ROWS = 2  # per batch file: 10 training and 2 test images
FMNIST_TRAIN, FMNIST_TEST = 8, 4
#: Kaggle-layout fixture: file name -> (width, height, mode, EXIF orientation or 0).
CATVSDOG_FILES = {
    "cat.0.jpg": (250, 187, "RGB", 0),  # shrink by 2.92: fractional area weights
    "cat.1.jpg": (187, 250, "RGB", 0),  # portrait
    "cat.10.jpg": (128, 128, "RGB", 0),  # square, shrink by exactly 2 (OpenCV's fast path)
    "cat.2.jpg": (60, 45, "RGB", 0),  # enlarged: OpenCV's bilinear emulation of INTER_AREA
    "dog.0.jpg": (320, 240, "RGB", 0),  # shrink by 3.75
    "dog.1.jpg": (192, 128, "RGB", 0),  # shrink by exactly 2 on both axes
    "dog.2.jpg": (150, 100, "RGB", 6),  # EXIF: rotate 90 degrees when read
    "dog.3.jpg": (97, 130, "L", 0),  # a grey JPEG, odd width
}
KAGGLE_CATS = KAGGLE_DOGS = 12500
#: CelebA fixture: image -> partition (0 train, 1 validation, 2 test).
CELEBA_PARTITION = {
    "000001.jpg": 0,
    "000002.jpg": 0,
    "000003.jpg": 0,
    "000004.jpg": 1,
    "000005.jpg": 2,
    "000006.jpg": 2,
    "000007.jpg": 2,
}
CELEBA_EYEGLASSES = ("000002.jpg", "000005.jpg")
CELEBA_HASH_SEEDS = 200
FIXTURE_SEED = 2021


def _data_root() -> Path:
    root = Path(os.environ.get("DROC_DATA_ROOT", "/work/data"))
    if not (root / "cifar-10-batches-py").is_dir():
        raise SystemExit(
            f"{root}/cifar-10-batches-py not found: set DROC_DATA_ROOT to the data root that "
            "holds CIFAR-10 (python pickles) and Fashion-MNIST (fashion-mnist/ or "
            "FashionMNIST/raw/, or Debian's /usr/share/datasets/fashion-mnist)"
        )
    return root


def _cifar(released: Any, scratch: Path, root: Path) -> dict[str, np.ndarray]:
    """The released CIFAR-10 reader on pickles of the first rows of each real batch."""
    folder = scratch / "cifar-10-batches-py"
    folder.mkdir()
    rows, labels = [], []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        with (root / "cifar-10-batches-py" / name).open("rb") as handle:
            # The official pickles, read by the harness only (the real data root).
            batch = pickle.load(handle, encoding="bytes")  # noqa: S301
        part = {
            b"data": batch[b"data"][:CIFAR_ROWS],
            b"labels": list(batch[b"labels"][:CIFAR_ROWS]),
        }
        (folder / name).write_bytes(pickle.dumps(part, protocol=2))
        rows.append(part[b"data"])
        labels.append(part[b"labels"])
    cifar = released.module("data.cifar")
    plain = cifar.CIFAR(root=str(folder), dataset="cifar10")
    category = int(labels[0][0])
    ood = cifar.CIFAROOD(root=str(folder), dataset="cifar10ood", category=category)
    return {
        "cifar/source_rows": np.concatenate(rows),
        "cifar/source_labels": np.concatenate(labels).astype(np.int64),
        "cifar/x_train": plain.trainval_data[0],
        "cifar/y_train": plain.trainval_data[1].ravel().astype(np.int64),
        "cifar/x_test": plain.test_data[0],
        "cifar/y_test": plain.test_data[1].ravel().astype(np.int64),
        "cifar/ood_category": np.array(category),
        "cifar/ood_x_train": ood.trainval_data[0],
        "cifar/ood_y_test": ood.test_data[1].ravel().astype(np.int64),
    }


def _fmnist_folder(root: Path) -> Path:
    for folder in (
        root / "FashionMNIST" / "raw",
        root / "fashion-mnist",
        Path("/usr/share/datasets/fashion-mnist"),
    ):
        if (folder / "train-images-idx3-ubyte.gz").is_file() or (
            folder / "train-images-idx3-ubyte"
        ).is_file():
            return folder
    raise SystemExit(f"Fashion-MNIST IDX files not found under {root}")


def _idx(raw: bytes, count: int, header: int, item: int) -> bytes:
    """The header (count patched) and the first ``count`` items of an IDX file."""
    return raw[:4] + count.to_bytes(4, "big") + raw[8:header] + raw[header : header + count * item]


def _fmnist(released: Any, scratch: Path, root: Path) -> dict[str, np.ndarray]:
    """The released Fashion-MNIST reader on IDX files of the first real images."""
    from released import adapt_fashion_mnist

    source = _fmnist_folder(root)
    folder = scratch / "fmnist"
    folder.mkdir()
    arrays = {}
    for split, prefix, count in (("train", "train", FMNIST_TRAIN), ("test", "t10k", FMNIST_TEST)):
        for kind, header, item in (("images", 16, 784), ("labels", 8, 1)):
            stem = f"{prefix}-{kind}-idx{3 if kind == 'images' else 1}-ubyte"
            path = source / stem
            raw = (
                path.read_bytes()
                if path.is_file()
                else gzip.decompress((source / f"{stem}.gz").read_bytes())
            )
            part = _idx(raw, count, header, item)
            (folder / f"{stem}.gz").write_bytes(gzip.compress(part, mtime=0))
            arrays[f"fmnist/source_{split}_{kind}"] = np.frombuffer(part[header:], np.uint8).copy()
    adapt_fashion_mnist(released)
    fmnist = released.module("data.fmnist")
    plain = fmnist.FashionMNIST(root=str(folder))
    arrays.update(
        {
            "fmnist/x_train": plain.trainval_data[0],
            "fmnist/y_train": plain.trainval_data[1].ravel().astype(np.int64),
            "fmnist/x_test": plain.test_data[0],
            "fmnist/y_test": plain.test_data[1].ravel().astype(np.int64),
        }
    )
    return arrays


def _photo(rng: np.random.Generator, width: int, height: int) -> Any:
    """A smooth random colour field with a few hard edges, as a PIL image."""
    from PIL import Image, ImageDraw

    coarse = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(3):
        x0, y0 = int(rng.integers(0, width - 4)), int(rng.integers(0, height - 4))
        x1, y1 = x0 + int(rng.integers(3, width // 2)), y0 + int(rng.integers(3, height // 2))
        draw.ellipse((x0, y0, x1, y1), fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    return image


def _jpeg(image: Any, orientation: int = 0) -> bytes:
    out = io.BytesIO()
    if orientation:
        exif = image.getexif()
        exif[0x0112] = orientation
        image.save(out, "JPEG", quality=80, exif=exif)
    else:
        image.save(out, "JPEG", quality=80)
    return out.getvalue()


def _files_array(files: dict[str, bytes]) -> tuple[np.ndarray, np.ndarray]:
    """File contents as one uint8 array plus their end offsets (the names go in the JSON)."""
    blobs = list(files.values())
    return np.frombuffer(b"".join(blobs), np.uint8).copy(), np.cumsum([len(b) for b in blobs])


def _catvsdog(released: Any, scratch: Path) -> tuple[dict[str, np.ndarray], list[str]]:
    """The released Cat-vs-Dog preparation and split on the synthetic Kaggle fixture, and the
    released file list (names in order)."""
    rng = np.random.default_rng(FIXTURE_SEED)
    train = scratch / "dogs-vs-cats" / "train"
    train.mkdir(parents=True)
    files = {}
    for name, (width, height, mode, orientation) in CATVSDOG_FILES.items():
        files[name] = _jpeg(_photo(rng, width, height).convert(mode), orientation)
        (train / name).write_bytes(files[name])
    from released import script_module

    prepare = script_module(released, "prepare_dogvscat", scratch)
    prepare.generate_flist("train")
    listed = [
        line.split() for line in (scratch / "dogs-vs-cats" / "train.txt").read_text().splitlines()
    ]
    images = np.stack(
        [prepare.resize_and_crop_image(str(scratch / "dogs-vs-cats" / f), 64) for f, _ in listed]
    )
    labels = np.array([[int(label)] for _, label in listed])
    # data/dogvscat.py on the prepared arrays' row numbers (so the trace holds the split as
    # row ids, not a second copy of the images): once for the fixture, once for the real
    # set's 25,000 files (12,500 cats, then 12,500 dogs in the released file list).
    split = _released_split(released, scratch / "fixture", labels)
    id_labels = np.repeat([0, 1], [KAGGLE_CATS, KAGGLE_DOGS])[:, None]
    full = _released_split(released, scratch / "ids", id_labels)
    contents, ends = _files_array(files)
    return {
        "catvsdog/files": contents,
        "catvsdog/file_ends": ends,
        "catvsdog/listed_labels": labels.ravel().astype(np.int64),
        "catvsdog/prepared": images,
        "catvsdog/train_rows": split.trainval_data[0].ravel().astype(np.int16),
        "catvsdog/y_train": split.trainval_data[1].ravel().astype(np.int64),
        "catvsdog/kaggle_train_ids": full.trainval_data[0].ravel().astype(np.int16),
        "catvsdog/kaggle_test_ids": full.test_data[0].ravel().astype(np.int16),
    }, [name for name, _ in listed]


def _released_split(released: Any, root: Path, labels: np.ndarray) -> Any:
    """``data/dogvscat.py``'s ``DogVsCat`` on an npz whose images are the row numbers."""
    (root / "dogs-vs-cats").mkdir(parents=True)
    rows = np.arange(len(labels), dtype=np.int32)[:, None]
    np.savez(root / "dogs-vs-cats" / "train_64x64.npz", image=rows, label=labels)
    return released.module("data.dogvscat").DogVsCat(root=str(root))


def _celeba_sources(
    rng: np.random.Generator, names: list[str]
) -> tuple[dict[str, bytes], str, str]:
    files = {name: _jpeg(_photo(rng, 178, 218)) for name in CELEBA_PARTITION}
    values = rng.choice(np.array([-1, 1]), (len(CELEBA_PARTITION), len(names)))
    eyeglasses = names.index("Eyeglasses")
    values[:, eyeglasses] = [1 if n in CELEBA_EYEGLASSES else -1 for n in CELEBA_PARTITION]
    rows = [
        f"{n} " + " ".join(f"{v:2d}" for v in row)
        for n, row in zip(CELEBA_PARTITION, values, strict=True)
    ]
    attributes = "\n".join([str(len(CELEBA_PARTITION)), " ".join(names), *rows]) + "\n"
    partition = "".join(f"{n} {p}\n" for n, p in CELEBA_PARTITION.items())
    return files, attributes, partition


def _hash_seed_orders(script: Path, seeds: int) -> list[list[str]]:
    """``list(ATTR_KEYS)`` of ``script/prepare_celeba.py`` under PYTHONHASHSEED = 0..seeds-1.

    Each child parses the script's ``ATTR_KEYS = frozenset([...])`` literal and builds the
    same frozenset, which is all ``convert_dict_to_array`` iterates (no TensorFlow needed).
    """
    code = (
        "import ast, sys\n"
        "tree = ast.parse(open(sys.argv[1]).read())\n"
        "node = next(n for n in tree.body if isinstance(n, ast.Assign) and "
        "getattr(n.targets[0], 'id', '') == 'ATTR_KEYS')\n"
        "print(' '.join(frozenset(ast.literal_eval(node.value.args[0]))))\n"
    )
    orders = []
    for seed in range(seeds):
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        # A fixed interpreter and program on the released checkout's own script.
        out = subprocess.run(  # noqa: S603
            [sys.executable, "-c", code, str(script)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        orders.append(out.stdout.split())
    return orders


def _celeba(released: Any, scratch: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The released CelebA preparation on the synthetic aligned fixture."""
    from released import adapt_celeba

    celeba = released.module("data.celeba")
    names = _attr_keys(celeba)
    rng = np.random.default_rng(FIXTURE_SEED + 1)
    files, attributes, partition = _celeba_sources(rng, names)
    folder = scratch / "celeba"
    (folder / "img_align_celeba").mkdir(parents=True)
    for name, blob in files.items():
        (folder / "img_align_celeba" / name).write_bytes(blob)
    (folder / "list_attr_celeba.txt").write_text(attributes)
    (folder / "list_eval_partition.txt").write_text(partition)
    script = adapt_celeba(released, folder, scratch)
    loader = celeba.CelebA(root=str(scratch), category="Eyeglasses", input_shape=(64, 64, 3))
    # The same preparation with the JPEGs decoded by libjpeg's accurate inverse DCT (as PIL
    # decodes them) instead of TF's default fast one: isolates the crop and resize.
    (scratch / "accurate").mkdir()
    adapt_celeba(released, folder, scratch / "accurate", dct_method="INTEGER_ACCURATE")
    accurate = celeba.CelebA(
        root=str(scratch / "accurate"), category="Eyeglasses", input_shape=(64, 64, 3)
    )
    column_order = list(script.ATTR_KEYS)
    orders = _hash_seed_orders(released.root / "script" / "prepare_celeba.py", CELEBA_HASH_SEEDS)
    at_eyeglasses = [order[names.index("Eyeglasses")] for order in orders]
    contents, ends = _files_array(files)
    arrays = {
        "celeba/files": contents,
        "celeba/file_ends": ends,
        "celeba/train_all": loader.db_train[0],
        "celeba/attr_train": loader.db_train[1].astype(np.int8),
        "celeba/test_all": loader.db_test[0],
        "celeba/train_all_accurate_idct": accurate.db_train[0],
        "celeba/test_all_accurate_idct": accurate.db_test[0],
        "celeba/attr_test": loader.db_test[1].astype(np.int8),
        "celeba/x_train_rows": _rows_of(loader.trainval_data[0], loader.db_train[0]),
        "celeba/y_test": loader.test_data[1].astype(np.int64),
        "celeba/hash_seed_is_eyeglasses": np.array([a == "Eyeglasses" for a in at_eyeglasses]),
    }
    meta = {
        "celeba_files": list(files),
        "celeba_attributes": attributes,
        "celeba_partition": partition,
        "celeba_attribute_names": names,
        "celeba_column_order": column_order,
        "celeba_column_read_as_eyeglasses": column_order[names.index("Eyeglasses")],
        "celeba_hash_seeds": CELEBA_HASH_SEEDS,
    }
    return arrays, meta


def _rows_of(images: np.ndarray, among: np.ndarray) -> np.ndarray:
    """For each image, the row of ``among`` that equals it."""
    return np.array(
        [next(i for i, row in enumerate(among) if np.array_equal(row, image)) for image in images]
    )


def _attr_keys(celeba: Any) -> list[str]:
    """``CelebA.attr_keys``: the attribute names in the order ``data/celeba.py`` indexes them."""
    stand_in = object.__new__(celeba.CelebA)
    try:
        celeba.CelebA.__init__(stand_in, root="", category="Eyeglasses")
    except AttributeError:  # prepare_numpy_data, before the adapter: attr_keys is set by then
        pass
    return list(stand_in.attr_keys)


def trace(released: Any, out: Path) -> list[Path]:
    root = _data_root()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        arrays = {**_cifar(released, scratch, root), **_fmnist(released, scratch, root)}
        dogs, listed = _catvsdog(released, scratch)
        celeba, celeba_meta = _celeba(released, scratch)
    arrays.update(dogs)
    arrays.update(celeba)
    meta = released_meta(
        released,
        family="data",
        what="the released data preparation on small source sets (trace_data.py)",
        cifar_rows_per_batch=CIFAR_ROWS,
        fmnist_counts=[FMNIST_TRAIN, FMNIST_TEST],
        catvsdog_files=list(CATVSDOG_FILES),
        catvsdog_listed=listed,
        catvsdog_kaggle_counts=[KAGGLE_CATS, KAGGLE_DOGS],
        fixture_seed=FIXTURE_SEED,
        **celeba_meta,
    )
    return [write_trace(out, "data", arrays, meta)]
