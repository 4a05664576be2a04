"""Which measured rate a plan uses: per method, the best setting of a rate table's rows.

A setting is a step mode and a fuse factor; each setting's rate is the median of its
latest day's rows, at the job's image size when measured there, else scaled by pixels (and
said so: :func:`size_label`), and its overheads the median of those rows' overheads where
measured. The embedding rate is a property of the network, not of a setting
(:func:`embedding_rate`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pipeline_lib.planning.rates import LEGACY_IMAGE_SIZE, Overheads, Rate, RateTableError


@dataclass(frozen=True)
class Setting:
    """How models train: step mode and fuse factor (the config's train.step_mode, train.fuse)."""

    step_mode: str
    fuse: int

    def __str__(self) -> str:
        return f"{self.step_mode}, fuse {self.fuse}"


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def size_label(image_size: int, measured_size: int) -> str:
    """Whether a rate for ``image_size`` images was measured there or extrapolated.

    Extrapolated rates scale by pixels: a 64x64 image costs 4x the FLOPs of a 32x32 one.
    """
    if image_size == measured_size:
        return f"{image_size} px as measured"
    factor = (measured_size / image_size) ** 2
    return f"{image_size} px extrapolated from {measured_size} px (rate x {factor:g})"


@dataclass(frozen=True)
class Choice:
    """The rate the planner uses for one method: its setting and where it was measured."""

    setting: Setting
    #: Per model, for ``image_size`` images (extrapolated when ``measured_size`` differs).
    images_per_s_per_model: float
    device: str
    date: str
    image_size: int = LEGACY_IMAGE_SIZE
    measured_size: int = LEGACY_IMAGE_SIZE
    #: The rows the median is of, and their timed calls in all.
    rows: int = 1
    repeats: int = 1
    #: Slowest and fastest timed call of those rows, per model at ``image_size``.
    low: float = 0.0
    high: float = 0.0
    #: The median overheads of those rows that measured them (None: none did).
    overheads: Overheads | None = None

    @property
    def device_images_per_s(self) -> float:
        """Source images per device-second of the setting (per-model rate x fuse)."""
        return self.images_per_s_per_model * self.setting.fuse

    @property
    def extrapolated(self) -> bool:
        """True when no row was measured at the asked image size."""
        return self.image_size != self.measured_size

    @property
    def single_sample(self) -> bool:
        """True when the rate is one timed call."""
        return self.repeats == 1

    def sample_label(self) -> str:
        """``single sample``, or what the median is of and its range."""
        if self.single_sample:
            return "single sample"
        span = f"{_figure(self.low)}-{_figure(self.high)}/s per model"
        if self.rows == 1:
            return f"median of {self.repeats} repeats ({span})"
        if self.repeats == self.rows:
            return f"median of {self.rows} single-sample rows ({span})"
        return f"median of {self.rows} rows, {self.repeats} timed calls ({span})"

    def describe(self) -> str:
        """E.g. ``graph, fuse 1, measured NVIDIA H200 2026-11-27, 32 px as measured, single
        sample`` (the plan's source column)."""
        return (
            f"{self.setting}, measured {self.device} {self.date[:10]}, "
            f"{size_label(self.image_size, self.measured_size)}, {self.sample_label()}"
        )


def settings_measured(rates: Iterable[Rate], *, kind: str, width: int) -> list[Setting]:
    """The (step mode, fuse) settings measured for any method on ``kind`` at ``width``."""
    found = {Setting(r.step_mode, r.fuse) for r in rates if r.kind == kind and r.width == width}
    return sorted(found, key=lambda s: (s.fuse, s.step_mode))


def _setting_choice(
    setting: Setting, rows: Sequence[Rate], *, device: str, image_size: int
) -> Choice:
    """The rate of one setting for ``image_size`` images, from the rows of that setting.

    Rows measured at ``image_size`` are used when there are any, else the 32x32 rows (else
    the nearest smaller size), scaled by pixels. The caller passes no row of a larger size:
    scaling by pixels is a floor of the rate only upwards in size (on an H200, compiled,
    32 px trained 1.8-3.4x the instances of 64 px, never 4x). Of those, the latest day's
    rows: re-measuring (a faster trainer, another session) appends rows, and the newest day
    supersedes older ones; the median of that day's rows (each itself a median of repeats,
    or a legacy single sample) damps one noisy run.
    """
    sizes = {row.image_size for row in rows}
    measured = min(
        sizes,
        key=lambda s: (s != image_size, s != LEGACY_IMAGE_SIZE, abs(s - image_size), s),
    )
    at_size = [row for row in rows if row.image_size == measured]
    day = max(row.date[:10] for row in at_size)
    latest = [row for row in at_size if row.date[:10] == day]
    factor = (measured / image_size) ** 2
    median = float(statistics.median(row.images_per_s_per_model for row in latest))
    return Choice(
        setting,
        median * factor,
        device,
        day,
        image_size=image_size,
        measured_size=measured,
        rows=len(latest),
        repeats=sum(row.repeats for row in latest),
        low=min(float(row.images_per_s_min or 0.0) for row in latest) * factor,
        high=max(float(row.images_per_s_max or 0.0) for row in latest) * factor,
        overheads=_median_overheads(row.overheads for row in latest),
    )


def _median_overheads(measured: Iterable[Overheads | None]) -> Overheads | None:
    """Each overhead's median over the rows that measured them; None if none did."""
    rows = [overheads for overheads in measured if overheads is not None]
    if not rows:
        return None
    return Overheads(
        capture_s=float(statistics.median(o.capture_s for o in rows)),
        epoch_end_s=float(statistics.median(o.epoch_end_s for o in rows)),
        checkpoint_s=float(statistics.median(o.checkpoint_s for o in rows)),
    )


def embedding_rate(
    rates: Iterable[Rate], *, kind: str, width: int, image_size: int
) -> tuple[float | None, str]:
    """Images/s an ``embed_trained`` job's network embeds on ``kind`` at ``width``, or why not.

    The median of the latest day's rows that measured it at ``image_size``, else at a
    smaller size scaled by pixels (a floor, as for training rates); every method's rows
    count (the same ResNet-18 embeds).
    """
    rows = [
        r
        for r in rates
        if r.kind == kind
        and r.width == width
        and r.embed_images_per_s is not None
        and r.image_size <= image_size
    ]
    if not rows:
        return None, f"no {kind} embedding rate at width {width}, {image_size} px or below"
    measured = max(row.image_size for row in rows)
    at_size = [row for row in rows if row.image_size == measured]
    day = max(row.date[:10] for row in at_size)
    latest = [float(row.embed_images_per_s or 0.0) for row in at_size if row.date[:10] == day]
    rate = float(statistics.median(latest)) * (measured / image_size) ** 2
    return rate, (
        f"embedding {_figure(rate)} images/s measured {at_size[0].device} {day}, "
        f"{size_label(image_size, measured)}"
    )


def choose_rate(
    rates: Sequence[Rate],
    *,
    kind: str,
    width: int,
    method: str,
    step_mode: str | None = None,
    fuse: int | None = None,
    image_size: int = LEGACY_IMAGE_SIZE,
) -> tuple[Choice | None, str]:
    """The best measured setting of ``method`` on ``kind`` at ``width``, or why there is none.

    Best = the most training instances per device-second (per-model rate x fuse), among the
    settings allowed by ``step_mode`` and ``fuse`` (``None``: any), for ``image_size``
    images: a setting's rows measured at that size if any, else its 32x32 rows scaled by
    pixels (:func:`size_label`; the choice says which), never a larger size's rows.

    Returns
    -------
    (Choice or None, str)
        The choice, and the text for the plan's source column (the choice described, or what
        was missing, e.g. a table measured at another width: widths are never scaled).

    Raises
    ------
    RateTableError
        If the rows name more than one ``kind`` device: the plan is for one card.
    """
    rows = [r for r in rates if r.kind == kind and r.method == method]
    if not rows:
        return None, f"no {kind} rate-table row for {method}"
    devices = sorted({r.device for r in rows})
    if len(devices) > 1:
        raise RateTableError(
            f"rate tables hold {kind} rows of several devices {devices} "
            f"({rows[0].where} and others): pass one card's table"
        )
    at_width = [r for r in rows if r.width == width]
    if not at_width:
        widths = ", ".join(str(w) for w in sorted({r.width for r in rows}))
        return None, f"no rate-table row for {method} at width {width} (measured: {widths})"
    allowed = [
        r
        for r in at_width
        if (step_mode is None or r.step_mode == step_mode) and (fuse is None or r.fuse == fuse)
    ]
    wanted = ", ".join(
        part for part in (step_mode or "", f"fuse {fuse}" if fuse is not None else "") if part
    )
    where = f"at width {width}" + (f" with {wanted}" if wanted else "")
    if not allowed:
        return None, f"no rate-table row for {method} {where}"
    by_setting: dict[Setting, list[Rate]] = {}
    for row in allowed:
        if row.image_size > image_size:
            continue  # a floor only upwards in size (_setting_choice)
        by_setting.setdefault(Setting(row.step_mode, row.fuse), []).append(row)
    choices = [
        _setting_choice(setting, group, device=devices[0], image_size=image_size)
        for setting, group in by_setting.items()
    ]
    if not choices:
        sizes = ", ".join(str(size) for size in sorted({r.image_size for r in allowed}))
        return None, (
            f"no rate-table row for {method} {where} at {image_size} px or below (measured: "
            f"{sizes} px; smaller images fill a GPU less, so a larger size's rate is not "
            "scaled down)"
        )
    best = max(choices, key=lambda c: (c.device_images_per_s, -c.setting.fuse))
    return best, best.describe()
