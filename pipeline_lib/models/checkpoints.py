"""Files of trained representations and training checkpoints (written atomically).

Two kinds of file, both ``torch.save`` dictionaries of tensors and plain Python values, read
back with ``torch.load(weights_only=True)`` (no arbitrary code runs on load):

* a **representation file** (:func:`save_representation`): the final network and enough
  metadata (``arch``) to rebuild it, what the embedding step loads;
* a **training checkpoint** (:func:`save_checkpoint`): everything needed to resume training
  exactly (model, optimiser, scheduler, scaler, epoch, history, RNG states); see
  :func:`pipeline_lib.ssl.train.train_representation`.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from pipeline_lib.models.proxy import ProxyModel, build_proxy_model
from pipeline_lib.runtime.io import atomic_path

REPRESENTATION_FORMAT = "droc-representation/1"
CHECKPOINT_FORMAT = "droc-train-checkpoint/1"


def plain(value: Any) -> Any:
    """JSON round trip: tuples become lists, so saved and fresh configs compare equal.

    Raises
    ------
    ValueError
        If ``value`` holds something JSON cannot represent.
    """
    try:
        return json.loads(json.dumps(value))
    except TypeError as error:
        raise ValueError(f"config must hold only JSON-compatible values: {error}") from error


def save_representation(
    path: str | os.PathLike,
    model: ProxyModel,
    *,
    method: str,
    config_dict: dict[str, Any],
) -> None:
    """Write the trained representation (CPU tensors) atomically to ``path``.

    Parameters
    ----------
    path : str or PathLike
    model : ProxyModel
        As returned by :func:`~pipeline_lib.ssl.train.train_representation`.
    method : str
        Must equal ``model.arch["method"]``.
    config_dict : dict
        Training hyper-parameters and provenance (JSON-compatible values), kept in the file
        and exposed as ``training_config`` by :func:`load_trained_representation`.

    Raises
    ------
    ValueError
        If ``method`` does not match the model or ``config_dict`` is not JSON-compatible.
    """
    if model.arch.get("method") != method:
        raise ValueError(
            f"method {method!r} does not match the model's {model.arch.get('method')!r}"
        )
    payload = {
        "format": REPRESENTATION_FORMAT,
        "method": method,
        "arch": plain(model.arch),
        "config": plain(config_dict),
        "state_dict": {name: value.detach().cpu() for name, value in model.state_dict().items()},
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_trained_representation(
    path: str | os.PathLike, *, map_location: torch.device | str = "cpu"
) -> ProxyModel:
    """Rebuild a representation written by :func:`save_representation`, in inference mode.

    Returns
    -------
    ProxyModel
        A :class:`~pipeline_lib.models.representation.Representation` (``forward`` gives ``f``
        and, except for denoising, ``g``) with attributes ``arch`` and ``training_config``.

    Raises
    ------
    ValueError
        If the file cannot be read or is not a representation file (the message names it).
    """
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises many types for a damaged file
        raise ValueError(
            f"{path} is not a readable representation file ({type(error).__name__}: {error}); "
            "delete it and re-run the training step"
        ) from error
    if not isinstance(payload, dict) or payload.get("format") != REPRESENTATION_FORMAT:
        raise ValueError(f"{path} is not a {REPRESENTATION_FORMAT} file")
    arch = dict(payload["arch"])
    method = arch.pop("method")
    model = build_proxy_model(method, **arch)
    model.load_state_dict(payload["state_dict"])
    model.training_config = payload["config"]
    return model.to(map_location).eval()


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write a training checkpoint atomically (temporary file, then ``os.replace``)."""
    with atomic_path(path) as tmp:
        torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)


def load_checkpoint(
    path: str | os.PathLike, *, map_location: torch.device | str = "cpu"
) -> dict[str, Any]:
    """Read a training checkpoint; any failure propagates (the caller decides what to do).

    Raises
    ------
    ValueError
        If the file loads but is not a training checkpoint.
    """
    state = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a {CHECKPOINT_FORMAT} file")
    return state
