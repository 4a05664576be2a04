"""The plan as text: one row per rule (and per trained method), the totals, and the best
measured setting with where each of its rates came from.

Where a number came from (a rate-table row, measured or extrapolated by pixels, a median of
repeats or one sample; a default) is a sentence that many rows share: the rows cite it as
``[n]`` and :class:`SourceNotes` prints each sentence once, below the tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pipeline_lib.config.gpus import GPU_PROFILE
from pipeline_lib.planning.best_setting import SettingCost, training_hours
from pipeline_lib.planning.costs import RuleCost
from pipeline_lib.planning.defaults import DEVICE_RULES, TRAINING_RULES


def _human_bytes(value: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


class SourceNotes:
    """Numbered sources: :meth:`cite` gives ``[n]`` marks, :meth:`legend` the texts once."""

    def __init__(self) -> None:
        self._numbers: dict[str, int] = {}

    def cite(self, sources: Iterable[str]) -> str:
        """``[n]`` marks of ``sources`` in number order; new sources get the next numbers."""
        for source in sorted(set(sources) - self._numbers.keys()):
            self._numbers[source] = len(self._numbers) + 1
        return " ".join(
            f"[{self._numbers[source]}]" for source in sorted(set(sources), key=self._numbers.get)
        )

    def legend(self) -> str:
        """``sources:`` and one line per cited source, or nothing if none was cited."""
        if not self._numbers:
            return ""
        lines = ["sources:"]
        lines += [f"  [{number}] {source}" for source, number in self._numbers.items()]
        return "\n".join(lines)


def _with_legend(text: str, notes: SourceNotes) -> str:
    legend = notes.legend()
    return f"{text}\n{legend}" if legend else text


def format_plan(
    name: str,
    costs: Mapping[str, RuleCost],
    *,
    device: str,
    notes: SourceNotes | None = None,
) -> str:
    """A plain-text table: jobs, hours (device-hours for the torch rules) and disk per rule.

    Sources are cited as ``[n]`` from ``notes``, whose legend the caller prints after all
    its tables; without ``notes`` the legend follows this table.
    """
    own = notes is None
    notes = SourceNotes() if notes is None else notes
    lines = [f"plan of {name} (device {device})"]
    lines.append(f"{'rule':<28}{'jobs':>8}{'hours':>12}  {'on':<7}{'disk':>12}  source")
    totals = {"jobs": 0, "device": 0.0, "cpu": 0.0, "disk": 0.0}
    unknown = False
    for rule, cost in costs.items():
        on = device if rule in DEVICE_RULES else "cpu"
        hours = "unknown" if cost.hours is None else f"{cost.hours:,.1f}"
        lines.append(
            f"{rule:<28}{cost.jobs:>8,}{hours:>12}  {on:<7}{_human_bytes(cost.disk_bytes):>12}"
            f"  {notes.cite(cost.sources)}"
        )
        totals["jobs"] += cost.jobs
        totals["disk"] += cost.disk_bytes
        if cost.hours is None:
            unknown = True
        else:
            totals["device" if rule in DEVICE_RULES else "cpu"] += cost.hours
        # Per method or variant, indented under its rule: what each one trains and costs.
        for method, part in cost.by_method.items():
            spec = part.spec
            part_hours = "unknown" if part.hours is None else f"{part.hours:,.2f}"
            subset = "all" if spec.train_size is None else f"{spec.train_size:,}"
            lines.append(
                f"  {method:<26}{part.jobs:>8,}{part_hours:>12}  {on:<7}{'':>12}  "
                f"{spec.base}, {spec.epochs} epochs, batch {spec.batch_size}, "
                f"train size {subset}; {notes.cite(part.sources)}"
            )
    device_hours = "unknown" if unknown else f"{totals['device']:,.1f}"
    lines.append(
        f"total: {totals['jobs']:,} jobs, {device_hours} {device}-hours on the torch rules, "
        f"{totals['cpu']:,.1f} CPU-hours on the others, {_human_bytes(totals['disk'])} of "
        f"outputs"
    )
    text = "\n".join(lines)
    return _with_legend(text, notes) if own else text


def format_settings(
    name: str,
    costs: Mapping[str, RuleCost],
    settings: Sequence[SettingCost],
    *,
    device: str,
    notes: SourceNotes | None = None,
) -> str:
    """The cheapest measured setting's device-hours beside the planned ones, then the rates.

    The first line names the cheapest setting; the torch rules other than training
    (embedding) are the same in every setting and are added to give the device-hours of the
    whole config. Then one line per setting: each trained base method with the ``[n]`` of
    where its rates came from (measured at the data's image size or extrapolated by pixels,
    a median of repeats or a single sample); ``notes`` as for :func:`format_plan`.
    """
    own = notes is None
    notes = SourceNotes() if notes is None else notes
    planned = training_hours(costs)
    other = sum(
        cost.hours or 0.0
        for rule, cost in costs.items()
        if rule in DEVICE_RULES and rule not in TRAINING_RULES
    )
    known = [s for s in settings if s.hours is not None]
    if not known or planned is None:
        return f"best setting of {name}: unknown (a training rate is missing)"
    best = min(known, key=lambda s: s.hours or 0.0)
    every = "; ".join(
        f"{s.setting}: {'unknown' if s.hours is None else f'{s.hours:,.1f}'}" for s in settings
    )
    lines = [
        f"best setting of {name}: {best.setting}: {best.hours:,.1f} {device}-hours of training, "
        f"{(best.hours or 0.0) + other:,.1f} on the torch rules (as configured: "
        f"{planned:,.1f} of training); every setting: {every}"
    ]
    for cost in settings:
        cited = [f"{method} {notes.cite(sources)}" for method, sources in cost.sources.items()]
        lines.append(f"  rates at {cost.setting}: {', '.join(cited)}")
    text = "\n".join(lines)
    return _with_legend(text, notes) if own else text


def format_without_gpu(jobs: Mapping[str, int], *, device: str) -> str:
    """The note for device rules whose jobs, as configured, ask for no GPU.

    A job uses CUDA only when given a ``gpu`` resource, and the rules declare ``gpu=0``: a
    plain ``snakemake --resources gpu=1`` runs them on the CPU, in far more hours than the
    plan's device-hours say.
    """
    listed = ", ".join(
        f"{rule} ({count:,} job{'s' if count != 1 else ''})" for rule, count in jobs.items()
    )
    return (
        f"note: as configured, {listed} ask for no GPU (their rules declare gpu=0): a "
        f"`snakemake --resources gpu=N` runs them on the CPU, not on {device} as costed above. "
        f"Run with --profile {GPU_PROFILE} (and plan with it), or give them a GPU with "
        f"--set-resources RULE:gpu=1."
    )
