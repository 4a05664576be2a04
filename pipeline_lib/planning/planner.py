"""Cost planner: the jobs of a config per rule, and what they will cost, before running them.

``python -m pipeline_lib.planning.planner --configfile config/paper.yaml`` (or ``droc-plan``) plans
the jobs of the DAG Snakemake builds for the config, every one as ``--forceall`` would plan
(:mod:`pipeline_lib.planning.jobs`, through Snakemake's API: its job counts are Snakemake's
own), then projects per rule (:mod:`pipeline_lib.planning.costs`):

* **device-hours**: training jobs cost ``models x epochs x instances per epoch / instances
  per device-second`` (an instance is a source image, except for contrastive DA with
  ``da_batching: expanded``, which trains on each image and its 3 rotated copies: 4
  instances; every rate, measured or default, counts instances), with each variant's own
  epochs, batch size, base method and training subset taken from the grid functions the
  DAG itself uses (:mod:`pipeline_lib.config.grids`: ``base_method``, ``variant_training``,
  ``variant_train_size``), so a 60-epoch variant costs 60 epochs; every other job a fixed
  number of seconds. The torch rules (``DEVICE_RULES``, :mod:`pipeline_lib.planning.defaults`)
  are counted as device-hours on ``--device``; the rest as CPU-hours.
  Training rates come, in this order, from

  1. ``--images-per-s METHOD=RATE`` (one job alone);
  2. rate tables (``--rates FILE ...``, :mod:`pipeline_lib.planning.rates`, written by
     ``benchmarks/bench_train.py --rates-out``): the rows of ``--device``'s kind, the
     config's ``embed.width`` and the job's base method, in the setting the config runs: a
     ``train_representation`` job at fuse 1 in ``train.step_mode`` (absent or ``auto``:
     ``graph`` on CUDA when a graph row exists, else ``eager``); a ``train_fused`` job of m
     models at the fused-m rate in ``train.step_mode`` (the same rule, among fuse-m rows),
     else as m separate eager trainings (an upper bound). A table measured at another width
     is reported in the source column, never scaled. A job on 64x64 data (Cat-vs-Dog,
     CelebA: ``DATASET_SIZES`` of :mod:`pipeline_lib.planning.sizes`) takes a row measured
     on 64x64 images when the table has one for that setting, else the 32x32 row scaled by
     pixels (a 64x64 image costs 4x); the source column says which (``64 px as measured``
     or ``64 px extrapolated from 32 px``) and whether the rate is a median of repeated
     timed calls or a single sample (every row of a table written before the ``repeats``
     column);
  3. measurements of this config's earlier runs (per-epoch ``images_per_s`` in the
     ``train_history.json`` files of that device and width) in its experiment folder,
     ``results/<experiment>/`` (:mod:`pipeline_lib.config.experiment`; ``--directory``
     names another), which holds no other config's runs;
  4. the methods' fallback rates (:attr:`pipeline_lib.registry.MethodSpec.rates`,
     one job alone, width 64; on CUDA with the graph-captured step, the default there).

  Sources 1, 3 and 4 are 32x32 rates: a 64x64 job scales them by pixels, and says so.

  With rate tables, a training job also pays the overheads its setting's rows measured
  (:class:`~pipeline_lib.planning.rates.Overheads`: compilation and capture once, an epoch
  end per epoch, a checkpoint every ``train.checkpoint_every`` epochs and after the
  last), or the plan says they are left out; an ``embed_trained`` job costs its forward
  passes at the tables' embedding rate where one was measured.

  A rate given on the command line is the most deliberate; a table is chosen explicitly
  and names its device, setting and date, while histories are whatever happens to lie in
  the experiment's folder (any code version, any load), so they rank below it. Seconds of
  the other rules: the median wall time ``s`` of each rule's ``benchmark:`` files under
  that folder's ``benchmarks/``, else ``DEFAULT_JOB_SECONDS``.
* **best setting** (with rate tables): the training hours of the config at each measured
  (step mode, fuse) setting, its models regrouped as ``train.fuse`` would group them
  (:func:`pipeline_lib.planning.best_setting.setting_costs`), and the cheapest: what to put
  in the config's ``train`` section.
  Cheapest means fewest device-hours, i.e. most training instances per device-second (per-model
  rate x fuse), not the highest per-model rate: K fused models each slower than one alone
  can still train more images a second together; one line per setting and method says
  where its rate came from. The last group of a data set's models
  may be smaller than K: costed at its own fused rate, else (graph) at the rate of the most
  models side by side measured below it, else (eager) as separate runs. A config with
  ``studies`` is also costed without them (the main table alone).
* **disk**: the median size of the rule's existing outputs when there are any, else an
  estimate from the data set sizes in ``DATASET_SIZES``.

The torch rules are costed on ``--device``; where the run's resources give their jobs no
GPU (the rules declare ``gpu=0``; ``--profile profiles/gpu`` gives them one), the plan says
so: such jobs would run on the CPU.

Each ``--configfile`` is planned on its own (a study file gives that study's jobs; jobs that
two studies share are counted in both, but run once when the studies run together).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.config.experiment import default_experiment, experiment_folder
from pipeline_lib.config.grids import merge_datasets, study_grids
from pipeline_lib.config.validate import validate_config
from pipeline_lib.planning.best_setting import SettingCost, setting_costs
from pipeline_lib.planning.costs import RuleCost, plan_costs
from pipeline_lib.planning.defaults import DEVICE_RULES
from pipeline_lib.planning.jobs import REPO, PlanError, profile_resources, snakemake_jobs
from pipeline_lib.planning.rates import Rate, RateTableError, read_rates
from pipeline_lib.planning.report import (
    SourceNotes,
    format_plan,
    format_settings,
    format_without_gpu,
)
from pipeline_lib.registry import RATE_DEVICES, is_trained, method_ids
from pipeline_lib.registry.plugins import METHOD_GROUP, installed_plugins

#: The schema the Snakefile validates a config with (defaults filled, studies merged).
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def planned_config(configfile: str | os.PathLike) -> dict[str, Any]:
    """``configfile`` as the Snakefile sees it: validated, defaults filled, studies merged.

    The data sets of every grid (the included studies' too) are put under ``datasets`` with
    their shared reader settings (:func:`pipeline_lib.config.grids.merge_datasets`), so a
    study-only data set is sized with its own subsampling.

    Raises
    ------
    PlanError
        If the config does not validate (the message names the key).
    """
    raw = yaml.safe_load(Path(configfile).read_text()) or {}
    raw.setdefault("experiment", default_experiment([configfile]))  # as the Snakefile names it
    try:
        config = validate_config(raw, SCHEMA)
        grids = study_grids(config, config["studies"])
    except ValueError as error:
        raise PlanError(f"invalid config: {error}") from error
    return {**config, "datasets": merge_datasets(grids)}


@dataclass(frozen=True)
class PlanResult:
    """A planned config: Snakemake's job counts, the costs, and (with rate tables) settings.

    ``without_gpu``: the device rules (``DEVICE_RULES``) whose jobs ask for no GPU -> their
    job count. Costed on ``--device`` all the same; as configured they would run on the CPU.
    """

    stats: dict[str, int]
    costs: dict[str, RuleCost]
    settings: list[SettingCost]
    without_gpu: dict[str, int] = field(default_factory=dict)


def plan_config(
    configfile: str | os.PathLike,
    *,
    workdir: str | os.PathLike | None = None,
    measured_in: str | os.PathLike | None = None,
    device: str = "cuda",
    images_per_s: Mapping[str, float] | None = None,
    measure: bool = True,
    rates: Sequence[Rate] = (),
    resources: Mapping[str, Any] | None = None,
    overwrite_resources: Mapping[str, Any] | None = None,
) -> PlanResult:
    """Plan one config; with ``rates``, also cost it at every measured setting.

    ``workdir`` is where Snakemake builds the DAG (the config's relative paths are read from
    there; ``None``: an empty temporary folder). When ``measure``, the earlier runs in
    ``measured_in`` are measured (default: ``workdir``; none without either): the
    experiment's folder (:func:`experiment_runs`) holds this config's runs only.
    ``resources`` / ``overwrite_resources``: the run's ``--resources`` / ``--set-resources``
    (:func:`pipeline_lib.planning.jobs.profile_resources`), which decide the jobs' GPUs.
    """
    config = planned_config(configfile)
    with tempfile.TemporaryDirectory(prefix="droc-plan-") as empty:
        where = Path(workdir) if workdir is not None else Path(empty)
        jobs, stats = snakemake_jobs(
            [configfile],
            workdir=where,
            resources=resources,
            overwrite_resources=overwrite_resources,
        )
        runs = measured_in if measured_in is not None else workdir
        measured = Path(runs) if (measure and runs is not None and Path(runs).is_dir()) else None
        costs = plan_costs(
            jobs, config, device=device, workdir=measured, images_per_s=images_per_s, rates=rates
        )
        settings = []
        if rates:
            settings = setting_costs(
                jobs,
                config,
                device=device,
                workdir=measured,
                images_per_s=images_per_s,
                rates=rates,
            )
    without_gpu = Counter(job.rule for job in jobs if job.rule in DEVICE_RULES and job.gpus < 1)
    return PlanResult(stats, costs, settings, dict(without_gpu))


def experiment_runs(configfile: str | os.PathLike) -> Path:
    """The folder of ``configfile``'s runs: ``results/<experiment>/`` (the Snakefile's
    working directory for it), so a plan measures this config's runs and no other's."""
    return experiment_folder(planned_config(configfile)["experiment"])


def without_studies(configfile: str | os.PathLike, folder: str | os.PathLike) -> Path | None:
    """A copy of ``configfile`` in ``folder`` with ``studies: []``; None if it has none.

    config/paper.yaml is the main table plus every study in one DAG: planning the copy too
    gives the main table's hours beside the whole paper's.
    """
    raw = yaml.safe_load(Path(configfile).read_text()) or {}
    if not raw.get("studies"):
        return None
    copy = Path(folder) / f"{Path(configfile).stem}-main-table.yaml"
    # The same experiment: its runs are measured, not those of a folder named after the copy.
    named = {"experiment": default_experiment([configfile]), **raw, "studies": []}
    copy.write_text(yaml.safe_dump(named, sort_keys=False))
    return copy


def _parse_rates(values: Sequence[str]) -> dict[str, float]:
    rates = {}
    # The configs' plugins are not active yet: any method an installed package declares.
    declared = {
        entry.name
        for entries in installed_plugins().values()
        for entry in entries
        if entry.group == METHOD_GROUP
    }
    for value in values:
        method, _, rate = value.partition("=")
        if not (is_trained(method) or method in declared) or not rate:
            trained = ", ".join([*method_ids(trained=True), *sorted(declared)])
            raise argparse.ArgumentTypeError(
                f"--images-per-s takes METHOD=RATE with METHOD in {trained}; got {value!r}"
            )
        rates[method] = float(rate)
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print the plan of each ``--configfile``."""
    parser = argparse.ArgumentParser(
        prog="droc-plan", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--configfile", nargs="+", required=True, type=Path)
    parser.add_argument(
        "--directory",
        type=Path,
        default=None,
        help="working directory of the sweep, measured for rates, times and sizes (default: "
        "the config's experiment folder, results/<experiment>/, the Snakefile's)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="the Snakemake profile the sweep runs with (profiles/gpu): its resources decide "
        "which jobs get a GPU",
    )
    parser.add_argument("--device", choices=sorted(RATE_DEVICES), default="cuda")
    parser.add_argument(
        "--images-per-s", nargs="+", default=[], metavar="METHOD=RATE", help="training rates"
    )
    parser.add_argument(
        "--no-measured", action="store_true", help="ignore earlier runs: defaults only"
    )
    parser.add_argument(
        "--rates",
        nargs="+",
        default=[],
        type=Path,
        metavar="FILE",
        help="rate tables (benchmarks/rates/*.csv): training rates per device, width, method, "
        "step mode and fuse; also prints each config's best measured setting",
    )
    args = parser.parse_args(argv)
    try:
        given = _parse_rates(args.images_per_s)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    try:
        table = read_rates(args.rates)
    except RateTableError as error:
        parser.error(str(error))
    resources: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    if args.profile is not None:
        try:
            resources = profile_resources(args.profile)
        except PlanError as error:
            parser.error(str(error))
    for configfile in args.configfile:
        if not configfile.is_file():
            parser.error(f"no such config file: {configfile}")
        try:
            options = {
                # The DAG is built where snakemake starts (relative paths in the config are
                # written from there); the experiment's folder holds this config's runs.
                "workdir": args.directory or Path.cwd(),
                "measured_in": args.directory or experiment_runs(configfile),
                "device": args.device,
                "images_per_s": given,
                "measure": not args.no_measured,
                "rates": table,
                "resources": resources[0],
                "overwrite_resources": resources[1],
            }
            with _progress(str(configfile)):
                result = plan_config(configfile, **options)  # type: ignore[arg-type]
            notes = SourceNotes()  # one legend of sources below all of this config's tables
            print(format_plan(str(configfile), result.costs, device=args.device, notes=notes))
            if args.device != "cpu" and result.without_gpu:
                print(format_without_gpu(result.without_gpu, device=args.device))
            if table:
                name = str(configfile)
                print(
                    format_settings(
                        name, result.costs, result.settings, device=args.device, notes=notes
                    )
                )
                _print_main_table(configfile, options, device=args.device, notes=notes)
            if legend := notes.legend():
                print(legend)
        except (PlanError, RateTableError) as error:
            print(f"{configfile}: {error}", file=sys.stderr)
            return 1
        print()
    return 0


@contextlib.contextmanager
def _progress(what: str) -> Iterator[None]:
    """Say on stderr what is being planned and how long it took: Snakemake builds the whole
    DAG first (about half a minute for config/paper.yaml's 23,000 jobs), silent otherwise."""
    print(f"droc-plan: building the DAG of {what} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    yield
    seconds = time.perf_counter() - start
    print(f"droc-plan: {what} planned in {seconds:.1f} s", file=sys.stderr, flush=True)


def _print_main_table(
    configfile: Path, options: Mapping[str, Any], *, device: str, notes: SourceNotes
) -> None:
    """The best-setting line of ``configfile`` without its studies, if it has any."""
    with tempfile.TemporaryDirectory(prefix="droc-plan-main-") as folder:
        main_table = without_studies(configfile, folder)
        if main_table is None:
            return
        with _progress(f"{configfile} without its studies"):
            result = plan_config(main_table, **options)
    name = f"{configfile} without its studies (main table)"
    print(format_settings(name, result.costs, result.settings, device=device, notes=notes))


if __name__ == "__main__":
    sys.exit(main())
