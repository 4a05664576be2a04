"""The network trained by a self-supervised proxy task: backbone ``f``, head ``g``, proxy module.

A :class:`ProxyModel` *is* a :class:`~pipeline_lib.models.representation.Representation`
(``forward`` returns ``f`` and, when there is a head, ``g``), so the embedding step treats a
trained model like a frozen one. The extra ``proxy`` module is what the proxy loss needs on
top of the representation and is not part of the features: the 4-way rotation classifier
(on ``g``) or the denoising decoder (on ``f``); contrastive learning has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from pipeline_lib.models.heads import Decoder, contrastive_head, head_output_dim, rotation_head
from pipeline_lib.models.init import check_init, released_init_
from pipeline_lib.models.representation import Representation
from pipeline_lib.models.resnet import resnet18_small
from pipeline_lib.registry import (
    DENOISING_DECODERS,
    DENOISING_TARGETS,
    MLP_HEAD_DEPTH,
    MLP_HEADS,
    is_trained,
    method_ids,
    method_spec,
)


class ProxyModel(Representation):
    """A representation plus the module its proxy loss needs.

    Parameters
    ----------
    backbone : nn.Module
        ``f``: images ``(n, 3, h, w)`` in [0, 1] -> ``(n, d)``.
    head : nn.Module or None
        ``g`` (contrastive projection or rotation MLP); ``None`` for denoising.
    proxy : nn.Module or None
        Rotation classifier (``g -> 4 logits``), decoder (``f -> image``) or ``None``.
    arch : dict
        The keyword arguments of :func:`build_proxy_model` that rebuild this network
        (stored in checkpoints so a file can be loaded without outside configuration).
    """

    def __init__(
        self,
        backbone: nn.Module,
        head: nn.Module | None,
        proxy: nn.Module | None,
        *,
        arch: dict[str, Any],
    ) -> None:
        super().__init__(backbone, head)
        self.proxy = proxy
        self.arch = dict(arch)


Heads = tuple[nn.Module | None, nn.Module | None, dict[str, Any]]


def _projection(f_dim: int, sizes: Mapping[str, Any]) -> Heads:
    """The contrastive projection ``g`` and no proxy module (the loss reads ``g``)."""
    depth, hidden, out = sizes["head_depth"], sizes["head_hidden"], sizes["proj_dim"]
    return contrastive_head(f_dim, depth=depth, hidden=hidden, out_dim=out), None, {}


def _rotation_classifier(f_dim: int, sizes: Mapping[str, Any]) -> Heads:
    """The rotation MLP ``g`` (the identity at depth 0) and the 4-way classifier on it."""
    head = rotation_head(f_dim, depth=sizes["head_depth"], hidden=sizes["head_hidden"])
    return head, nn.Linear(head_output_dim(head, f_dim), 4), {}


def _decoder(f_dim: int, sizes: Mapping[str, Any]) -> Heads:
    """No ``g`` and the denoising decoder of ``denoising_target`` and ``denoising_decoder``
    (both checked first); both are recorded in the network's ``arch``."""
    denoising_target, denoising_decoder = sizes["denoising_target"], sizes["denoising_decoder"]
    if denoising_target not in DENOISING_TARGETS:
        raise ValueError(
            f"unknown denoising_target {denoising_target!r}; allowed: "
            f"{', '.join(DENOISING_TARGETS)}"
        )
    if denoising_decoder not in DENOISING_DECODERS:
        raise ValueError(
            f"unknown denoising_decoder {denoising_decoder!r}; allowed: "
            f"{', '.join(DENOISING_DECODERS)}"
        )
    decoder = Decoder(
        f_dim,
        image_size=sizes["image_size"],
        width=sizes["width"],
        sigmoid=denoising_target == "pixels",
        spatial=denoising_decoder == "spatial",
    )
    arch = {"denoising_target": denoising_target, "denoising_decoder": denoising_decoder}
    return None, decoder, arch


#: Head kind (:data:`pipeline_lib.registry.HEAD_KINDS`) -> what builds ``g`` and the proxy
#: module on a backbone of ``f_dim`` features from the network's sizes (its ``arch`` and the
#: decoder's settings), and the ``arch`` entries they add.
HEAD_BUILDERS: dict[str, Callable[..., Heads]] = {
    "projection": _projection,
    "rotation_mlp": _rotation_classifier,
    "rotation_linear": _rotation_classifier,
    "decoder": _decoder,
}


def build_proxy_model(
    method: str,
    *,
    width: int = 64,
    stem_width: int | None = None,
    head_depth: int | None = None,
    head_hidden: int = 512,
    proj_dim: int = 128,
    image_size: int = 32,
    denoising_target: str = DENOISING_TARGETS[0],
    denoising_decoder: str = DENOISING_DECODERS[0],
    init: str = "released",
    head: str | None = None,
) -> ProxyModel:
    """Build the untrained network of a trained method (uses the global torch RNG).

    The backbone, then the heads of the method's head kind
    (:attr:`~pipeline_lib.registry.MethodSpec.head`, :data:`HEAD_BUILDERS`).

    Parameters
    ----------
    method : str
        A trained method of the method table (:mod:`pipeline_lib.registry.methods`).
    width : int, default=64
        First-stage width of the ResNet-18 (``f`` has ``8 * width`` dimensions).
    stem_width : int or None, default=None
        Channels of the ResNet's stem; None: ``width``
        (:class:`~pipeline_lib.models.resnet.SmallImageResNet`). Recorded in ``arch`` only
        when it differs from ``width``, so a network with the usual stem has the same arch
        (and checkpoint fingerprint) whether or not the setting is given.
    head_depth : int or None, default=None
        Hidden layers of the MLP head; ``None`` uses the method's default (8, or 0 without
        an MLP head, where any other value raises).
    head_hidden : int, default=512
    proj_dim : int, default=128
        Output of the contrastive head.
    image_size : int, default=32
        Side of the (square) training images; used by the denoising decoder.
    denoising_target : {"pixels", "patch_normalized"}, default="pixels"
        What the denoising decoder reconstructs (:mod:`pipeline_lib.ssl.tasks.denoising`): its
        output ends in a sigmoid only for ``"pixels"``. Recorded in ``arch`` for the
        decoder only.
    denoising_decoder : {"pooled", "spatial"}, default="pooled"
        Whether the decoder reads ``f`` or the feature map before pooling
        (:class:`~pipeline_lib.models.heads.Decoder`). Recorded in ``arch`` for the
        decoder only.
    init : {"released", "torch"}, default="released"
        Initial weights of every layer, backbone, head and proxy module alike
        (:mod:`pipeline_lib.models.init`). Not recorded in ``arch``: a saved model's weights
        come from its file.
    head : str or None, default=None
        The head kind (:data:`HEAD_BUILDERS`); None: the method's row of the method table.
        A deploy package's reader passes the kind it recorded, so rebuilding a packaged
        network needs no row of the table (a plugin's method, say) and imports no code.

    Returns
    -------
    ProxyModel

    Raises
    ------
    ValueError
        On an unknown method or init, or a head depth the method does not allow.
    """
    if head is None:
        if not is_trained(method):
            raise ValueError(
                f"unknown trained representation {method!r}; allowed: "
                f"{', '.join(method_ids(trained=True))}"
            )
        head = method_spec(method).head
    if head not in HEAD_BUILDERS:
        raise ValueError(f"unknown head kind {head!r}; allowed: {', '.join(HEAD_BUILDERS)}")
    check_init(init)
    has_mlp_head = head in MLP_HEADS
    depth = (MLP_HEAD_DEPTH if has_mlp_head else 0) if head_depth is None else int(head_depth)
    if not has_mlp_head and depth != 0:
        raise ValueError(
            f"{method} has no MLP head (head_depth must be 0 or None), got head_depth={depth}"
        )
    arch = {
        "method": method,
        "width": width,
        "head_depth": depth,
        "head_hidden": head_hidden,
        "proj_dim": proj_dim,
        "image_size": image_size,
    }
    if stem_width is not None and stem_width != width:
        arch["stem_width"] = stem_width
    backbone = resnet18_small(width=width, stem_width=stem_width, init=init)
    decoding = {"denoising_target": denoising_target, "denoising_decoder": denoising_decoder}
    g, proxy, extra = HEAD_BUILDERS[head](backbone.feature_dim, {**arch, **decoding})
    arch.update(extra)
    if init == "released":  # the backbone initialised itself; torch's defaults stay otherwise
        for module in (g, proxy):
            if module is not None:
                released_init_(module)
    return ProxyModel(backbone, g, proxy, arch=arch)


def rotation_logits(model: ProxyModel, x: torch.Tensor) -> torch.Tensor:
    """4-way rotation logits ``proxy(g(f(x)))`` of shape ``(n, 4)``."""
    method = model.arch.get("method")
    if not (is_trained(method) and method_spec(method).rotation_classifier):
        raise ValueError(f"model of method {method!r} has no rotation classifier")
    return model.proxy(model.head(model.backbone(x)))
