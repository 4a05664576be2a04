"""``representation.pt`` of a package: the network's spec, bounded, and its weights.

Read with ``weights_only`` after its archive's size and its spec are checked: the spec
decides what is allocated before any weight is read, so a package cannot ask for a network
larger than :data:`ARCH_BOUNDS`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline_lib.deploy.detector_state import check_archive
from pipeline_lib.deploy.errors import REDEPLOY, PackageError
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.models.representation import build_representation
from pipeline_lib.registry import DENOISING_DECODERS, DENOISING_TARGETS, TRAINED_METHODS
from pipeline_lib.runtime.io import atomic_path

REPRESENTATION_FORMAT = "droc-deploy-representation/1"
#: Most members of ``representation.pt`` (one per tensor storage; a ResNet-18 has ~120).
MAX_REPRESENTATION_MEMBERS = 4096
#: Inclusive bounds of the integers of a representation spec: a package cannot ask for a
#: network larger than these (the paper's: width 64, head 8 x 512, projection 128, 32 px).
ARCH_BOUNDS: dict[str, tuple[int, int]] = {
    "width": (1, 1024),
    "stem_width": (1, 1024),
    "head_depth": (0, 16),
    "head_hidden": (1, 4096),
    "proj_dim": (1, 4096),
    "image_size": (1, 1024),
    "seed": (0, 2**63 - 1),
}
#: Frozen methods a package can rebuild from its own file (resnet50_imagenet needs an
#: outside weights file at build time and is not packaged).
PACKABLE_FROZEN = ("raw", "resnet18_random")


def representation_spec(method: str, *, seed: int, width: int, arch: dict | None) -> dict:
    """What rebuilds the network before its state dict is loaded (stored in the package)."""
    if method in TRAINED_METHODS:
        return {"kind": "trained", "method": method, "arch": dict(arch or {})}
    if method in PACKABLE_FROZEN:
        return {"kind": "frozen", "method": method, "seed": int(seed), "width": int(width)}
    raise PackageError(
        f"method {method!r} cannot be packaged; allowed: {', '.join(PACKABLE_FROZEN)} and the "
        f"trained methods {', '.join(TRAINED_METHODS)} (resnet50_imagenet needs its outside "
        "weights file)"
    )


def check_representation_spec(spec: Any, path: Path) -> None:
    """Refuse a representation spec that names unknown keys or an unbounded network.

    The spec decides what :func:`build_proxy_model` / :func:`build_representation` allocate
    before any weight is read, so a hostile package could otherwise ask for a network of any
    size. Known keys only, integers within :data:`ARCH_BOUNDS`, names from the known lists.

    Raises
    ------
    PackageError
        Naming the file, the key and its value.
    """

    def refuse(what: str) -> PackageError:
        return PackageError(f"{path}: {what}; {REDEPLOY}")

    if not isinstance(spec, dict):
        raise refuse("the representation spec is not a dict")
    kind = spec.get("kind")
    if kind == "trained":
        top = {"kind": None, "method": TRAINED_METHODS, "arch": None}
        values = spec.get("arch")
        if not isinstance(values, dict):
            raise refuse("arch must be a dict")
        known: dict[str, Any] = {
            "method": TRAINED_METHODS,
            "denoising_target": DENOISING_TARGETS,
            "denoising_decoder": DENOISING_DECODERS,
            **{
                k: ARCH_BOUNDS[k]
                for k in ("width", "stem_width", "head_depth", "head_hidden", "proj_dim")
            },
            "image_size": ARCH_BOUNDS["image_size"],
        }
        checks = [("", spec, top), ("arch.", values, known)]
    elif kind == "frozen":
        top = {
            "kind": None,
            "method": PACKABLE_FROZEN,
            "seed": ARCH_BOUNDS["seed"],
            "width": ARCH_BOUNDS["width"],
        }
        checks = [("", spec, top)]
    else:
        raise refuse(f"representation kind {kind!r} is not 'trained' or 'frozen'")
    for where, values, rules in checks:
        payload_keys = set() if where else {"format", "state_dict"}
        extra = sorted(set(values) - set(rules) - payload_keys)
        if extra:
            raise refuse(f"unknown representation key(s) {[where + k for k in extra]}")
        if "method" not in values:
            raise refuse(f"{where}method is missing")
        for key, rule in rules.items():
            if rule is None or key not in values:
                continue
            value = values[key]
            if isinstance(rule, tuple) and isinstance(rule[0], int):
                low, high = rule
                is_int = isinstance(value, int) and not isinstance(value, bool)
                if not is_int or not low <= value <= high:
                    raise refuse(f"{where}{key} is {value!r}, not an integer in [{low}, {high}]")
            elif value not in rule:
                raise refuse(f"{where}{key} is {value!r}; allowed: {', '.join(rule)}")


def write_representation(path: Path, representation: nn.Module, spec: dict[str, Any]) -> None:
    """``representation.pt``: the checked spec and the state dict (tensors only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    check_representation_spec(spec, path)
    payload = {
        "format": REPRESENTATION_FORMAT,
        **spec,
        "state_dict": {
            name: value.detach().cpu() for name, value in representation.state_dict().items()
        },
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_representation(path: Path) -> nn.Module:
    """The network of ``representation.pt`` in inference mode, never unpickled.

    Raises
    ------
    PackageError
        If the file is too large, not a representation, of an unbounded spec, or its weights
        do not fit the network the spec describes.
    """
    try:
        check_archive(path, max_members=MAX_REPRESENTATION_MEMBERS)
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except PackageError:
        raise
    except Exception as error:  # torch raises many types for a damaged file
        raise PackageError(
            f"{path} is not a readable representation ({type(error).__name__}: {error}); {REDEPLOY}"
        ) from error
    if not isinstance(payload, dict) or payload.get("format") != REPRESENTATION_FORMAT:
        raise PackageError(f"{path} is not a {REPRESENTATION_FORMAT} file; {REDEPLOY}")
    check_representation_spec(payload, path)
    if not isinstance(payload.get("state_dict"), dict):
        raise PackageError(f"{path} has no state_dict; {REDEPLOY}")
    if payload["kind"] == "trained":
        arch = dict(payload["arch"])
        model: nn.Module = build_proxy_model(arch.pop("method"), **arch)
    else:
        model = build_representation(
            payload["method"], seed=payload["seed"], width=payload["width"]
        )
    try:
        model.load_state_dict(payload["state_dict"])
    except (RuntimeError, TypeError) as error:
        raise PackageError(
            f"{path}: the weights do not fit the network its spec describes ({error}); {REDEPLOY}"
        ) from error
    return model.eval()


def cell_representation(
    method: str, model_path: str | os.PathLike | None, *, seed: int, width: int
) -> tuple[nn.Module, dict[str, Any]]:
    """The cell's network and what rebuilds it (refused before building if not packable)."""
    if method in TRAINED_METHODS:
        if model_path is None:
            raise PackageError(f"trained method {method!r} needs its model.pt")
        model = load_trained_representation(model_path)
        return model, representation_spec(method, seed=seed, width=width, arch=model.arch)
    spec = representation_spec(method, seed=seed, width=width, arch=None)
    return build_representation(method, seed=seed, width=width), spec
