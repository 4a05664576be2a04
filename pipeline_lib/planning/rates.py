"""Measured training rates: the table ``benchmarks/bench_train.py --rates-out`` appends to and
the planner (``droc-plan --rates``) reads.

One CSV row per measurement, with the columns of :data:`COLUMNS`:

* ``device``: the device's name as torch reports it (``torch.cuda.get_device_name()``, e.g.
  ``NVIDIA H200``; on the CPU the processor's model name and thread count);
* ``kind``: ``cuda`` or ``cpu`` (the planner's ``--device``);
* ``width``: the network's width, the first-stage width of the ResNet-18 (64 in the
  paper; the config's ``embed.width``, the benchmarks' ``--width``), not an image size;
* ``image_size``: the side of the images the step trained on, 32 or 64 (``--image-size``);
* ``method``: the trained base method (``rotnet``, ``rotation``, ``denoising``,
  ``contrastive``, ``contrastive_da``);
* ``step_mode``: ``eager``, ``graph`` (the graph-captured step, CUDA only) or ``compiled``
  (the same with the network compiled by inductor), at any fuse (fused K under graph or
  compiled: the K models' own captured steps side by side on CUDA streams);
* ``fuse``: K, the models trained as one computation (1 = one model alone);
* ``images_per_s_per_model``: **training instances per second each model trains at**
  (the trainer's ``images_per_s``: source images, except contrastive DA's expanded copies,
  :func:`pipeline_lib.registry.instances_per_image`). For fuse 1
  the job's rate; for fuse K the K models' total divided by K (each model's share). The
  device's throughput in that setting is therefore ``images_per_s_per_model x fuse``
  (:attr:`Rate.device_images_per_s`), and that, not the per-model rate, decides which
  setting costs the fewest device-hours: K fused models each at a third of one model's
  alone rate still train K / 3 times the images per device-second. It is the **median** of
  ``repeats`` timed calls of ``steps`` steps each, after warm-up;
* ``images_per_s_min``, ``images_per_s_max``: the slowest and fastest of those calls (per
  model, as the median);
* ``repeats``: how many timed calls the median is of (1: a single sample);
* ``amp``, ``steps``: autocast dtype (``none`` on the CPU) and timed steps of each call;
* ``date``: when it was measured, ISO 8601 UTC (``2026-11-27T10:05:00Z``);
* ``command``: the command line that measured it.

Tables written before the last four columns existed (:data:`LEGACY_COLUMNS`) stay readable:
their rows were measured on 32x32 images in one timed call, so they read as ``image_size``
32, ``repeats`` 1 and min = max = the rate (:attr:`Rate.single_sample`). A table's rows are
appended under its own header, so new rows go to a table with the new header.

Files live in ``benchmarks/rates/<card>.csv`` (benchmarks/rates/README.md). This module is
plain ``csv``: the planner reads tables without importing torch.
"""

from __future__ import annotations

import csv
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipeline_lib.registry import STEP_MODES as TRAIN_STEP_MODES
from pipeline_lib.registry import TRAINED_METHODS

#: The columns of tables written before rates were medians of repeats (all 32x32 images).
LEGACY_COLUMNS: tuple[str, ...] = (
    "device",
    "kind",
    "width",
    "method",
    "step_mode",
    "fuse",
    "images_per_s_per_model",
    "amp",
    "steps",
    "date",
    "command",
)
#: The columns a legacy table lacks; a table has all of them or none.
SPREAD_COLUMNS: tuple[str, ...] = (
    "image_size",
    "repeats",
    "images_per_s_min",
    "images_per_s_max",
)
#: The table's columns, in the order written.
COLUMNS: tuple[str, ...] = (
    "device",
    "kind",
    "width",
    "image_size",
    "method",
    "step_mode",
    "fuse",
    "images_per_s_per_model",
    "images_per_s_min",
    "images_per_s_max",
    "repeats",
    "amp",
    "steps",
    "date",
    "command",
)
#: The image side of every row of a legacy table (bench_train.py trained on 32x32 then).
LEGACY_IMAGE_SIZE = 32
KINDS: tuple[str, ...] = ("cuda", "cpu")
#: What a row can have measured: every ``train.step_mode`` but ``auto`` (which resolves to one).
STEP_MODES: tuple[str, ...] = tuple(mode for mode in TRAIN_STEP_MODES if mode != "auto")


class RateTableError(ValueError):
    """A rate table that cannot be read; the message names the file, line and column."""


@dataclass(frozen=True)
class Spread:
    """The median of repeated timed measurements of one rate, and their range.

    A rate is the median of several timed calls, not one: a single call can land on a clock
    ramp, another process's burst or a garbage collection, and the range says how far one
    call could be from the next.
    """

    median: float
    low: float
    high: float
    repeats: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Spread:
        """The median, minimum and maximum of ``samples`` (one rate per timed call).

        Raises
        ------
        ValueError
            If ``samples`` is empty or holds a value that is not positive and finite.
        """
        values = [float(value) for value in samples]
        if not values:
            raise ValueError("no timed samples: a rate needs at least one timed call")
        bad = [value for value in values if not (value > 0 and math.isfinite(value))]
        if bad:
            raise ValueError(f"timed rates must be positive and finite, got {bad}")
        return cls(float(statistics.median(values)), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Spread:
        """The same measurement in other units (a group's total x 1 / fuse: per model)."""
        return Spread(self.median * factor, self.low * factor, self.high * factor, self.repeats)


def time_repeats(
    call: Callable[[], object],
    *,
    repeats: int,
    instances: int,
    clock: Callable[[], float] = time.perf_counter,
    sync: Callable[[], object] = lambda: None,
) -> Spread:
    """Instances per second of ``repeats`` timed calls of ``call``, each training ``instances``.

    ``sync`` runs before the clock starts and before it stops (``torch.cuda.synchronize`` on
    a GPU, whose calls return before their work is done); ``clock`` can be a fake timer.

    Raises
    ------
    ValueError
        If ``repeats`` < 1, or a call took no time on ``clock``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    samples = []
    for _ in range(repeats):
        sync()
        started = clock()
        call()
        sync()
        seconds = clock() - started
        if not seconds > 0:
            raise ValueError(f"a timed call took {seconds} s on the clock: no rate")
        samples.append(instances / seconds)
    return Spread.of(samples)


@dataclass(frozen=True)
class Rate:
    """One measurement: a method's per-model training rate in one setting on one device."""

    device: str
    kind: str
    width: int
    method: str
    step_mode: str
    fuse: int
    #: The median of ``repeats`` timed calls.
    images_per_s_per_model: float
    amp: str
    steps: int
    date: str
    command: str
    #: ``file:line`` it was read from (empty for rows not read from a file).
    where: str = ""
    #: Side of the images the step trained on.
    image_size: int = LEGACY_IMAGE_SIZE
    repeats: int = 1
    #: Slowest and fastest timed call (None: the median, as for a single sample).
    images_per_s_min: float | None = None
    images_per_s_max: float | None = None

    def __post_init__(self) -> None:
        for name in ("images_per_s_min", "images_per_s_max"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, self.images_per_s_per_model)

    @property
    def device_images_per_s(self) -> float:
        """Source images per device-second: all ``fuse`` models together."""
        return self.images_per_s_per_model * self.fuse

    @property
    def single_sample(self) -> bool:
        """One timed call (every row of a legacy table): no spread to judge it by."""
        return self.repeats == 1


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


def _field(row: dict[str, str], column: str, where: str) -> str:
    value = (row.get(column) or "").strip()
    if not value:
        raise RateTableError(f"{where}, column {column}: empty")
    return value


def _positive(row: dict[str, str], column: str, where: str, kind: type) -> float | int:
    text = _field(row, column, where)
    try:
        value = kind(text)
    except ValueError:
        raise RateTableError(
            f"{where}, column {column}: {text!r} is not a {kind.__name__}"
        ) from None
    if not value > 0:
        raise RateTableError(f"{where}, column {column}: {text!r} must be positive")
    return value


def _choice(row: dict[str, str], column: str, where: str, allowed: Sequence[str]) -> str:
    value = _field(row, column, where)
    if value not in allowed:
        raise RateTableError(f"{where}, column {column}: {value!r} is not one of {list(allowed)}")
    return value


def parse_row(row: dict[str, str], where: str, *, legacy: bool = False) -> Rate:
    """One CSV row as a :class:`Rate`; ``where`` (``file, line N``) prefixes any error.

    ``legacy``: a row of a table without :data:`SPREAD_COLUMNS` (32x32, a single sample).
    """
    median = float(_positive(row, "images_per_s_per_model", where, float))
    spread: dict[str, float | int] = {}
    if not legacy:
        spread = {
            "image_size": int(_positive(row, "image_size", where, int)),
            "repeats": int(_positive(row, "repeats", where, int)),
            "images_per_s_min": float(_positive(row, "images_per_s_min", where, float)),
            "images_per_s_max": float(_positive(row, "images_per_s_max", where, float)),
        }
        if not spread["images_per_s_min"] <= median <= spread["images_per_s_max"]:
            raise RateTableError(
                f"{where}, columns images_per_s_min/_per_model/_max: "
                f"{spread['images_per_s_min']} <= {median} <= {spread['images_per_s_max']} "
                "does not hold (the median lies within its range)"
            )
    return Rate(
        device=_field(row, "device", where),
        kind=_choice(row, "kind", where, KINDS),
        width=int(_positive(row, "width", where, int)),
        method=_choice(row, "method", where, TRAINED_METHODS),
        step_mode=_choice(row, "step_mode", where, STEP_MODES),
        fuse=int(_positive(row, "fuse", where, int)),
        images_per_s_per_model=median,
        amp=_field(row, "amp", where),
        steps=int(_positive(row, "steps", where, int)),
        date=_field(row, "date", where),
        command=(row.get("command") or "").strip(),
        where=where,
        **spread,  # type: ignore[arg-type]
    )


def read_rates(paths: Iterable[str | os.PathLike]) -> list[Rate]:
    """Every row of the rate tables ``paths`` (legacy tables too: :data:`LEGACY_COLUMNS`).

    Raises
    ------
    RateTableError
        On a missing file or column, a row with too many or too few fields, or a bad value;
        the message names the file, the line and the column.
    """
    rates: list[Rate] = []
    for path in map(Path, paths):
        try:
            text = path.read_text()
        except OSError as error:
            raise RateTableError(f"{path}: cannot read the rate table ({error})") from error
        reader = csv.DictReader(text.splitlines())
        fields = reader.fieldnames or []
        missing = [column for column in LEGACY_COLUMNS if column not in fields]
        spread = [column for column in SPREAD_COLUMNS if column in fields]
        if spread:  # all of them or none (a legacy table)
            missing += [column for column in SPREAD_COLUMNS if column not in fields]
        if missing:
            raise RateTableError(f"{path}, line 1: missing columns {missing}")
        for row in reader:
            where = f"{path}, line {reader.line_num}"
            if None in row or None in row.values():
                count = sum(v is not None for k, v in row.items() if k is not None)
                count += len(row.get(None) or [])  # type: ignore[call-overload]
                raise RateTableError(f"{where}: {count} fields where the header has {len(fields)}")
            rates.append(parse_row(row, where, legacy=not spread))
    return rates


def append_rates(path: str | os.PathLike, rates: Iterable[Rate]) -> None:
    """Append ``rates`` to the table at ``path``, writing the header if it is new or empty.

    Raises
    ------
    RateTableError
        If the table exists with other columns (a legacy table): its rows would not line
        up; write to a new table (the planner reads several).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.is_file() or path.stat().st_size == 0
    if not new:
        with open(path, newline="") as handle:
            header = tuple(next(csv.reader(handle), []))
        if header != COLUMNS:
            raise RateTableError(
                f"{path}, line 1: the header {list(header)} is not {list(COLUMNS)} (a table "
                "written before rates were medians of repeats?): append to a new table, "
                "e.g. another file in benchmarks/rates/; droc-plan --rates reads several"
            )
    with open(path, "a", newline="") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(COLUMNS)
        for rate in rates:
            writer.writerow(
                [
                    rate.device,
                    rate.kind,
                    rate.width,
                    rate.image_size,
                    rate.method,
                    rate.step_mode,
                    rate.fuse,
                    f"{rate.images_per_s_per_model:.5g}",
                    f"{rate.images_per_s_min:.5g}",
                    f"{rate.images_per_s_max:.5g}",
                    rate.repeats,
                    rate.amp,
                    rate.steps,
                    rate.date,
                    rate.command,
                ]
            )


class RateLog:
    """The rates one benchmark run measures, appended to ``path`` (if given) as they come.

    Each row is appended as soon as it is measured, so a benchmark that a time limit kills
    (benchmarks/gpu_session.sh) keeps the rates it had measured. Shared by bench_train.py
    and bench_streams.py, so both write the same columns the same way.
    """

    def __init__(
        self,
        path: str | os.PathLike | None,
        *,
        device: str,
        kind: str,
        width: int,
        amp: str,
        steps: int,
        image_size: int = LEGACY_IMAGE_SIZE,
        command: Sequence[str] | None = None,
    ) -> None:
        """``command``: the script and its arguments (default: the process's ``sys.argv``),
        for a benchmark called as a function."""
        self.path = path
        words = sys.argv if command is None else list(command)
        self.common = {
            "device": device,
            "kind": kind,
            "width": width,
            "amp": amp,
            "steps": steps,
            "image_size": image_size,
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": shlex.join(["python", *words]),
        }
        self.rows: list[Rate] = []

    def add(self, method: str, step_mode: str, fuse: int, total: Spread) -> None:
        """Record ``fuse`` models' total rate (median and range) per model (total / fuse).

        A run whose capture failed (``uncaptured``) measured neither mode cleanly: skipped.
        """
        if step_mode not in STEP_MODES:
            print(f"rates: {method} ran {step_mode!r}; not written to the rate table")
            return
        per_model = total.scaled(1 / fuse)
        row = Rate(
            method=method,
            step_mode=step_mode,
            fuse=fuse,
            images_per_s_per_model=per_model.median,
            images_per_s_min=per_model.low,
            images_per_s_max=per_model.high,
            repeats=per_model.repeats,
            **self.common,  # type: ignore[arg-type]
        )
        self.rows.append(row)
        if self.path is not None:
            append_rates(self.path, [row])

    def report(self) -> None:
        """Say where the rows went."""
        if self.path is not None:
            print(f"rates: {len(self.rows)} rows appended to {self.path}")


def settings_measured(rates: Iterable[Rate], *, kind: str, width: int) -> list[Setting]:
    """The (step mode, fuse) settings measured for any method on ``kind`` at ``width``."""
    found = {Setting(r.step_mode, r.fuse) for r in rates if r.kind == kind and r.width == width}
    return sorted(found, key=lambda s: (s.fuse, s.step_mode))


def _setting_choice(
    setting: Setting, rows: Sequence[Rate], *, device: str, image_size: int
) -> Choice:
    """The rate of one setting for ``image_size`` images, from the rows of that setting.

    Rows measured at ``image_size`` are used when there are any, else the 32x32 rows (else
    the nearest size), scaled by pixels. Of those, the latest day's rows: re-measuring (a
    faster trainer, another session) appends rows, and the newest day supersedes older
    ones; the median of that day's rows (each itself a median of repeats, or a legacy single
    sample) damps one noisy run.
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
    pixels (:func:`size_label`; the choice says which).

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
        widths = sorted({r.width for r in rows})
        return None, f"no rate-table row for {method} at width {width} (measured: {widths})"
    allowed = [
        r
        for r in at_width
        if (step_mode is None or r.step_mode == step_mode) and (fuse is None or r.fuse == fuse)
    ]
    if not allowed:
        wanted = ", ".join(
            part for part in (step_mode or "", f"fuse {fuse}" if fuse is not None else "") if part
        )
        return None, f"no rate-table row for {method} at width {width} with {wanted}"
    by_setting: dict[Setting, list[Rate]] = {}
    for row in allowed:
        by_setting.setdefault(Setting(row.step_mode, row.fuse), []).append(row)
    choices = [
        _setting_choice(setting, group, device=devices[0], image_size=image_size)
        for setting, group in by_setting.items()
    ]
    best = max(choices, key=lambda c: (c.device_images_per_s, -c.setting.fuse))
    return best, best.describe()
