"""The learning-rate schedule of a run, and the momentum form it keeps.

SGD with momentum can carry the learning rate in two places:

``released`` (the recipe; Keras' SGD, TF 2.3's ``ResourceApplyKerasMomentum``, which the
released code trains with)
    ``v <- m v - lr g;  w <- w + v``: the rate enters the velocity when a gradient does.
``torch`` (a variant: ``torch.optim.SGD`` as it is)
    ``b <- m b + g;  w <- w - lr b``: the rate multiplies the whole buffer at each update.

With a constant rate the two give the same weights (``b = -v / lr``). When the rate moves
from ``lr_old`` to ``lr_new``, Keras' next update carries ``m v`` (gradients at the rates
they were taken at) and torch's ``m (lr_new / lr_old) v``: under the released cosine this
happens once an epoch. The ``released`` form runs torch's SGD and rescales its momentum
buffers by ``lr_old / lr_new`` whenever the schedule moves the rate, so that ``b = -v /
lr_new`` and torch's next update is Keras' exactly (tests/reference/test_steps.py measures
it against the released optimiser across a rate change).

The rescaling lives in the schedule's ``step()``, which every trainer path calls after each
optimiser step (the eager loop, the two-phase and graph-captured steps, whose momentum
buffers it rescales in place between replays, and both fused loops), so they all keep one
form. The rate the buffers are scaled for is kept in each parameter group
(``momentum_lr``), so it is saved and restored with the optimiser's state, and a resumed run
goes on as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from pipeline_lib.registry import MOMENTUM_FORMS

__all__ = ["MOMENTUM_FORMS", "MOMENTUM_LR", "MomentumFormLR", "rescale_momentum"]

#: The parameter-group key of the rate the momentum buffers are scaled for (``released``).
MOMENTUM_LR = "momentum_lr"


@torch.no_grad()
def rescale_momentum(optimizer: torch.optim.Optimizer) -> None:
    """Put each group's momentum buffers in units of its current rate (Keras' form).

    Multiplies the buffers of every group whose rate moved since the last call by
    ``momentum_lr / lr`` and records the new rate. A zero rate is skipped: no update can
    follow it (the cosine reaches 0 only after the last step), and the buffers keep their
    scale for whatever rate comes next.
    """
    for group in optimizer.param_groups:
        old, new = group.setdefault(MOMENTUM_LR, group["lr"]), group["lr"]
        if new == old or new == 0 or group.get("momentum", 0) == 0:
            continue
        buffers = [
            buffer
            for parameter in group["params"]
            if (buffer := optimizer.state.get(parameter, {}).get("momentum_buffer")) is not None
        ]
        if buffers:
            torch._foreach_mul_(buffers, float(old) / float(new))
        group[MOMENTUM_LR] = new


class MomentumFormLR(torch.optim.lr_scheduler.LambdaLR):
    """``LambdaLR`` that keeps SGD's momentum in ``momentum_form`` (module docstring).

    Parameters
    ----------
    optimizer : torch.optim.SGD
    factor : callable
        ``factor(step) -> float``, the rate over the base rate (LambdaLR's ``lr_lambda``).
    momentum_form : {"released", "torch"}

    Raises
    ------
    ValueError
        On an unknown momentum form.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        factor: Callable[[int], float],
        *,
        momentum_form: str,
    ) -> None:
        if momentum_form not in MOMENTUM_FORMS:
            raise ValueError(
                f"unknown momentum_form {momentum_form!r}; allowed: {', '.join(MOMENTUM_FORMS)}"
            )
        self.momentum_form = momentum_form
        # LambdaLR's constructor calls step() once: nothing to rescale then (a group may
        # come with its buffers and their rate, e.g. a fused group built from its members).
        self._rescaling = False
        super().__init__(optimizer, factor)
        if momentum_form == "released":
            for group in optimizer.param_groups:
                group.setdefault(MOMENTUM_LR, group["lr"])
            self._rescaling = True

    def step(self, epoch: int | None = None) -> None:
        super().step(epoch)
        if self._rescaling:
            rescale_momentum(self.optimizer)
