"""K identically shaped networks computed side by side as one network (fused training).

Small networks (the paper's ResNet-18 on 32x32 images, batches of 32-64 images) leave a
large GPU mostly idle; training the K networks of one method and data set (other inlier
classes, other seeds) as one computation fills it without changing what each network learns.

Layout: every tensor between layers is *channel-stacked*: ``(n, K * c, ...)``, where channels
``k c .. (k + 1) c - 1`` belong to network ``k``. Each layer keeps the networks apart:

* ``Conv2d(c_in, c_out)`` / ``ConvTranspose2d`` become grouped convolutions with ``K`` times
  the groups, so network ``k`` only sees its own input channels;
* ``BatchNorm(c)`` becomes ``BatchNorm(K * c)``: statistics are per channel, hence per network
  (running statistics included);
* ``Linear(in, out)`` becomes :class:`StackedLinear`, a batched matrix product over a
  ``(K, out, in)`` weight;
* element-wise and per-channel layers (ReLU, Sigmoid, identity, global pooling) are kept.

Every parameter and buffer of the stacked network is the concatenation along dimension 0 of
the K networks' tensors (:func:`stack_tensors`), so weights, BatchNorm statistics and
optimiser buffers move in and out by concatenating and chunking, exactly
(:func:`load_stacked`, :func:`unload_stacked`). Nothing couples the networks: the gradient
of the *sum* of their losses with respect to network ``k``'s weights is the gradient of
network ``k``'s own loss, and SGD with momentum and weight decay is element-wise.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn

from pipeline_lib.models.heads import Decoder

__all__ = [
    "StackedLinear",
    "load_stacked",
    "stack_inputs",
    "stack_models",
    "stack_tensors",
    "unload_stacked",
    "unstack_outputs",
    "unstack_tensor",
]

#: Layers that act per element or per channel, so they work unchanged on stacked channels.
_PER_CHANNEL = (nn.ReLU, nn.Identity, nn.Sigmoid, nn.AdaptiveAvgPool2d, nn.Flatten)
#: Containers that hold no tensors of their own and whose ``forward`` never relies on a
#: channel count, except the ones in :data:`_CHANNEL_ATTRIBUTES`.
_CHANNEL_ATTRIBUTES: dict[type[nn.Module], tuple[str, ...]] = {Decoder: ("start_channels",)}


class StackedLinear(nn.Module):
    """K independent ``Linear(in_features, out_features)`` on channel-stacked ``(n, K * in)``.

    ``weight`` is ``(K * out, in)`` (the K weights concatenated) and ``bias`` ``(K * out,)``;
    the output is ``(n, K * out)``.
    """

    def __init__(
        self,
        k: int,
        in_features: int,
        out_features: int,
        *,
        bias: bool,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.k, self.in_features, self.out_features = k, in_features, out_features
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(k * out_features, in_features, **factory))
        self.bias = nn.Parameter(torch.empty(k * out_features, **factory)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = len(x)
        stacked = x.reshape(n, self.k, self.in_features).transpose(0, 1)  # (K, n, in)
        weight = self.weight.view(self.k, self.out_features, self.in_features).transpose(1, 2)
        if self.bias is None:
            out = torch.bmm(stacked, weight)
        else:
            out = torch.baddbmm(self.bias.view(self.k, 1, self.out_features), stacked, weight)
        return out.transpose(0, 1).reshape(n, self.k * self.out_features)

    def extra_repr(self) -> str:
        return (
            f"k={self.k}, in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


def _stacked_layer(module: nn.Module, k: int) -> nn.Module | None:
    """The K-network version of a layer with tensors (on the meta device), else None."""
    tensors = [t for t in module.state_dict().values() if t.is_floating_point()]
    meta = {"device": torch.device("meta"), "dtype": tensors[0].dtype if tensors else None}
    if isinstance(module, nn.Conv2d | nn.ConvTranspose2d):
        # Transposed convolutions take an output padding (and only zero padding).
        transposed = isinstance(module, nn.ConvTranspose2d)
        extra = {"output_padding": module.output_padding} if transposed else {}
        return (nn.ConvTranspose2d if transposed else nn.Conv2d)(
            k * module.in_channels,
            k * module.out_channels,
            module.kernel_size,
            stride=module.stride,
            padding=module.padding,
            dilation=module.dilation,
            groups=k * module.groups,
            bias=module.bias is not None,
            padding_mode=module.padding_mode,
            **extra,
            **meta,
        )
    if isinstance(module, nn.BatchNorm1d | nn.BatchNorm2d):
        return type(module)(
            k * module.num_features,
            eps=module.eps,
            momentum=module.momentum,
            affine=module.affine,
            track_running_stats=module.track_running_stats,
            **meta,
        )
    if isinstance(module, nn.Linear):
        return StackedLinear(
            k, module.in_features, module.out_features, bias=module.bias is not None, **meta
        )
    return None


def _check_same_shapes(models: Sequence[nn.Module]) -> None:
    first = models[0].state_dict()
    for index, model in enumerate(models[1:], start=1):
        other = model.state_dict()
        shapes = {name: tuple(t.shape) for name, t in first.items()}
        if shapes != {name: tuple(t.shape) for name, t in other.items()}:
            raise ValueError(f"model {index} is not shaped like model 0; only equal models stack")
        if [type(m) for m in model.modules()] != [type(m) for m in models[0].modules()]:
            raise ValueError(f"model {index} is not built like model 0; only equal models stack")


def stack_models(models: Sequence[nn.Module]) -> nn.Module:
    """One network computing ``models`` side by side on channel-stacked tensors.

    The result has the structure (and attributes such as ``backbone``, ``head``, ``proxy``)
    of ``models[0]``, every layer with tensors replaced by its stacked version, and holds a
    copy of the models' weights and buffers (:func:`load_stacked`), on their device.

    Raises
    ------
    ValueError
        If the models are not identically built, or ``models`` is empty.
    TypeError
        On a layer this module cannot stack (its tensors would mix the networks).
    """
    if not models:
        raise ValueError("need at least one model to stack")
    _check_same_shapes(models)
    k = len(models)
    stacked = copy.deepcopy(models[0])
    for name, module in list(stacked.named_modules()):
        layer = _stacked_layer(module, k)
        if layer is not None:
            parent_name, _, child = name.rpartition(".")
            setattr(stacked.get_submodule(parent_name), child, layer)
        elif isinstance(module, _PER_CHANNEL) or not (
            any(True for _ in module.parameters(recurse=False))
            or any(True for _ in module.buffers(recurse=False))
        ):
            for attribute in _CHANNEL_ATTRIBUTES.get(type(module), ()):
                setattr(module, attribute, k * getattr(module, attribute))
        else:
            raise TypeError(f"cannot stack layer {name!r} of type {type(module).__name__}")
    reference = next(iter(models[0].state_dict().values()))
    stacked = stacked.to_empty(device=reference.device)
    load_stacked(stacked, models)
    return stacked


def stack_tensors(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The stacked form of one tensor of every network: concatenated along dimension 0.

    Scalars (BatchNorm's ``num_batches_tracked``) must agree and are kept once.
    """
    if tensors[0].ndim == 0:
        return tensors[0].clone()
    return torch.cat(list(tensors))


def unstack_tensor(tensor: torch.Tensor, k: int) -> list[torch.Tensor]:
    """The inverse of :func:`stack_tensors`: K views (a scalar is shared by all)."""
    if tensor.ndim == 0:
        return [tensor] * k
    return list(tensor.chunk(k))


@torch.no_grad()
def load_stacked(stacked: nn.Module, models: Sequence[nn.Module]) -> None:
    """Copy the models' parameters and buffers into ``stacked`` (exact copies)."""
    states = [model.state_dict() for model in models]
    for name, tensor in stacked.state_dict().items():
        tensor.copy_(stack_tensors([state[name] for state in states]))


@torch.no_grad()
def unload_stacked(stacked: nn.Module, models: Sequence[nn.Module]) -> None:
    """Copy ``stacked``'s parameters and buffers back out into the models (exact copies)."""
    states = [model.state_dict() for model in models]
    for name, tensor in stacked.state_dict().items():
        for state, part in zip(states, unstack_tensor(tensor, len(models)), strict=True):
            state[name].copy_(part)


def stack_inputs(inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """K inputs ``(n, c, ...)`` -> one channel-stacked ``(n, K * c, ...)``."""
    return torch.stack(list(inputs), dim=1).flatten(1, 2)


def unstack_outputs(output: torch.Tensor, k: int) -> list[torch.Tensor]:
    """A channel-stacked ``(n, K * c, ...)`` -> K outputs ``(n, c, ...)`` (views)."""
    return list(output.unflatten(1, (k, -1)).unbind(1))
