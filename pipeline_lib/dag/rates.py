"""Measured training rates: the table ``benchmarks/bench_train.py --rates-out`` appends to and
the planner (``droc-plan --rates``) reads.

One CSV row per measurement, with the columns of :data:`COLUMNS`:

* ``device``: the device's name as torch reports it (``torch.cuda.get_device_name()``, e.g.
  ``NVIDIA H200``; on the CPU the processor's model name and thread count);
* ``kind``: ``cuda`` or ``cpu`` (the planner's ``--device``);
* ``width``: first-stage width of the ResNet-18 (64 in the paper);
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
  alone rate still train K / 3 times the images per device-second;
* ``amp``, ``steps``: autocast dtype (``none`` on the CPU) and timed steps of the benchmark;
* ``date``: when it was measured, ISO 8601 UTC (``2026-11-27T10:05:00Z``);
* ``command``: the command line that measured it.

Files live in ``benchmarks/rates/<card>.csv`` (benchmarks/rates/README.md). This module is
plain ``csv``: the planner reads tables without importing torch.
"""

from __future__ import annotations

import csv
import os
import shlex
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pipeline_lib.registry import STEP_MODES as TRAIN_STEP_MODES
from pipeline_lib.registry import TRAINED_METHODS

#: The table's columns, in the order written.
COLUMNS: tuple[str, ...] = (
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
KINDS: tuple[str, ...] = ("cuda", "cpu")
#: What a row can have measured: every ``train.step_mode`` but ``auto`` (which resolves to one).
STEP_MODES: tuple[str, ...] = tuple(mode for mode in TRAIN_STEP_MODES if mode != "auto")


class RateTableError(ValueError):
    """A rate table that cannot be read; the message names the file, line and column."""


@dataclass(frozen=True)
class Rate:
    """One measurement: a method's per-model training rate in one setting on one device."""

    device: str
    kind: str
    width: int
    method: str
    step_mode: str
    fuse: int
    images_per_s_per_model: float
    amp: str
    steps: int
    date: str
    command: str
    #: ``file:line`` it was read from (empty for rows not read from a file).
    where: str = ""

    @property
    def device_images_per_s(self) -> float:
        """Source images per device-second: all ``fuse`` models together."""
        return self.images_per_s_per_model * self.fuse


@dataclass(frozen=True)
class Setting:
    """How models train: step mode and fuse factor (the config's train.step_mode, train.fuse)."""

    step_mode: str
    fuse: int

    def __str__(self) -> str:
        return f"{self.step_mode}, fuse {self.fuse}"


@dataclass(frozen=True)
class Choice:
    """The rate the planner uses for one method: its setting and where it was measured."""

    setting: Setting
    images_per_s_per_model: float
    device: str
    date: str

    @property
    def device_images_per_s(self) -> float:
        """Source images per device-second of the setting (per-model rate x fuse)."""
        return self.images_per_s_per_model * self.setting.fuse

    def describe(self) -> str:
        """E.g. ``graph, fuse 1, measured NVIDIA H200 2026-11-27`` (the plan's source column)."""
        return f"{self.setting}, measured {self.device} {self.date[:10]}"


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


def parse_row(row: dict[str, str], where: str) -> Rate:
    """One CSV row as a :class:`Rate`; ``where`` (``file, line N``) prefixes any error."""
    return Rate(
        device=_field(row, "device", where),
        kind=_choice(row, "kind", where, KINDS),
        width=int(_positive(row, "width", where, int)),
        method=_choice(row, "method", where, TRAINED_METHODS),
        step_mode=_choice(row, "step_mode", where, STEP_MODES),
        fuse=int(_positive(row, "fuse", where, int)),
        images_per_s_per_model=float(_positive(row, "images_per_s_per_model", where, float)),
        amp=_field(row, "amp", where),
        steps=int(_positive(row, "steps", where, int)),
        date=_field(row, "date", where),
        command=(row.get("command") or "").strip(),
        where=where,
    )


def read_rates(paths: Iterable[str | os.PathLike]) -> list[Rate]:
    """Every row of the rate tables ``paths``.

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
        missing = [column for column in COLUMNS if column not in (reader.fieldnames or [])]
        if missing:
            raise RateTableError(f"{path}, line 1: missing columns {missing}")
        for row in reader:
            where = f"{path}, line {reader.line_num}"
            if None in row or None in row.values():
                fields = sum(v is not None for k, v in row.items() if k is not None)
                fields += len(row.get(None) or [])  # type: ignore[call-overload]
                raise RateTableError(
                    f"{where}: {fields} fields where the header has {len(reader.fieldnames or [])}"
                )
            rates.append(parse_row(row, where))
    return rates


def append_rates(path: str | os.PathLike, rates: Iterable[Rate]) -> None:
    """Append ``rates`` to the table at ``path``, writing the header if it is new or empty."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.is_file() or path.stat().st_size == 0
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
                    rate.method,
                    rate.step_mode,
                    rate.fuse,
                    f"{rate.images_per_s_per_model:.5g}",
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
    ) -> None:
        self.path = path
        self.common = {
            "device": device,
            "kind": kind,
            "width": width,
            "amp": amp,
            "steps": steps,
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": shlex.join(["python", *sys.argv]),
        }
        self.rows: list[Rate] = []

    def add(self, method: str, step_mode: str, fuse: int, total_images_per_s: float) -> None:
        """Record ``fuse`` models' total rate as the per-model rate (total / fuse).

        A run whose capture failed (``uncaptured``) measured neither mode cleanly: skipped.
        """
        if step_mode not in STEP_MODES:
            print(f"rates: {method} ran {step_mode!r}; not written to the rate table")
            return
        row = Rate(
            method=method,
            step_mode=step_mode,
            fuse=fuse,
            images_per_s_per_model=total_images_per_s / fuse,
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


def _setting_rate(rows: Sequence[Rate]) -> tuple[float, str]:
    """Median per-model rate of the latest day's rows of one setting, and that day.

    Re-measuring (a faster trainer, another session) appends rows; the newest day supersedes
    older ones, and the median of one day's repeats (each bench_train run measures eager
    again) damps one noisy run.
    """
    day = max(row.date[:10] for row in rows)
    latest = [row.images_per_s_per_model for row in rows if row.date[:10] == day]
    return float(statistics.median(latest)), day


def choose_rate(
    rates: Sequence[Rate],
    *,
    kind: str,
    width: int,
    method: str,
    step_mode: str | None = None,
    fuse: int | None = None,
) -> tuple[Choice | None, str]:
    """The best measured setting of ``method`` on ``kind`` at ``width``, or why there is none.

    Best = the most training instances per device-second (per-model rate x fuse), among the
    settings allowed by ``step_mode`` and ``fuse`` (``None``: any).

    Returns
    -------
    (Choice or None, str)
        The choice, and the text for the plan's source column (the choice described, or what
        was missing, e.g. a table measured at another width: rates are never scaled).

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
    choices = []
    for setting, group in by_setting.items():
        rate, day = _setting_rate(group)
        choices.append(Choice(setting, rate, devices[0], day))
    best = max(choices, key=lambda c: (c.device_images_per_s, -c.setting.fuse))
    return best, best.describe()
