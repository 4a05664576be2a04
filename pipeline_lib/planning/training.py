"""What one training job costs per image: its method's spec (epochs, batch, subset) from the
grid functions the DAG uses, and its rate from the first source that has one (module
docstring of :mod:`pipeline_lib.planning.planner`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline_lib.config.grids import base_method, variant_train_size, variant_training
from pipeline_lib.planning.defaults import default_images_per_s
from pipeline_lib.planning.measured import median
from pipeline_lib.planning.rate_choice import Choice, choose_rate, size_label
from pipeline_lib.planning.rates import STEP_MODES, Overheads, Rate
from pipeline_lib.registry import (
    CAPTURED_STEP_MODES,
    instances_per_image,
    is_trained,
    training_arguments,
)


@dataclass(frozen=True)
class TrainingSpec:
    """How one method or variant trains, as the DAG's ``train_representation`` job runs it.

    Built by :func:`training_spec` from the grid functions the Snakefile's params use, so the
    planner cannot drift from what the jobs do (it once costed every variant at the global
    epochs, guessing base methods from name prefixes).
    """

    name: str
    base: str
    epochs: int
    batch_size: int
    train_size: int | None
    #: Training instances per source image (contrastive DA, expanded batching: 4), the unit
    #: of the measured rates (:func:`pipeline_lib.registry.instances_per_image`).
    instances_per_image: int = 1


def training_spec(name: str, config: Mapping[str, Any]) -> TrainingSpec | None:
    """The training of method or variant ``name`` under ``config``; None if it trains nothing.

    Parameters
    ----------
    name : str
        A ``method`` wildcard: a method id or a variant of ``config["variants"]``.
    config : mapping
        The (validated) config: its ``train`` section and ``variants``.

    Returns
    -------
    TrainingSpec or None
        Base method, epochs and batch size after the variant's overrides (the paper's
        per-method batch size when unset), and the variant's training subset size.
    """
    variants = config.get("variants") or {}
    base = base_method(name, variants)
    if not is_trained(base):
        return None
    arguments = training_arguments(
        base, variant_training(name, config.get("train") or {}, variants)
    )
    return TrainingSpec(
        name=name,
        base=base,
        epochs=int(arguments.get("epochs") or 2048),
        batch_size=int(arguments["batch_size"]),
        train_size=variant_train_size(name, variants),
        instances_per_image=instances_per_image(base, arguments),
    )


@dataclass(frozen=True)
class TableQuery:
    """What a rate table is asked for a config: device kind, width and its train settings."""

    rates: Sequence[Rate]
    kind: str
    width: int
    step_mode: str | None
    amp: str | None

    def mode(self, method: str, fuse: int, image_size: int = 32) -> str:
        """The step mode whose rows cost a job of ``fuse`` models (``train.step_mode``).

        Absent or ``auto`` is what the stepper does: graph on CUDA (unless amp float16), costed
        from graph rows when one of that fuse or fewer models exists (:meth:`fused`), else
        from the eager ones.
        """
        if self.step_mode in STEP_MODES:
            return self.step_mode
        if self.kind == "cuda" and self.amp != "float16":
            if self._captured_fuse_at_most(method, "graph", fuse, image_size) is not None:
                return "graph"
        return "eager"

    def _captured_fuse_at_most(
        self, method: str, mode: str, fuse: int, image_size: int
    ) -> Choice | None:
        """The ``mode`` row of the most models, at most ``fuse``, measured for ``method``."""
        for fewer in range(fuse, 0, -1):
            choice, _ = self._choose(method, mode, fewer, image_size)
            if choice is not None:
                return choice
        return None

    def single(self, method: str, image_size: int = 32) -> tuple[float | None, str]:
        """Images per device-second of one model trained alone as the config says, or why not.

        For ``image_size`` images: measured there, else extrapolated by pixels from the
        32x32 rows (:func:`pipeline_lib.planning.rates.choose_rate`; the text says which).
        """
        choice, why = self._choose(method, self.mode(method, 1, image_size), 1, image_size)
        return (choice.device_images_per_s if choice else None), why

    def fused(self, method: str, models: int, image_size: int = 32) -> tuple[float | None, str]:
        """Images per device-second of a fused job of ``models`` models as the config says.

        Fused jobs step as ``train.step_mode`` says, as single ones do (:meth:`mode`).
        Without a fused-``models`` row of that mode:

        * graph or compiled: the rate of the most models side by side measured below ``models`` (a
          captured group replays its members' graphs side by side on CUDA streams; on an
          H200 the group's total rose from K = 1 to 2, 4 and 8 for every method, so fewer
          members are a floor, e.g. the group of 2 that fuse 4 leaves of CIFAR-10's 10);
        * eager: ``models`` separate eager trainings, an upper bound of the hours (a stacked
          group can train slower than one model alone: RotNet at K = 4, 0.97x).
        """
        mode = self.mode(method, models, image_size)
        choice, why = self._choose(method, mode, models, image_size)
        if choice is not None:
            return choice.device_images_per_s, why
        if models == 1:
            return None, why
        captured = mode in CAPTURED_STEP_MODES
        fewer = self._captured_fuse_at_most(method, mode, models, image_size) if captured else None
        if fewer is not None:
            return fewer.device_images_per_s, (
                f"fuse {models} not measured ({mode}): as {fewer.describe()}, the most models "
                "side by side measured below it"
            )
        alone, why_alone = self._choose(method, "eager", 1, image_size)
        if alone is None:
            return None, f"{why}; {why_alone}"
        return alone.images_per_s_per_model, (
            f"fuse {models} not measured ({mode}): {models} separate runs ({why_alone}), "
            "an upper bound"
        )

    def overheads(
        self, method: str, models: int = 1, image_size: int = 32
    ) -> tuple[Overheads | None, str]:
        """What a job of ``models`` models pays besides its steps, from the rows its rate
        comes from (:meth:`single`, :meth:`fused`), or why it is left out.

        A fused job costed as fewer models side by side takes their overheads; one costed
        as separate eager runs, that many times one run's.
        """
        mode = self.mode(method, models, image_size)
        choice, _ = self._choose(method, mode, models, image_size)
        copies = 1
        if choice is None and models > 1:
            if mode in CAPTURED_STEP_MODES:
                choice = self._captured_fuse_at_most(method, mode, models, image_size)
            else:
                choice, _ = self._choose(method, "eager", 1, image_size)
                copies = models
        if choice is None or choice.overheads is None:
            return None, "overheads not measured (left out)"
        overheads = choice.overheads.times(copies)
        return overheads, f"overheads measured at {choice.setting}: {overheads.describe()}"

    def _choose(
        self, method: str, step_mode: str, fuse: int, image_size: int
    ) -> tuple[Choice | None, str]:
        return choose_rate(
            self.rates,
            kind=self.kind,
            width=self.width,
            method=method,
            step_mode=step_mode,
            fuse=fuse,
            image_size=image_size,
        )


def training_rate(
    method: str,
    device: str,
    overrides: Mapping[str, float] | None,
    table: TableQuery,
    measured: Mapping[str, list[float]],
    *,
    fused: int | None = None,
    image_size: int = 32,
) -> tuple[float | None, list[str]]:
    """Images per device-second for a job of ``method`` on ``image_size`` images, and where
    they came from.

    ``fused``: the models of a train_fused job. Only a rate table knows fused rates: every
    other source is one job alone, so the job costs ``fused`` separate trainings then. Only
    a rate table knows rates at other image sizes: every other source is a 32x32 rate,
    scaled by pixels for larger images (and said so).
    """
    sources = ["fused = sum of separate runs"] if fused is not None and fused > 1 else []
    if overrides and method in overrides:
        rate, source = float(overrides[method]), "rate given"
    else:
        if table.rates:
            found, why = (
                table.single(method, image_size)
                if fused is None
                else table.fused(method, fused, image_size)
            )
            if found is not None:
                return found, [why]
            sources.append(why)
        default = default_images_per_s(device, method)
        if measured.get(method):
            rate, source = median(measured[method]), "rate measured"
        elif default is not None:
            rate, source = default, f"rate default ({device})"
        else:
            return None, sources
    if image_size != 32:
        source = f"{source}, {size_label(image_size, 32)}"
    return rate * (32 / image_size) ** 2, [*sources, source]
