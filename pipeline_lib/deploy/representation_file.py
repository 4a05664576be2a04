"""``representation.pt`` of a package: the network's spec, bounded, and its weights.

Read with ``weights_only``, and only after its archive's size and its spec are checked: a
package can ask neither for a network larger than :data:`ARCH_BOUNDS` nor, within them, for
one larger than the weights it holds (the spec's network is built on the meta device and
compared with the file's tensors first, :func:`load_representation`).
"""

from __future__ import annotations

import contextlib
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline_lib.deploy.bounded_files import (
    PackageFile,
    archive_file_limit,
    open_archive,
    open_package_file,
)
from pipeline_lib.deploy.package_format import REDEPLOY, PackageError
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.proxy import HEAD_BUILDERS, build_proxy_model
from pipeline_lib.models.representation import build_representation
from pipeline_lib.registry import (
    BUILTIN_METHODS,
    DENOISING_DECODERS,
    DENOISING_TARGETS,
    is_trained,
    method_spec,
)
from pipeline_lib.runtime.io import atomic_path

REPRESENTATION_FORMAT = "droc-deploy-representation/1"
#: Most members of ``representation.pt`` (one per tensor storage; a ResNet-18 has ~120).
MAX_REPRESENTATION_MEMBERS = 4096
#: Most tensor bytes ``representation.pt`` may declare (the paper's ResNet-18 with its
#: 8-layer head holds 45 MB).
MAX_REPRESENTATION_BYTES = 4 * 2**30
#: Most bytes of a member that is not tensor data: the pickled structure (``data.pkl``: the
#: spec and the tensors' names, shapes and dtypes; 13 kB for the paper's RotNet), the
#: version and byte-order records.
MAX_PICKLE_BYTES = 2**20
#: A tensor storage of a ``torch.save`` archive: ``<archive>/data/<key>``.
_STORAGE_MEMBER = re.compile(r"^[^/]+/data/[^/]+$")
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
#: The backbone every trained network of the benchmark has (``models.resnet.resnet18_small``).
BACKBONES = ("resnet18_small",)
#: Head kinds a package may record: what rebuilds the network's heads without the method
#: table (a plugin's method needs no code of its package to be scored).
PACKABLE_HEADS = tuple(HEAD_BUILDERS)
#: The built-in trained methods' head kinds, for packages written before the spec recorded it.
_BUILTIN_HEADS = {spec.id: spec.head for spec in BUILTIN_METHODS if spec.trained}
_METHOD_ID = re.compile(r"^[a-z][a-z0-9_]*$")


def representation_spec(method: str, *, seed: int, width: int, arch: dict | None) -> dict:
    """What rebuilds the network before its state dict is loaded (stored in the package).

    A trained network is recorded by its backbone and head kind (and its sizes, ``arch``),
    which the scorer rebuilds from data alone: a plugin's method packages like a built-in
    one, and scoring imports no code of its package.
    """
    if is_trained(method):
        return {
            "kind": "trained",
            "method": method,
            "head": method_spec(method).head,
            "backbone": BACKBONES[0],
            "arch": dict(arch or {}),
        }
    if method in PACKABLE_FROZEN:
        return {"kind": "frozen", "method": method, "seed": int(seed), "width": int(width)}
    raise PackageError(
        f"method {method!r} cannot be packaged; allowed: {', '.join(PACKABLE_FROZEN)} and the "
        "trained methods (resnet50_imagenet needs its outside weights file)"
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
        method = spec.get("method")
        if not isinstance(method, str) or not _METHOD_ID.fullmatch(method):
            raise refuse(f"method is {method!r}, not a method id")
        top = {"kind": None, "method": (method,), "head": PACKABLE_HEADS, "backbone": BACKBONES}
        top["arch"] = None
        if "head" not in spec and method not in _BUILTIN_HEADS:
            raise refuse(f"the head kind of {method!r} is missing")
        if (
            method in _BUILTIN_HEADS
            and spec.get("head", _BUILTIN_HEADS[method]) != (_BUILTIN_HEADS[method])
        ):
            raise refuse(f"head {spec['head']!r} is not the head of {method}")
        values = spec.get("arch")
        if not isinstance(values, dict):
            raise refuse("arch must be a dict")
        known: dict[str, Any] = {
            "method": (method,),
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

    The order bounds what is allocated by what the file holds, not by what its spec asks:

    1. the file is opened once as a regular file (:func:`open_package_file`), and its zip
       directory is checked: members, declared sizes, the pickled part's size;
    2. ``torch.load(weights_only=True)`` onto the meta device reads the spec and the
       tensors' names, shapes and dtypes, and no tensor data;
    3. the spec is checked against :data:`ARCH_BOUNDS`, and its network is built on the
       meta device: its parameter and buffer bytes must equal the tensor bytes the zip
       directory declares, and its names, shapes and dtypes those of the stored tensors (no
       network larger than its weights);
    4. only then are the weights read (``torch.load(weights_only=True)`` of the same file
       object), checked again, and the real network built and filled.

    Raises
    ------
    PackageError
        If the file is not a regular file, too large, not a representation, of an
        unbounded spec, or its weights do not fit the network the spec describes.
    """
    with open_representation_file(path) as file:
        return read_representation(file)


def open_representation_file(path: Path) -> contextlib.AbstractContextManager[PackageFile]:
    """``representation.pt`` opened as a regular file, its size checked (nothing read)."""
    limit = archive_file_limit(MAX_REPRESENTATION_BYTES, MAX_REPRESENTATION_MEMBERS)
    return open_package_file(path, max_bytes=limit, what="a representation file")


def read_representation(file: PackageFile) -> nn.Module:
    """The network of an open ``representation.pt`` (:func:`load_representation`)."""
    path = file.path
    _, members = open_archive(
        file, max_bytes=MAX_REPRESENTATION_BYTES, max_members=MAX_REPRESENTATION_MEMBERS
    )
    declared = _check_members(path, members)
    skeleton = _torch_load(file, "meta")
    spec = _checked_spec(skeleton, path)
    try:
        expected = _tensor_layout(_build_network(spec, device="meta"))
    except (ValueError, TypeError) as error:  # a combination the builders refuse
        raise PackageError(
            f"{path}: its spec describes no network this version builds ({error}); {REDEPLOY}"
        ) from error
    network_bytes = sum(numel * size for _, _, numel, size in expected.values())
    if network_bytes != declared:
        raise PackageError(
            f"{path}: its spec describes a network of {network_bytes:,} parameter and buffer "
            f"bytes, but the file declares {declared:,} bytes of tensors; refused before "
            f"building it. {REDEPLOY}"
        )
    _check_tensors(skeleton["state_dict"], expected, path)
    payload = _torch_load(file, "cpu")
    _check_tensors(_checked_spec(payload, path)["state_dict"], expected, path)
    model = _build_network(payload, device="cpu")
    try:
        model.load_state_dict(payload["state_dict"])
    except (RuntimeError, TypeError) as error:
        raise PackageError(
            f"{path}: the weights do not fit the network its spec describes ({error}); {REDEPLOY}"
        ) from error
    return model.eval()


def _check_members(path: Path, members: list[zipfile.ZipInfo]) -> int:
    """Bytes of tensor data the zip directory declares; the pickled part bounded.

    ``torch.save`` writes ``<archive>/data.pkl`` (the pickled structure: spec, names,
    shapes) and one ``<archive>/data/<key>`` per tensor storage.
    """
    if sum(m.filename.endswith("/data.pkl") for m in members) != 1:
        raise PackageError(f"{path} is not a torch.save archive (no data.pkl); {REDEPLOY}")
    storages = [m for m in members if _STORAGE_MEMBER.match(m.filename)]
    for member in members:  # data.pkl, version, byteorder: read whole by torch
        if member not in storages and member.file_size > MAX_PICKLE_BYTES:
            raise PackageError(
                f"{path}: its member {member.filename} declares {member.file_size:,} bytes, "
                f"over the limit of {MAX_PICKLE_BYTES:,} for anything but tensor data; "
                f"refused unread. {REDEPLOY}"
            )
    return sum(m.file_size for m in storages)


def _torch_load(file: PackageFile, device: str) -> Any:
    """``torch.load(weights_only=True)`` of the open file; ``meta`` reads no tensor data."""
    try:
        file.handle.seek(0)
        return torch.load(file.handle, map_location=device, weights_only=True)
    except Exception as error:  # torch raises many types for a damaged file
        raise PackageError(
            f"{file.path} is not a readable representation ({type(error).__name__}: {error}); "
            f"{REDEPLOY}"
        ) from error


def _checked_spec(payload: Any, path: Path) -> dict[str, Any]:
    """The payload, when it is a representation of a bounded spec with a state dict."""
    if not isinstance(payload, dict) or payload.get("format") != REPRESENTATION_FORMAT:
        raise PackageError(f"{path} is not a {REPRESENTATION_FORMAT} file; {REDEPLOY}")
    check_representation_spec(payload, path)
    state = payload.get("state_dict")
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise PackageError(f"{path} has no state_dict of named tensors; {REDEPLOY}")
    return payload


def _build_network(spec: dict[str, Any], *, device: str) -> nn.Module:
    """The network a checked spec describes; on ``meta`` nothing is allocated."""
    with torch.device(device):
        if spec["kind"] == "trained":
            arch = dict(spec["arch"])
            method = arch.pop("method")
            head = spec.get("head", _BUILTIN_HEADS.get(method))
            return build_proxy_model(method, head=head, **arch)
        return build_representation(spec["method"], seed=spec["seed"], width=spec["width"])


def _tensor_layout(model: nn.Module) -> dict[str, tuple[tuple[int, ...], torch.dtype, int, int]]:
    """Name -> (shape, dtype, element count, element size) of a network's state dict."""
    return {
        name: (tuple(t.shape), t.dtype, t.numel(), t.element_size())
        for name, t in model.state_dict().items()
    }


def _check_tensors(
    state: dict[str, torch.Tensor],
    expected: dict[str, tuple[tuple[int, ...], torch.dtype, int, int]],
    path: Path,
) -> None:
    """The stored tensors' names, shapes and dtypes are the network's, or a named refusal."""
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:
        raise PackageError(
            f"{path}: the stored tensors do not match the network its spec describes (missing "
            f"{missing[:5]}, unexpected {extra[:5]}); {REDEPLOY}"
        )
    for name, (shape, dtype, _, _) in expected.items():
        got = state[name]
        if tuple(got.shape) != shape or got.dtype != dtype:
            raise PackageError(
                f"{path}: tensor {name!r} is {got.dtype} {tuple(got.shape)}, the network its "
                f"spec describes has {dtype} {shape}; {REDEPLOY}"
            )


def cell_representation(
    method: str, model_path: str | os.PathLike | None, *, seed: int, width: int
) -> tuple[nn.Module, dict[str, Any]]:
    """The cell's network and what rebuilds it (refused before building if not packable)."""
    if is_trained(method):
        if model_path is None:
            raise PackageError(f"trained method {method!r} needs its model.pt")
        model = load_trained_representation(model_path)
        return model, representation_spec(method, seed=seed, width=width, arch=model.arch)
    spec = representation_spec(method, seed=seed, width=width, arch=None)
    return build_representation(method, seed=seed, width=width), spec
