"""Representations: modules mapping images in [0, 1] to the feature ``f`` (and ``g(f)``).

Every representation, frozen or trained, is a :class:`Representation`, so embedding,
detectors and the DAG never need to know how the features were learned.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from pipeline_lib.models.imagenet import ImageNetInput
from pipeline_lib.models.resnet import resnet18_small
from pipeline_lib.registry import FROZEN_METHODS as FROZEN_METHODS  # re-exported
from pipeline_lib.registry import METHODS as METHODS  # re-exported
from pipeline_lib.registry import TRAINED_METHODS as TRAINED_METHODS  # re-exported

#: Environment variable through which the workflow hands the ImageNet weights file to jobs
#: (set by :func:`pipeline_lib.config.validate.export_data_settings` from
#: ``embed.imagenet_weights``).
IMAGENET_WEIGHTS_ENV = "DROC_IMAGENET_WEIGHTS"

#: Where torchvision publishes the weights ``resnet50_imagenet`` expects
#: (``torchvision.models.ResNet50_Weights.IMAGENET1K_V1``).
IMAGENET_WEIGHTS_URL = "https://download.pytorch.org/models/resnet50-0676ba61.pth"


class Representation(nn.Module):
    """A backbone ``f`` with an optional projection head ``g``.

    Parameters
    ----------
    backbone : nn.Module
        Maps ``(n, 3, h, w)`` images in [0, 1] to features of shape ``(n, d)``.
    head : nn.Module or None, default=None
        Maps ``f`` to ``g(f)``; ``None`` when the representation has no head.
    """

    def __init__(self, backbone: nn.Module, head: nn.Module | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        f = self.backbone(x)
        out = {"f": f}
        if self.head is not None:
            out["g"] = self.head(f)
        return out


def imagenet_weights_from_env() -> str | None:
    """The ImageNet weights path the workflow exported (``$DROC_IMAGENET_WEIGHTS``), or None.

    An unset or empty variable gives ``None``; :func:`build_representation` then names the
    config key to set.
    """
    return os.environ.get(IMAGENET_WEIGHTS_ENV) or None


def _load_imagenet_state_dict(path: str | os.PathLike | None) -> dict[str, torch.Tensor]:
    if path is None or not Path(path).is_file():
        where = "is not set" if path is None else f"names no file ({Path(path).resolve()})"
        raise ValueError(
            f"resnet50_imagenet needs a local ImageNet weights file, but the path {where}: "
            "set the config key 'embed.imagenet_weights' to torchvision's ResNet-50 "
            f"IMAGENET1K_V1 state dict, downloaded from {IMAGENET_WEIGHTS_URL}"
        )
    try:
        # weights_only: a weights file is data and must not run code when loaded.
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a damaged file raises many types
        raise ValueError(
            f"could not load ImageNet weights file {path} ({type(error).__name__}: {error}); "
            f"expected torchvision's ResNet-50 state dict ({IMAGENET_WEIGHTS_URL})"
        ) from error
    if isinstance(loaded, Mapping) and isinstance(loaded.get("state_dict"), Mapping):
        loaded = loaded["state_dict"]
    if not isinstance(loaded, Mapping) or not all(
        isinstance(value, torch.Tensor) for value in loaded.values()
    ):
        raise ValueError(
            f"ImageNet weights file {path} holds a {type(loaded).__name__}, not a state dict "
            "(a mapping of parameter names to tensors)"
        )
    # The classifier is replaced by the identity: its weights are not needed.
    return {name: value for name, value in loaded.items() if not name.startswith("fc.")}


def _describe_mismatch(
    state_dict: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor]
) -> str:
    """Missing, unexpected and wrongly shaped entries, a few of each ("" if they fit)."""

    def few(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f", ... ({len(names)} in all)" if len(names) > 3 else "")

    # Old checkpoints lack BatchNorm's num_batches_tracked; loading fills it in.
    missing = [k for k in expected if k not in state_dict and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state_dict if k not in expected]
    shapes = [
        f"{k} {tuple(v.shape)} (expected {tuple(expected[k].shape)})"
        for k, v in state_dict.items()
        if k in expected and v.shape != expected[k].shape
    ]
    problems = [
        f"{label}: {few(names)}"
        for label, names in (("missing", missing), ("unexpected", unexpected), ("shape", shapes))
        if names
    ]
    return "; ".join(problems)


def _resnet50_imagenet(weights: str | os.PathLike | None, size: int) -> nn.Module:
    # Imported here: torchvision pulls in torch._dynamo (~1.7 s), a cost every training and
    # embedding job would otherwise pay at start-up for a model only this method uses.
    import torchvision

    state_dict = _load_imagenet_state_dict(weights)
    network = torchvision.models.resnet50(weights=None)
    network.fc = nn.Identity()  # f = the 2048-d globally pooled feature
    mismatch = _describe_mismatch(state_dict, network.state_dict())
    if mismatch:
        raise ValueError(
            f"ImageNet weights file {weights} does not fit torchvision's ResNet-50 ({mismatch})"
        )
    network.load_state_dict(state_dict, strict=True)
    return ImageNetInput(network, size=size)


def build_representation(
    method: str,
    *,
    seed: int,
    width: int = 64,
    imagenet_weights: str | os.PathLike | None = None,
    imagenet_size: int = 224,
    init: str = "released",
) -> Representation:
    """Build a frozen representation, deterministically for a given ``seed``.

    Parameters
    ----------
    method : str
        One of :data:`FROZEN_METHODS`.
    seed : int
        Seeds the random initialisation (``resnet18_random``); ``raw`` and
        ``resnet50_imagenet`` do not depend on it.
    width : int, default=64
        First-stage width of the ResNet-18 (64 in the paper); ignored by the others.
    imagenet_weights : str or PathLike or None, default=None
        ``resnet50_imagenet`` only: local file with torchvision's ResNet-50 ImageNet weights
        (``resnet50-*.pth``, a plain state dict, or a dict with a ``"state_dict"`` entry;
        ``fc.*`` entries are ignored). Nothing is ever downloaded.
    imagenet_size : int, default=224
        ``resnet50_imagenet`` only: images are resized (bilinear) to this side and
        normalised with the ImageNet mean / std inside the model.
    init : {"released", "torch"}, default="released"
        ``resnet18_random`` only: the released code's initialisers (the paper's random row
        is the released network before training) or torchvision's ResNet rule
        (:mod:`pipeline_lib.models.init`).

    Returns
    -------
    Representation
        In inference mode (BatchNorm uses its running statistics). ``f`` has shape
        ``(n, 3 * h * w)`` (``raw``), ``(n, 8 * width)`` (``resnet18_random``) or
        ``(n, 2048)`` (``resnet50_imagenet``: the pooled feature before the classifier).

    Raises
    ------
    ValueError
        If ``method`` is not a frozen representation; for ``resnet50_imagenet``, if
        ``imagenet_weights`` is None or names no file (the message names the config key
        ``embed.imagenet_weights``), if the file cannot be loaded or does not fit
        ResNet-50 (the message names the file), or if ``imagenet_size`` < 32.
    """
    if method == "raw":
        model = Representation(nn.Flatten())
    elif method == "resnet18_random":
        # Seed only the CPU generator the weights are drawn from, and leave the caller's
        # random state (CPU and CUDA) as it was.
        with torch.random.fork_rng(devices=[]):
            torch.random.default_generator.manual_seed(seed)
            model = Representation(resnet18_small(width=width, init=init))
    elif method == "resnet50_imagenet":
        if imagenet_size < 32:
            raise ValueError(f"imagenet_size must be >= 32, got {imagenet_size}")
        # Every weight comes from the file, so the seed plays no part; building the
        # torchvision module still draws its (overwritten) initial weights, hence fork_rng.
        with torch.random.fork_rng(devices=[]):
            model = Representation(_resnet50_imagenet(imagenet_weights, imagenet_size))
    else:
        raise ValueError(
            f"unknown frozen representation {method!r}; allowed: {', '.join(FROZEN_METHODS)}"
        )
    return model.eval()
