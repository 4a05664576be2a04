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
* ``command``: the command line that measured it;
* the job's costs besides its steps (:class:`Overheads`; empty where the benchmark did not
  measure them): ``capture_s``, the first epoch's compilation and graph capture beyond a
  steady epoch, once per job; ``epoch_end_s``, the trainer's end of each epoch
  (divergence check and history record, every model of the setting); ``checkpoint_s``, one
  checkpoint of every model; ``embed_images_per_s``, images per second the network embeds
  in inference (the ``embed_trained`` job's forward passes; fuse-1 rows only).

Tables written before the spread columns (:data:`SPREAD_COLUMNS`; their header is
:data:`LEGACY_COLUMNS`) stay readable: their rows were measured on 32x32 images in one
timed call, so they read as ``image_size`` 32, ``repeats`` 1 and min = max = the rate
(:attr:`Rate.single_sample`). Tables written
before the overhead columns (:data:`OVERHEAD_COLUMNS`) read as rows without overheads. A
table's rows are appended under its own header, so new rows go to a table with the new
header.

Files live in ``benchmarks/rates/<card>.csv`` (benchmarks/rates/README.md). This module is
plain ``csv``: the planner reads tables without importing torch. Timing the rows is
:mod:`pipeline_lib.planning.timing`; choosing a plan's rate among them,
:mod:`pipeline_lib.planning.rate_choice`.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline_lib.registry import STEP_MODES as TRAIN_STEP_MODES
from pipeline_lib.registry import method_ids

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
#: What a job costs besides its steps, and the embedding rate; a table has all or none, and
#: an empty value means not measured.
OVERHEAD_COLUMNS: tuple[str, ...] = (
    "capture_s",
    "epoch_end_s",
    "checkpoint_s",
    "embed_images_per_s",
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
    *OVERHEAD_COLUMNS,
)
#: The image side of every row of a legacy table (bench_train.py trained on 32x32 then).
LEGACY_IMAGE_SIZE = 32
KINDS: tuple[str, ...] = ("cuda", "cpu")
#: What a row can have measured: every ``train.step_mode`` but ``auto`` (which resolves to one).
STEP_MODES: tuple[str, ...] = tuple(mode for mode in TRAIN_STEP_MODES if mode != "auto")


class RateTableError(ValueError):
    """A rate table that cannot be read; the message names the file, line and column."""


@dataclass(frozen=True)
class Overheads:
    """What a training job costs besides its steps, as measured for one setting.

    A rate alone undercounts a job: the first epoch compiles and captures the step (20 s of
    the 774 s full RotNet cell on an H200), and every epoch ends with a host sync and every
    few epochs a checkpoint. Seconds for the setting's whole group of ``fuse`` models.
    """

    #: Once per job: the first epoch's time beyond a steady epoch's.
    capture_s: float
    #: Per epoch: divergence check and history record.
    epoch_end_s: float
    #: Per checkpoint written.
    checkpoint_s: float

    def times(self, factor: int) -> Overheads:
        """The overheads of ``factor`` such groups (separate runs, one after the other)."""
        return Overheads(
            self.capture_s * factor, self.epoch_end_s * factor, self.checkpoint_s * factor
        )

    def describe(self) -> str:
        """E.g. ``capture 20.0 s, epoch end 4.1 ms, checkpoint 0.31 s`` (a plan's source)."""
        return (
            f"capture {self.capture_s:.1f} s, epoch end {1000 * self.epoch_end_s:.1f} ms, "
            f"checkpoint {self.checkpoint_s:.2f} s"
        )

    def job_seconds(self, epochs: int, checkpoint_every: int) -> float:
        """The overhead of a job of ``epochs`` epochs that checkpoints every
        ``checkpoint_every`` and after its last (as the trainer's ``checkpoint_due``)."""
        checkpoints = epochs // checkpoint_every + (1 if epochs % checkpoint_every else 0)
        return self.capture_s + epochs * self.epoch_end_s + checkpoints * self.checkpoint_s


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
    #: None where not measured (older tables; benchmarks that do not time them).
    overheads: Overheads | None = None
    embed_images_per_s: float | None = None

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


def _optional(row: dict[str, str], column: str, where: str, *, zero: bool) -> float | None:
    """An overhead column's value: None when empty (not measured), else a finite float,
    positive or (``zero``) non-negative."""
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise RateTableError(f"{where}, column {column}: {text!r} is not a float") from None
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        bound = "non-negative" if zero else "positive"
        raise RateTableError(f"{where}, column {column}: {text!r} must be {bound} and finite")
    return value


def _overheads(row: dict[str, str], where: str) -> Overheads | None:
    """The row's :class:`Overheads`: all three measured or none (empty)."""
    values = {c: _optional(row, c, where, zero=True) for c in OVERHEAD_COLUMNS[:3]}
    given = [c for c, value in values.items() if value is not None]
    if not given:
        return None
    if len(given) < len(values):
        missing = [c for c in values if c not in given]
        raise RateTableError(f"{where}, columns {missing}: empty where {given} are measured")
    return Overheads(**values)  # type: ignore[arg-type]


def _choice(row: dict[str, str], column: str, where: str, allowed: Sequence[str]) -> str:
    value = _field(row, column, where)
    if value not in allowed:
        raise RateTableError(f"{where}, column {column}: {value!r} is not one of {list(allowed)}")
    return value


def parse_row(row: dict[str, str], where: str, *, legacy: bool = False) -> Rate:
    """One CSV row as a :class:`Rate`; ``where`` (``file, line N``) prefixes any error.

    ``legacy``: a row of a table without :data:`SPREAD_COLUMNS` (32x32, a single sample).
    Overhead columns are read where the row has them (:data:`OVERHEAD_COLUMNS`).
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
        method=_choice(row, "method", where, method_ids(trained=True)),
        step_mode=_choice(row, "step_mode", where, STEP_MODES),
        fuse=int(_positive(row, "fuse", where, int)),
        images_per_s_per_model=median,
        amp=_field(row, "amp", where),
        steps=int(_positive(row, "steps", where, int)),
        date=_field(row, "date", where),
        command=(row.get("command") or "").strip(),
        where=where,
        overheads=_overheads(row, where),
        embed_images_per_s=_optional(row, "embed_images_per_s", where, zero=False),
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
        if any(column in fields for column in OVERHEAD_COLUMNS):  # all or none, as well
            missing += [column for column in OVERHEAD_COLUMNS if column not in fields]
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
                "written before rates were medians of repeats, or before the overhead "
                "columns?): append to a new table, e.g. another file in benchmarks/rates/; "
                "droc-plan --rates reads several"
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
                    *_overhead_cells(rate),
                ]
            )


def _overhead_cells(rate: Rate) -> list[str]:
    """The overhead columns of ``rate``'s row: empty where not measured."""
    overheads = rate.overheads
    cells = (
        ["", "", ""]
        if overheads is None
        else [
            f"{overheads.capture_s:.4g}",
            f"{overheads.epoch_end_s:.4g}",
            f"{overheads.checkpoint_s:.4g}",
        ]
    )
    embed = rate.embed_images_per_s
    return [*cells, "" if embed is None else f"{embed:.5g}"]
