"""Batched feature extraction: images in, ``f`` (and ``g(f)``) out."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from pipeline_lib.data import ImageDataset
from pipeline_lib.models.representation import (
    Representation,
    build_representation,
    imagenet_weights_from_env,
)


def images_to_tensor(images: np.ndarray, device: torch.device) -> torch.Tensor:
    """uint8 ``(n, h, w, c)`` -> float ``(n, c, h, w)`` in [0, 1] on ``device``.

    Inputs are scaled to [0, 1] without mean/std normalisation, as in the released code.
    """
    batch = torch.from_numpy(np.ascontiguousarray(images)).to(device, non_blocking=True)
    return batch.permute(0, 3, 1, 2).float().div_(255.0)


def extract_embeddings(
    model: Representation,
    images: np.ndarray,
    *,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Embed ``images`` with ``model`` in inference mode.

    Parameters
    ----------
    model : Representation
    images : ndarray of shape (n, h, w, 3), dtype uint8
    batch_size : int, default=256
    device : torch.device or str, default="cpu"
    progress : bool, default=False
        Show a progress bar (the workflow enables it outside CI).

    Returns
    -------
    dict of str to ndarray
        ``"f"`` of shape ``(n, d)`` float32, and ``"g"`` when the model has a head.

    Raises
    ------
    ValueError
        If ``images`` is empty or not a uint8 array of shape (n, h, w, 3).
    """
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(
            f"images must be uint8 of shape (n, h, w, 3), got {images.dtype} {images.shape}"
        )
    if len(images) == 0:
        raise ValueError("no images to embed")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = torch.device(device)
    model = model.to(device).eval()
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    chunks: dict[str, list[np.ndarray]] = {}
    starts = range(0, len(images), batch_size)
    with torch.inference_mode():
        for start in tqdm(starts, desc="embed", unit="batch", disable=not progress):
            batch = images_to_tensor(images[start : start + batch_size], device)
            if device.type == "cuda":
                batch = batch.contiguous(memory_format=torch.channels_last)
            for name, value in model(batch).items():
                chunks.setdefault(name, []).append(value.float().cpu().numpy())
    return {name: np.concatenate(parts) for name, parts in chunks.items()}


def _feature_file(
    model: Representation,
    train_index: np.ndarray,
    train_images: np.ndarray,
    test_images: np.ndarray,
    **options: Any,
) -> dict[str, np.ndarray]:
    """The feature-file layout of ``train_images`` (at ``train_index``) and ``test_images``.

    ``options`` go to :func:`extract_embeddings`.
    """
    features: dict[str, np.ndarray] = {
        "train_index": train_index,
        "test_index": np.arange(len(test_images), dtype=np.int64),
    }
    for part, images in (("train", train_images), ("test", test_images)):
        for space, values in extract_embeddings(model, images, **options).items():
            features[f"{space}_{part}"] = values
    return features


def embed_dataset(
    model: Representation, dataset: ImageDataset, **options: Any
) -> dict[str, np.ndarray]:
    """Embed both splits of a data set into the feature-file layout of docs/architecture.md.

    ``options`` (``batch_size``, ``device``, ``progress``) are those of
    :func:`extract_embeddings`, with its defaults. The result has ``train_index``,
    ``f_train``, ``test_index``, ``f_test`` (and ``g_train``, ``g_test`` when the model has
    a head); indices are positions in the data set's own train / test splits.
    """
    train_index = np.arange(len(dataset.train_images), dtype=np.int64)
    return _feature_file(model, train_index, dataset.train_images, dataset.test_images, **options)


def embed_split(
    model: Representation,
    dataset: ImageDataset,
    train_index: np.ndarray,
    **options: Any,
) -> dict[str, np.ndarray]:
    """Embed the given training images and the whole test split (feature-file layout).

    A model trained for one class only needs the images its detectors are fitted on (the
    split's training set and clean subsets) and the test split. ``options`` are those of
    :func:`extract_embeddings`, as in :func:`embed_dataset`.
    """
    train_index = np.unique(np.asarray(train_index, dtype=np.int64))
    return _feature_file(
        model,
        train_index,
        dataset.train_images[train_index],
        dataset.test_images,
        **options,
    )


def embed_frozen(
    method: str,
    dataset: ImageDataset,
    *,
    seed: int,
    width: int,
    batch_size: int,
    device: torch.device | str,
    imagenet_size: int | None = None,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Build a frozen representation and embed a whole data set with it.

    The workflow's ``embed_frozen_dataset`` job in one call. The weights path of
    ``resnet50_imagenet`` is environment-like (``$DROC_IMAGENET_WEIGHTS``, exported from the
    config by :func:`pipeline_lib.config.validate.export_data_settings`), and the input side is
    passed only when set, so the other frozen methods keep their own defaults.

    Parameters
    ----------
    method : str
        A frozen method id (``resnet18_random``, ``raw``, ``resnet50_imagenet``, ...).
    dataset : ImageDataset
    seed : int
        Seed of random weights.
    width : int
    batch_size : int
    device : torch.device or str
    imagenet_size : int or None, default=None
        Input side of ``resnet50_imagenet`` (``embed.imagenet_size``); None for the others.
    progress : bool, default=False

    Returns
    -------
    dict of str to ndarray
        The layout of :func:`embed_dataset`.
    """
    imagenet: dict[str, object] = {"imagenet_weights": imagenet_weights_from_env()}
    if imagenet_size is not None:
        imagenet["imagenet_size"] = imagenet_size
    model = build_representation(method, seed=seed, width=width, **imagenet)
    return embed_dataset(model, dataset, batch_size=batch_size, device=device, progress=progress)
