"""The parity section of docs/reproduction.md: the traces' largest differences and the
side-by-side AUCs of the released code and this project, with a verdict per cell.

Reads ``side_by_side.csv`` (``side_by_side.py``) and the ``Difference`` records of every
``compare_<family>.py`` beside this file (each module's ``differences(fixtures)``), and
writes the section between the markers of :mod:`pipeline_lib.paper.reproduction`, which
keeps it when it regenerates the rest of the page. Project environment, no TensorFlow::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/parity_report.py          # write
    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/parity_report.py --check  # compare

The statistics. Seed ``s`` of one implementation and seed ``s`` of the other share nothing
but the number: the two draw their initial weights, epoch orders and views from different
generators (TensorFlow's and torch's), so the runs are two independent samples, not pairs.
Each (method, detector) cell therefore compares the two means with Welch's unequal-variance
t statistic (``scipy.stats.ttest_ind(equal_var=False)``): the difference ours - released
with its 95 % interval, and two one-sided tests (TOST) against a margin of +-1 AUC point.
**equivalent**: both one-sided tests reject at 5 % (the 90 % interval lies inside +-1);
**outside the margin**: the 90 % interval lies wholly beyond +1 or -1; **inconclusive**:
neither, so the cell needs more seeds (up to 10). How many would do is planned from the
pooled standard deviation: the smallest ``n`` a side with
``MARGIN / (sd * sqrt(2 / n)) >= t(1 - ALPHA, 2n - 2) + t(1 - (1 - POWER) / 2, 2n - 2)``,
the textbook sample size of a two-sample equivalence test at a true difference of zero, with
t quantiles in place of normal ones (``tests/reference/test_side_by_side.py`` checks the
power it plans by simulation).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scipy import stats

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RESULTS = HERE / "side_by_side.csv"
FIXTURES = REPO / "tests" / "fixtures" / "reference"
PAGE = REPO / "docs" / "reproduction.md"

sys.path.insert(0, str(HERE))

from parity import Difference  # noqa: E402 (beside this file, not a package)
from side_by_side_runs import (  # noqa: E402
    EPOCHS,
    INLIER,
    METHODS,
    OURS_ONLY,
    RELEASED_WIDTH,
    STEM_WIDTH,
    TRAIN_IMAGES,
    WIDTH,
)

#: The equivalence margin, in AUC points (x100).
MARGIN = 1.0
#: Each one-sided test's level; the two together give a 90 % interval inside the margin.
ALPHA = 0.05
#: Seeds a cell may grow to before its verdict stands as it is.
MAX_SEEDS = 10
#: The chance of an **equivalent** verdict the seeds-needed column plans for, when the two
#: implementations' true means are equal.
POWER = 0.8
#: The largest plan the column states; beyond it, the margin is out of reach at this spread.
PLAN_LIMIT = 1000

_METHOD_NAMES = {
    "rotnet": "RotNet",
    "rotation": "Rotation prediction",
    "contrastive_da": "Contrastive (DA)",
}
_DETECTOR_NAMES = {
    "kde": "KDE on f",
    "ocsvm": "OC-SVM on f",
    "rotation_released": "rotation classifier, prod_k p (released dscore)",
    "rotation_p0": "rotation classifier, p(0 | x) (released logit)",
    "rotation_classifier": "rotation classifier, sum_k p (the paper's)",
}


@dataclass(frozen=True)
class Comparison:
    """One (method, detector) cell: both samples, the difference and the verdict."""

    method: str
    detector: str
    ours: tuple[float, ...]
    released: tuple[float, ...]
    difference: float
    low: float
    high: float
    p_equivalence: float
    verdict: str
    #: Seeds a side at which TOST reaches :data:`POWER` given the pooled spread (None: more
    #: than :data:`PLAN_LIMIT`, or no spread known yet).
    seeds_needed: int | None = None

    @property
    def has_interval(self) -> bool:
        """Two seeds a side or more: an interval, a TOST p and a seeds plan exist."""
        return not math.isnan(self.low)

    @property
    def at_cap(self) -> bool:
        """Both samples have :data:`MAX_SEEDS` runs: no more are added, the verdict stands."""
        return min(len(self.ours), len(self.released)) >= MAX_SEEDS

    @property
    def excludes_zero(self) -> bool:
        """The 95 % interval leaves out 0: the sign of the difference is shown, whatever
        the verdict on its size."""
        return self.has_interval and (self.low > 0 or self.high < 0)


def read_results(path: Path = RESULTS) -> list[dict[str, str]]:
    """The side-by-side CSV's rows; every run must be of the recorded setting."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if (int(row["epochs"]), int(row["n_train"])) != (EPOCHS, TRAIN_IMAGES):
            raise ValueError(
                f"{path}: {row['impl']} {row['method']} seed {row['seed']} ran "
                f"{row['epochs']} epochs on {row['n_train']} images, not {EPOCHS} on "
                f"{TRAIN_IMAGES}"
            )
    return rows


def samples(rows: Sequence[Mapping[str, str]]) -> dict[tuple[str, str, str], dict[int, float]]:
    """AUCs keyed by (impl, method, detector), then seed."""
    found: dict[tuple[str, str, str], dict[int, float]] = {}
    for row in rows:
        key = (row["impl"], row["method"], row["detector"])
        found.setdefault(key, {})[int(row["seed"])] = float(row["auroc"])
    return found


def _welch(ours: Sequence[float], released: Sequence[float]) -> tuple[float, float, float]:
    """Welch's standard error of the difference of means and its degrees of freedom, and the
    difference itself."""
    va = statistics.variance(ours) / len(ours)
    vb = statistics.variance(released) / len(released)
    se = math.sqrt(va + vb)
    if se == 0:
        return statistics.fmean(ours) - statistics.fmean(released), 0.0, math.inf
    dof = (va + vb) ** 2 / (va**2 / (len(ours) - 1) + vb**2 / (len(released) - 1))
    return statistics.fmean(ours) - statistics.fmean(released), se, dof


def pooled_sd(ours: Sequence[float], released: Sequence[float]) -> float:
    """Both samples' standard deviation, pooled (each side's variance by its dof)."""
    dof = len(ours) + len(released) - 2
    squares = statistics.variance(ours) * (len(ours) - 1) + statistics.variance(released) * (
        len(released) - 1
    )
    return math.sqrt(squares / dof)


def seeds_for_equivalence(sd: float) -> int | None:
    """Seeds a side for TOST at +-MARGIN to say **equivalent** with probability POWER when
    the true difference is zero, at spread ``sd`` on both sides (the module docstring's
    formula); None beyond :data:`PLAN_LIMIT`."""
    if sd == 0:
        return 2
    for n in range(2, PLAN_LIMIT + 1):
        dof = 2 * n - 2
        needed = stats.t.ppf(1 - ALPHA, dof) + stats.t.ppf(1 - (1 - POWER) / 2, dof)
        if MARGIN / (sd * math.sqrt(2 / n)) >= needed:
            return n
    return None


def compare(
    method: str, detector: str, ours: Sequence[float], released: Sequence[float]
) -> Comparison:
    """The difference of means with Welch's 95 % interval and the TOST verdict at +-MARGIN.

    Raises
    ------
    ValueError
        With fewer than two seeds on a side (no variance, no interval).
    """
    if len(ours) < 2 or len(released) < 2:
        raise ValueError(
            f"{method} {detector}: {len(ours)} seed(s) of ours, {len(released)} released; "
            "an interval needs two on each side"
        )
    difference, se, dof = _welch(ours, released)
    if se == 0:  # both samples constant: the difference is known exactly
        low = high = difference
        p_lower = 0.0 if difference > -MARGIN else 1.0
        p_upper = 0.0 if difference < MARGIN else 1.0
    else:
        test = stats.ttest_ind(ours, released, equal_var=False)
        interval = test.confidence_interval(0.95)
        low, high = float(interval.low), float(interval.high)
        # H0: difference <= -MARGIN against > -MARGIN; H0: difference >= MARGIN against <.
        p_lower = float(
            stats.ttest_ind(
                [x + MARGIN for x in ours], released, equal_var=False, alternative="greater"
            ).pvalue
        )
        p_upper = float(
            stats.ttest_ind(
                [x - MARGIN for x in ours], released, equal_var=False, alternative="less"
            ).pvalue
        )
    p_equivalence = max(p_lower, p_upper)
    if p_equivalence < ALPHA:
        verdict = "equivalent"
    elif 1.0 - p_lower < ALPHA or 1.0 - p_upper < ALPHA:
        # The complementary one-sided test rejects: the difference is beyond the margin.
        verdict = "outside the margin"
    else:
        verdict = "inconclusive"
    return Comparison(
        method=method,
        detector=detector,
        ours=tuple(ours),
        released=tuple(released),
        difference=difference,
        low=low,
        high=high,
        p_equivalence=p_equivalence,
        verdict=verdict,
        seeds_needed=seeds_for_equivalence(pooled_sd(ours, released)),
    )


def comparisons(rows: Sequence[Mapping[str, str]]) -> list[Comparison]:
    """Every (method, detector) cell that either implementation scored, in table order.

    A cell with fewer than two seeds on a side has no interval: its verdict says what it
    lacks (a side not run yet, or a second seed), and its difference is that of the means
    when both sides have one.
    """
    found = samples(rows)
    cells = []
    for method in METHODS:
        for detector in (name for name in _DETECTOR_NAMES if name not in OURS_ONLY):
            ours = found.get(("ours", method, detector), {})
            released = found.get(("released", method, detector), {})
            if not ours and not released:
                continue
            ours_values = [ours[s] for s in sorted(ours)]
            released_values = [released[s] for s in sorted(released)]
            if len(ours_values) >= 2 and len(released_values) >= 2:
                cells.append(compare(method, detector, ours_values, released_values))
                continue
            missing = [name for name, got in (("released", released), ("ours", ours)) if not got]
            both = bool(ours_values and released_values)
            cells.append(
                Comparison(
                    method=method,
                    detector=detector,
                    ours=tuple(ours_values),
                    released=tuple(released_values),
                    difference=(
                        statistics.fmean(ours_values) - statistics.fmean(released_values)
                        if both
                        else math.nan
                    ),
                    low=math.nan,
                    high=math.nan,
                    p_equivalence=math.nan,
                    verdict=(
                        f"{' and '.join(missing)} not run yet"
                        if missing
                        else "too few seeds (two a side give an interval)"
                    ),
                )
            )
    return cells


def trace_differences(fixtures: Path = FIXTURES) -> list[Difference]:
    """The records of every ``compare_<family>.py`` beside this file, family by family."""
    records: list[Difference] = []
    for path in sorted(HERE.glob("compare_*.py")):
        module = importlib.import_module(path.stem)
        records.extend(module.differences(fixtures))
    return records


def _number(value: float) -> str:
    text = f"{value:.2g}" if value != 0 and abs(value) < 1e-2 else f"{value:.3g}"
    return text.replace("e-0", "e-").replace("e+0", "e+")


def _share_of_tolerance(record: Difference) -> float:
    """How much of its tolerance a record uses (0 when both are 0; inf past a zero one)."""
    if record.tolerance > 0:
        return record.largest / record.tolerance
    return 0.0 if record.largest == 0 else math.inf


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _traces_table(records: Sequence[Difference]) -> list[str]:
    """One row per family (its closest call: the record using most of its tolerance), then
    every record in a fold."""
    if not records:
        return ["No trace has been compared yet (no `benchmarks/reference/compare_*.py`)."]
    families: dict[str, list[Difference]] = {}
    for record in records:
        families.setdefault(record.family, []).append(record)
    lines = [
        "| family | comparisons | within tolerance | closest: quantity | largest difference "
        "| tolerance | measure |",
        "|---|---|---|---|---|---|---|",
    ]
    for family, found in families.items():
        closest = max(found, key=_share_of_tolerance)
        within = sum(record.within for record in found)
        lines.append(
            f"| {family} | {len(found)} | {within if within < len(found) else 'all'} "
            f"| {_cell(closest.quantity)} | {_number(closest.largest)} "
            f"| {_number(closest.tolerance)} | {_cell(closest.measure)} |"
        )
    lines += [
        "",
        "<details><summary>Every comparison</summary>",
        "",
        "| family | quantity | largest difference | tolerance | measure | within |",
        "|---|---|---|---|---|---|",
    ]
    for record in records:
        lines.append(
            f"| {record.family} | {_cell(record.quantity)} | {_number(record.largest)} "
            f"| {_number(record.tolerance)} | {_cell(record.measure)} "
            f"| {'yes' if record.within else '**no**'} |"
        )
    return [*lines, "", "</details>"]


def _mean_sd(values: Sequence[float]) -> str:
    if not values:
        return "not run yet"
    if len(values) == 1:
        return f"{values[0]:.2f} (1)"
    return f"{statistics.fmean(values):.2f} +- {statistics.stdev(values):.2f} ({len(values)})"


def _signed(value: float, pattern: str) -> str:
    """``pattern`` filled with the value, or a dash where there is none (NaN)."""
    return "-" if math.isnan(value) else pattern.format(value)


def _seeds_needed(cell: Comparison) -> str:
    if not cell.has_interval:
        return "-"
    return f"> {PLAN_LIMIT}" if cell.seeds_needed is None else str(cell.seeds_needed)


def _side_by_side_table(cells: Sequence[Comparison]) -> list[str]:
    if not cells:
        return ["No side-by-side run has finished yet."]
    lines = [
        "| method | score | released, mean +- sd (seeds) | ours, mean +- sd (seeds) "
        "| ours - released | 95 % interval | TOST p | verdict | seeds a side for a verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        lines.append(
            f"| {_METHOD_NAMES[cell.method]} | {_cell(_DETECTOR_NAMES[cell.detector])} "
            f"| {_mean_sd(cell.released)} | {_mean_sd(cell.ours)} "
            f"| {_signed(cell.difference, '{:+.2f}')} "
            f"| {f'[{cell.low:+.2f}, {cell.high:+.2f}]' if cell.has_interval else '-'} "
            f"| {_signed(cell.p_equivalence, '{:.3f}')} | **{cell.verdict}** "
            f"| {_seeds_needed(cell)} |"
        )
    return lines


def _ours_only_table(rows: Sequence[Mapping[str, str]]) -> list[str]:
    found = samples(rows)
    lines = []
    for method in METHODS:
        for detector in OURS_ONLY:
            values = found.get(("ours", method, detector))
            if values:
                ordered = [values[s] for s in sorted(values)]
                lines.append(
                    f"| {_METHOD_NAMES[method]} | {_cell(_DETECTOR_NAMES[detector])} "
                    f"| {_mean_sd(ordered)} |"
                )
    if not lines:
        return []
    return [
        "Scores of this project that the released code does not compute:",
        "",
        "| method | score | ours, mean +- sd (seeds) |",
        "|---|---|---|",
        *lines,
        "",
    ]


def _wall_time_table(rows: Sequence[Mapping[str, str]]) -> list[str]:
    runs: dict[tuple[str, str], dict[int, tuple[float, float, int]]] = {}
    for row in rows:
        runs.setdefault((row["method"], row["impl"]), {})[int(row["seed"])] = (
            float(row["train_seconds"]),
            float(row["eval_seconds"]),
            int(row["steps"]),
        )
    if not runs:
        return []
    lines = [
        "| method | implementation | runs | steps | training, median s | scoring, median s |",
        "|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        for impl in ("released", "ours"):
            seeds = runs.get((method, impl))
            if not seeds:
                continue
            train = statistics.median(value[0] for value in seeds.values())
            score = statistics.median(value[1] for value in seeds.values())
            steps = sorted({value[2] for value in seeds.values()})
            lines.append(
                f"| {_METHOD_NAMES[method]} | {impl} | {len(seeds)} "
                f"| {', '.join(str(s) for s in steps)} | {train:.0f} | {score:.0f} |"
            )
    return lines


def _codes(rows: Sequence[Mapping[str, str]]) -> str:
    codes = sorted({row["code"] for row in rows})
    return ", ".join(f"`{code}`" for code in codes) if codes else "none yet"


def traces_part(records: Sequence[Difference]) -> list[str]:
    """The section's first part: the traces' comparisons (``compare_*.py``)."""
    return [
        "### The traces",
        "",
        "Fixed inputs through both implementations (`benchmarks/reference/README.md`; "
        "`tests/reference/` asserts every comparison within its tolerance, which each "
        "comparison derives from float32 rounding and summation order or from a "
        "two-sample test). Per family the comparison that uses most of its tolerance:",
        "",
        *_traces_table(records),
    ]


def _cell_list(lead: str, cells: Sequence[Comparison]) -> list[str]:
    """A paragraph naming the cells after ``lead``; nothing when there are none."""
    if not cells:
        return []
    return [lead + ": " + "; ".join(f"{cell.method} {cell.detector}" for cell in cells) + ".", ""]


def side_by_side_part(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The section's second part: the side-by-side AUCs of ``side_by_side.csv``."""
    cells = comparisons(rows)
    pending = [cell for cell in cells if cell.verdict not in ("equivalent", "outside the margin")]
    at_cap = [cell for cell in pending if cell.at_cap]
    growing = [cell for cell in pending if not cell.at_cap]
    beyond = [
        cell
        for cell in growing
        if cell.has_interval and (cell.seeds_needed is None or cell.seeds_needed > MAX_SEEDS)
    ]
    reachable = [cell for cell in growing if cell not in beyond]
    more = [
        *_cell_list(
            f"Cells at the cap of {MAX_SEEDS} seeds a side without a verdict, which stands "
            "as inconclusive at this budget (the last column gives the seeds a side a "
            "verdict would take)",
            at_cap,
        ),
        *_cell_list(
            f"Cells without a verdict take more runs (up to {MAX_SEEDS} seeds a side, "
            "`side_by_side.py --seeds`; finished runs are kept)",
            reachable,
        ),
        *_cell_list(
            f"Cells whose spread puts a verdict beyond {MAX_SEEDS} seeds a side (more seeds "
            f"narrow their interval, but a +-{MARGIN:g} point verdict at this budget is "
            "unlikely)",
            beyond,
        ),
    ]
    more += _cell_list(
        "Cells whose 95 % interval leaves out 0, so that the two implementations differ "
        "there at this budget whatever the verdict on the size (each interval leaves out "
        f"a true 0 one time in 20, and {sum(cell.has_interval for cell in cells)} cells "
        "have one; the scores of one method come from the same models)",
        [cell for cell in cells if cell.excludes_zero],
    )
    return [
        "### Side by side at a CPU budget",
        "",
        f"Both implementations train the paper-named recipes on the first {TRAIN_IMAGES:,} "
        f"training images of CIFAR-10 `{INLIER}` (the order of the data files), ResNet-18 "
        f"at width {RELEASED_WIDTH:g} (`embed.width` {WIDTH}) with the released "
        f"{STEM_WIDTH}-channel stem, {EPOCHS} epochs, and score the whole 10,000-image test "
        "split; AUC x 100, one run per seed. The released code starts each layer from its "
        "own seeded initializer, as under the TensorFlow 2.3 of the paper "
        '(benchmarks/reference/README.md, "Adapters"). The seeds of the two implementations '
        "draw different random numbers, so "
        "the samples are independent, not paired: the interval is Welch's, and the verdict "
        f"is two one-sided Welch tests (TOST) at a margin of +-{MARGIN:g} point, each at "
        f"{ALPHA:g}: **equivalent** when the 90 % interval lies inside the margin, "
        "**outside the margin** when it lies beyond it, else **inconclusive** "
        "(`benchmarks/reference/parity_report.py`). The last column plans the seeds a side "
        f"at which an equal pair of implementations is called **equivalent** with "
        f"probability {POWER:g}, at the two samples' pooled standard deviation: where it "
        f"exceeds {MAX_SEEDS}, seed-to-seed spread at this budget is too wide for a "
        f"+-{MARGIN:g} point verdict.",
        "",
        *_side_by_side_table(cells),
        "",
        *more,
        *_ours_only_table(rows),
        "Wall time per run on the 2-core CPU that ran them, shared with other work (so "
        "indicative only), one thread each (`--threads 1`):",
        "",
        *_wall_time_table(rows),
        "",
        f"Per-seed AUCs: `benchmarks/reference/side_by_side.csv`; code that ran: {_codes(rows)}.",
    ]


def build_section(rows: Sequence[Mapping[str, str]], records: Sequence[Difference]) -> str:
    """The section's Markdown, markers included."""
    from pipeline_lib.paper.reproduction import PARITY_END, PARITY_START

    lines = [
        PARITY_START,
        "## Parity with the released code",
        "",
        "The authors' code (google-research/deep_representation_one_class) runs on a CPU "
        "under a current TensorFlow; `benchmarks/reference/` runs it, with the adapters its "
        "README lists, as the oracle of this implementation.",
        "",
        *traces_part(records),
        "",
        *side_by_side_part(rows),
        PARITY_END,
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the section into the page (or with ``--check`` compare); returns the exit code."""
    from pipeline_lib.paper.reproduction import replace_parity_section

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=RESULTS)
    parser.add_argument("--page", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    args = parser.parse_args(argv)
    rows = read_results(args.csv)
    section = build_section(rows, trace_differences())
    current = args.page.read_text()
    page = replace_parity_section(current, section)
    for cell in comparisons(rows):
        print(
            f"{cell.method:15s} {cell.detector:20s} {cell.difference:+6.2f} "
            f"[{cell.low:+6.2f}, {cell.high:+6.2f}] TOST p {cell.p_equivalence:.3f} "
            f"{cell.verdict} ({len(cell.released)} released, {len(cell.ours)} ours)"
        )
    if args.check:
        if page != current:
            print(f"{args.page}: the parity section is out of date: run {Path(__file__).name}")
            return 1
        return 0
    args.page.write_text(page)
    print(f"wrote the parity section of {args.page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
