"""Rate tables (``pipeline_lib.planning.rates``, ``droc-plan --rates``) and the settings ranked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline_lib.planning.best_setting import regroup, setting_costs
from pipeline_lib.planning.costs import RuleCost, plan_costs
from pipeline_lib.planning.jobs import Job
from pipeline_lib.planning.planner import main
from pipeline_lib.planning.rate_choice import Setting, choose_rate
from pipeline_lib.planning.rates import Rate, RateTableError, append_rates, read_rates
from pipeline_lib.planning.report import format_settings
from tests.planner_cases import DEFAULT_IMAGES_PER_S, HEADER, REPO, rate_row, write_table


def test_a_rate_table_round_trips_and_a_bad_row_names_file_line_and_column(
    tmp_path: Path,
) -> None:
    rows = [
        Rate("NVIDIA H200", "cuda", 64, "rotnet", "graph", 1, 2500.0, "bfloat16", 20, "d", "x"),
        Rate("NVIDIA H200", "cuda", 64, "rotnet", "eager", 4, 800.0, "bfloat16", 20, "d", "a,b"),
    ]
    table = tmp_path / "h200.csv"
    append_rates(table, rows[:1])
    append_rates(table, rows[1:])  # appends below the header, no second header
    read = read_rates([table])
    assert [(r.step_mode, r.fuse, r.images_per_s_per_model, r.command) for r in read] == [
        ("graph", 1, 2500.0, "x"),
        ("eager", 4, 800.0, "a,b"),
    ]
    assert read[1].device_images_per_s == 4 * 800.0
    assert read[1].where == f"{table}, line 3"
    bad = write_table(tmp_path / "bad.csv", rate_row("rotnet", "eager", 1, 10.0))
    bad.write_text(bad.read_text() + rate_row("rotnet", "eager", 1, 10.0).replace("10.0", "fast"))
    with pytest.raises(RateTableError, match=r"bad\.csv, line 3, column images_per_s_per_model"):
        read_rates([bad])
    write_table(bad, rate_row("simclr", "eager", 1, 10.0))
    with pytest.raises(RateTableError, match=r"line 2, column method: 'simclr'"):
        read_rates([bad])
    write_table(bad, rate_row("rotnet", "inductor", 1, 10.0))
    with pytest.raises(RateTableError, match=r"line 2, column step_mode"):
        read_rates([bad])
    write_table(bad, rate_row("rotnet", "eager", 0, 10.0))
    with pytest.raises(RateTableError, match=r"line 2, column fuse: '0' must be positive"):
        read_rates([bad])
    write_table(bad, rate_row("rotnet", "eager", 1, 10.0).replace("\n", ",extra\n"))
    with pytest.raises(RateTableError, match=r"line 2: 12 fields where the header has 11"):
        read_rates([bad])
    bad.write_text(HEADER.replace(",command", "") + "x\n")
    with pytest.raises(RateTableError, match=r"line 1: missing columns \['command'\]"):
        read_rates([bad])
    # The command line refuses a bad table before planning anything.
    with pytest.raises(SystemExit):
        main(["--configfile", "x.yaml", "--rates", str(bad)])


def test_the_best_setting_is_the_most_images_per_device_second(tmp_path: Path) -> None:
    """Fuse 10 at 400 per model (4,000 a device-second) beats graph at 2,500 a model."""
    per_setting = {("eager", 1): 1000.0, ("graph", 1): 2500.0, ("eager", 4): 800.0}
    per_setting[("eager", 10)] = 400.0
    rows = [rate_row("rotnet", mode, k, rate) for (mode, k), rate in per_setting.items()]
    # An older day's faster measurement is superseded by the newer day's (median of repeats).
    rows.append(rate_row("rotnet", "graph", 1, 9999.0, date="2026-11-01T00:00:00Z"))
    rows.append(rate_row("rotnet", "graph", 1, 2300.0))
    rows.append(rate_row("rotnet", "graph", 1, 2700.0))
    rates = read_rates([write_table(tmp_path / "t.csv", *rows)])
    best, why = choose_rate(rates, kind="cuda", width=64, method="rotnet")
    throughput = {setting: rate * setting[1] for setting, rate in per_setting.items()}
    expected = max(throughput, key=throughput.__getitem__)
    assert best is not None and (best.setting.step_mode, best.setting.fuse) == expected
    assert best.device_images_per_s == pytest.approx(throughput[expected])
    assert (
        why == "eager, fuse 10, measured NVIDIA H200 2026-11-27, 32 px as measured, single sample"
    )
    graph, _ = choose_rate(rates, kind="cuda", width=64, method="rotnet", fuse=1)
    assert graph is not None and graph.setting == Setting("graph", 1)
    assert graph.images_per_s_per_model == pytest.approx(2500.0)  # median of 2300, 2500, 2700
    none, why = choose_rate(rates, kind="cpu", width=64, method="rotnet")
    assert none is None and why == "no cpu rate-table row for rotnet"
    # Two cards of one kind in one plan: refused, the plan is for one card.
    other = rate_row("rotnet", "eager", 1, 1.0, device="NVIDIA H100 80GB HBM3")
    mixed = read_rates([tmp_path / "t.csv", write_table(tmp_path / "h100.csv", other)])
    with pytest.raises(RateTableError, match="several devices"):
        choose_rate(mixed, kind="cuda", width=64, method="rotnet")


RATES = {("eager", 1): 1000.0, ("graph", 1): 2500.0, ("eager", 4): 800.0, ("eager", 10): 400.0}
#: RotNet on CIFAR-10 for 2 epochs: 5,000 // 64 * 64 images an epoch.
IMAGES = 2 * (5000 // 64 * 64)
CIFAR10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship"]
CIFAR10 = [*CIFAR10, "truck"]


def rotnet_jobs(classes: list[str]) -> list[Job]:
    common = {"dataset": "cifar10", "contamination": "0", "seed": "0", "method": "rotnet"}
    return [Job("train_representation", {**common, "inlier": c}, ()) for c in classes]


@pytest.fixture
def table(tmp_path: Path) -> list[Rate]:
    rows = [rate_row("rotnet", mode, k, rate) for (mode, k), rate in RATES.items()]
    return read_rates([write_table(tmp_path / "h200.csv", *rows)])


def test_a_config_costs_the_setting_it_runs_and_train_fuse_restricts_it(
    table: list[Rate],
) -> None:
    config = {"train": {"epochs": 2}, "datasets": {"cifar10": {}}}
    jobs = rotnet_jobs(["cat"])
    # step_mode absent (auto) on CUDA with a graph row: graph, fuse 1, although fuse 10
    # trains more images a device-second (a train_representation job trains one model).
    auto = plan_costs(jobs, config, device="cuda", rates=table)["train_representation"]
    assert auto.hours == pytest.approx(IMAGES / RATES[("graph", 1)] / 3600)
    assert auto.by_method["rotnet"].sources == {
        "graph, fuse 1, measured NVIDIA H200 2026-11-27, 32 px as measured, single sample",
        "overheads not measured (left out)",  # a table without the overhead columns
    }
    eager_config = {**config, "train": {"epochs": 2, "step_mode": "eager"}}
    eager = plan_costs(jobs, eager_config, device="cuda", rates=table)["train_representation"]
    assert eager.hours == pytest.approx(IMAGES / RATES[("eager", 1)] / 3600)
    # amp float16 cannot capture: auto is eager.
    fp16 = {**config, "train": {"epochs": 2, "amp": "float16"}}
    assert plan_costs(jobs, fp16, device="cuda", rates=table)[
        "train_representation"
    ].hours == pytest.approx(IMAGES / RATES[("eager", 1)] / 3600)
    # train.fuse 4, eager: a group of 4 at the fused-4 rate (4 models x 800 a device-second).
    fused_config = {**config, "train": {"epochs": 2, "fuse": 4, "step_mode": "eager"}}
    group = {"dataset": "cifar10", "method": "rotnet", "group": "cat@0+dog@0+frog@0+deer@0"}
    fused = plan_costs([Job("train_fused", group, ())], fused_config, device="cuda", rates=table)
    assert fused["train_fused"].hours == pytest.approx(
        4 * IMAGES / (4 * RATES[("eager", 4)]) / 3600
    )
    assert fused["train_fused"].by_method["rotnet"].jobs == 4
    assert (
        "eager, fuse 4, measured NVIDIA H200 2026-11-27, 32 px as measured, single sample"
        in fused["train_fused"].sources
    )
    # A group of 3 (fuse 3 unmeasured): 3 separate eager trainings, an upper bound.
    three = {**group, "group": "cat@0+dog@0+frog@0"}
    rest = plan_costs([Job("train_fused", three, ())], fused_config, device="cuda", rates=table)
    assert rest["train_fused"].hours == pytest.approx(3 * IMAGES / RATES[("eager", 1)] / 3600)
    assert any("fuse 3 not measured" in s for s in rest["train_fused"].sources)
    # Auto on CUDA runs the group captured, side by side: with graph fuse 1 measured and not
    # fuse 4, the 4 models cost the captured rate of one alone (a floor of the group's).
    auto_fused = {**config, "train": {"epochs": 2, "fuse": 4}}
    captured = plan_costs([Job("train_fused", group, ())], auto_fused, device="cuda", rates=table)
    assert captured["train_fused"].hours == pytest.approx(4 * IMAGES / RATES[("graph", 1)] / 3600)
    assert any(
        s.startswith("fuse 4 not measured (graph): as graph, fuse 1, measured")
        for s in captured["train_fused"].sources
    )


def test_a_table_at_another_width_is_reported_not_scaled(table: list[Rate]) -> None:
    config = {"train": {"epochs": 2}, "datasets": {"cifar10": {}}, "embed": {"width": 32}}
    costs = plan_costs(rotnet_jobs(["cat"]), config, device="cuda", rates=table)
    training = costs["train_representation"]
    assert "no rate-table row for rotnet at width 32 (measured: 64)" in training.sources
    assert "rate default (cuda)" in training.sources  # the next source in the order
    assert training.hours == pytest.approx(IMAGES / DEFAULT_IMAGES_PER_S["cuda"]["rotnet"] / 3600)


def test_rate_precedence_given_then_table_then_histories_then_defaults(
    tmp_path: Path, table: list[Rate]
) -> None:
    folder = tmp_path / "cifar10/cat/contam0/seed0/rotnet"
    folder.mkdir(parents=True)
    history = [{"epoch": k, "images_per_s": 100.0} for k in (1, 2, 3)]
    record = {"method": "rotnet", "history": history, "device": "cuda", "width": 64}
    (folder / "train_history.json").write_text(json.dumps(record))
    config = {"train": {"epochs": 2}, "datasets": {"cifar10": {}}}
    jobs = rotnet_jobs(["cat"])

    def hours(**options: object) -> float | None:
        costs = plan_costs(jobs, config, device="cuda", workdir=tmp_path, **options)  # type: ignore[arg-type]
        return costs["train_representation"].hours

    assert hours(rates=table, images_per_s={"rotnet": 50.0}) == pytest.approx(IMAGES / 50 / 3600)
    assert hours(rates=table) == pytest.approx(IMAGES / RATES[("graph", 1)] / 3600)
    assert hours() == pytest.approx(IMAGES / 100.0 / 3600)  # the history
    defaults = plan_costs(jobs, config, device="cuda")["train_representation"].hours
    assert defaults == pytest.approx(IMAGES / DEFAULT_IMAGES_PER_S["cuda"]["rotnet"] / 3600)


def test_setting_costs_regroup_the_models_and_name_the_cheapest(table: list[Rate]) -> None:
    """Ten CIFAR-10 models: fuse 4 leaves a group of 2 (unmeasured: 2 separate eager runs)."""
    config = {"train": {"epochs": 2}, "datasets": {"cifar10": {}}}
    jobs = rotnet_jobs(CIFAR10)
    settings = setting_costs(jobs, config, device="cuda", rates=table)
    per_model = {setting: IMAGES / (rate * setting[1]) for setting, rate in RATES.items()}
    expected = {
        ("eager", 1): 10 * per_model[("eager", 1)],
        ("graph", 1): 10 * per_model[("graph", 1)],
        ("eager", 4): 8 * per_model[("eager", 4)] + 2 * per_model[("eager", 1)],
        ("eager", 10): 10 * per_model[("eager", 10)],
    }
    got = {(s.setting.step_mode, s.setting.fuse): s.hours for s in settings}
    assert got == pytest.approx({key: value / 3600 for key, value in expected.items()})
    # The same models planned at fuse 4 regroup to the same settings' hours.
    fused_jobs = regroup(jobs, 4)
    assert [job.wildcards["group"].count("+") + 1 for job in fused_jobs] == [4, 4, 2]
    again = setting_costs(
        fused_jobs, {**config, "train": {"epochs": 2, "fuse": 4}}, device="cuda", rates=table
    )
    assert [s.hours for s in again] == pytest.approx([s.hours for s in settings])
    costs = plan_costs(jobs, config, device="cuda", rates=table)
    line = format_settings("paper.yaml", costs, settings, device="cuda")
    best = min(expected, key=expected.__getitem__)
    assert line.startswith(
        f"best setting of paper.yaml: {best[0]}, fuse {best[1]}: "
        f"{expected[best] / 3600:,.1f} cuda-hours of training"
    )
    assert f"as configured: {expected[('graph', 1)] / 3600:,.1f} of training" in line
    for (mode, fuse), seconds in expected.items():
        assert f"{mode}, fuse {fuse}: {seconds / 3600:,.1f}" in line


def test_fused_jobs_step_as_train_step_mode_says_and_fused_graph_rows_are_settings(
    tmp_path: Path,
) -> None:
    """A graph fuse-K row costs a train_fused job under auto on CUDA, and is a setting."""
    per_setting = {**RATES, ("graph", 4): 1500.0, ("graph", 10): 600.0}
    rows = [rate_row("rotnet", mode, k, rate) for (mode, k), rate in per_setting.items()]
    table = read_rates([write_table(tmp_path / "h200.csv", *rows)])
    config = {"datasets": {"cifar10": {}}}
    group = {"dataset": "cifar10", "method": "rotnet", "group": "cat@0+dog@0+frog@0+deer@0"}

    def fused(members: str = group["group"], **train: object) -> RuleCost:
        settings = {"train": {"epochs": 2, "fuse": 4, **train}}
        job = Job("train_fused", {**group, "group": members}, ())
        return plan_costs([job], {**config, **settings}, device="cuda", rates=table)["train_fused"]

    auto = fused()
    assert auto.hours == pytest.approx(4 * IMAGES / (4 * per_setting[("graph", 4)]) / 3600)
    assert (
        "graph, fuse 4, measured NVIDIA H200 2026-11-27, 32 px as measured, single sample"
        in auto.sources
    )
    eager = fused(step_mode="eager")
    assert eager.hours == pytest.approx(4 * IMAGES / (4 * per_setting[("eager", 4)]) / 3600)
    # float16 amp cannot capture: auto costs the eager row.
    assert fused(amp="float16").hours == eager.hours
    # Graph asked, fuse 3 unmeasured in graph: the most models side by side measured below
    # 3 (graph fuse 1 here, 2,500 a device-second), the mode and the rate named.
    rest = fused("cat@0+dog@0+frog@0", step_mode="graph")
    assert rest.hours == pytest.approx(3 * IMAGES / per_setting[("graph", 1)] / 3600)
    assert any(
        source.startswith("fuse 3 not measured (graph): as graph, fuse 1, measured")
        for source in rest.sources
    )
    # Eager asked, fuse 3 unmeasured: 3 separate eager runs (a stacked group can be slower).
    eager_rest = fused("cat@0+dog@0+frog@0", step_mode="eager")
    assert eager_rest.hours == pytest.approx(3 * IMAGES / per_setting[("eager", 1)] / 3600)
    # Every measured (step mode, fuse) is a setting; graph fuse 10 (6,000 a device-second)
    # is the cheapest; graph fuse 4 leaves a pair costed at graph fuse 1.
    settings = setting_costs(
        rotnet_jobs(CIFAR10), {**config, "train": {"epochs": 2}}, device="cuda", rates=table
    )
    got = {(s.setting.step_mode, s.setting.fuse): s.hours for s in settings}
    assert set(got) == set(per_setting)
    assert got[("graph", 10)] == pytest.approx(10 * IMAGES / (10 * 600.0) / 3600)
    assert got[("graph", 4)] == pytest.approx(
        (8 * IMAGES / (4 * 1500.0) + 2 * IMAGES / per_setting[("graph", 1)]) / 3600
    )
    costs = plan_costs(
        rotnet_jobs(CIFAR10), {**config, "train": {"epochs": 2}}, device="cuda", rates=table
    )
    line = format_settings("paper.yaml", costs, settings, device="cuda")
    assert line.startswith("best setting of paper.yaml: graph, fuse 10: ")


def test_compiled_rows_cost_a_compiled_config_and_compete_as_settings(tmp_path: Path) -> None:
    """train.step_mode: compiled costs compiled rows (fewer members measured: the most side
    by side below), and compiled fuse 10 is the cheapest setting when it trains the most."""
    per_setting = {**RATES, ("graph", 10): 600.0, ("compiled", 1): 2900.0}
    per_setting[("compiled", 10)] = 700.0
    rows = [rate_row("rotnet", mode, k, rate) for (mode, k), rate in per_setting.items()]
    table = read_rates([write_table(tmp_path / "h200.csv", *rows)])
    config = {"datasets": {"cifar10": {}}, "train": {"epochs": 2, "step_mode": "compiled"}}
    alone = plan_costs(rotnet_jobs(["cat"]), config, device="cuda", rates=table)
    assert alone["train_representation"].hours == pytest.approx(
        IMAGES / per_setting[("compiled", 1)] / 3600
    )
    three = {"dataset": "cifar10", "method": "rotnet", "group": "cat@0+dog@0+frog@0"}
    fused_config = {**config, "train": {**config["train"], "fuse": 4}}
    rest = plan_costs([Job("train_fused", three, ())], fused_config, device="cuda", rates=table)
    assert rest["train_fused"].hours == pytest.approx(
        3 * IMAGES / per_setting[("compiled", 1)] / 3600
    )
    assert any(s.startswith("fuse 3 not measured (compiled)") for s in rest["train_fused"].sources)
    jobs = rotnet_jobs(CIFAR10)
    settings = setting_costs(jobs, {**config, "train": {"epochs": 2}}, device="cuda", rates=table)
    costs = plan_costs(jobs, {**config, "train": {"epochs": 2}}, device="cuda", rates=table)
    line = format_settings("paper.yaml", costs, settings, device="cuda")
    assert line.startswith("best setting of paper.yaml: compiled, fuse 10: ")


def test_the_committed_h200_table_covers_every_method_and_setting() -> None:
    """benchmarks/rates/h200.csv (one device session) costs every setting the docs quote."""
    rates = read_rates([REPO / "benchmarks/rates/h200.csv"])
    assert {rate.device for rate in rates} == {"NVIDIA H200"} and {r.width for r in rates} == {64}
    settings = {(rate.method, rate.step_mode, rate.fuse) for rate in rates}
    methods = DEFAULT_IMAGES_PER_S["cuda"]
    assert settings == {(m, "eager", k) for m in methods for k in (1, 4, 10)} | {
        (m, "graph", k) for m in methods for k in (1, 4, 8, 10)
    } | {(m, "compiled", k) for m in methods for k in (1, 4, 10)}

    def rate(method: str, mode: str, fuse: int) -> float:
        choice, why = choose_rate(
            rates, kind="cuda", width=64, method=method, step_mode=mode, fuse=fuse
        )
        assert choice is not None, why
        return choice.device_images_per_s

    # The claims docs/usage.md makes of this table: alone, the captured step trains faster,
    # and captured models side by side train more images a second than one alone.
    assert all(rate(m, "graph", 1) > rate(m, "eager", 1) for m in methods)
    assert all(rate(m, "graph", k) > 1.2 * rate(m, "graph", 1) for m in methods for k in (4, 8))
    # Compiled (the network compiled inside the captured step) is faster than graph alone.
    assert all(rate(m, "compiled", 1) > 1.1 * rate(m, "graph", 1) for m in methods)
    # The planner's built-in CUDA rates are this table's (the default step on CUDA is graph).
    assert {m: rate(m, "graph", 1) for m in methods} == pytest.approx(
        DEFAULT_IMAGES_PER_S["cuda"], rel=1e-4
    )


def test_the_committed_64_px_table_is_medians_of_repeats_above_the_pixel_scaling() -> None:
    """benchmarks/rates/h200-64px.csv: every method at 64 px, compiled, fuse 1 and 5, each
    row the median of 3 timed epochs of 200 steps; the 32 px rows scaled by pixels (x 0.25)
    understate every one of them, the claim docs/usage.md makes of the two tables."""
    small = read_rates([REPO / "benchmarks/rates/h200.csv"])
    large = read_rates([REPO / "benchmarks/rates/h200-64px.csv"])
    assert {(r.device, r.width, r.image_size, r.step_mode) for r in large} == {
        ("NVIDIA H200", 64, 64, "compiled")
    }
    assert all(r.repeats >= 3 and r.steps >= 200 for r in large)
    methods = set(DEFAULT_IMAGES_PER_S["cuda"])
    measured = {(r.method, r.fuse) for r in large}
    assert {(m, k) for m in methods for k in (1, 5)} <= measured
    for method, fuse in sorted(measured):
        options = {"kind": "cuda", "width": 64, "method": method, "step_mode": "compiled"}
        at_64, why = choose_rate(large, **options, fuse=fuse, image_size=64)
        assert at_64 is not None and not at_64.extrapolated and at_64.repeats >= 3, why
        nearest = max(  # the 32 px table's most models side by side, at most ``fuse``
            r.fuse
            for r in small
            if (r.method, r.step_mode) == (method, "compiled") and r.fuse <= fuse
        )
        scaled, why = choose_rate(small, **options, fuse=nearest, image_size=64)
        assert scaled is not None and scaled.extrapolated, why
        assert at_64.device_images_per_s > scaled.device_images_per_s, (method, fuse)


def test_the_planner_predicts_the_measured_full_cell_from_the_h200_table() -> None:
    """benchmarks/fullcell/h200-2026-11-27.json: RotNet, CIFAR-10 automobile, 5,000 images,
    2,048 epochs, compiled, fuse 1, trained in 773.7 s on an H200. The planner, costing
    that cell from benchmarks/rates/h200.csv (compiled fuse-1 RotNet row, one timed call of
    20 steps), predicts 743.0 s: 0.960 of the measured time.

    The rate is not what is off: the run's own last epoch trained at 13,794 images/s, the
    table says 13,759 (0.25 % apart). The missing 30.7 s are per-job overheads the planner
    does not model: the first epoch (inductor compilation and CUDA-graph capture) took
    20.4 s where a steady one takes 0.36 s (benchmarks/fullcell/README.md; the run's
    per-epoch history is not in the repository, so that figure is not machine-readable),
    and about 10.6 s over the 2,048 epoch ends and the 16 checkpoint writes together, which
    the committed files do not separate. h200.csv predates the overhead columns, so the
    plan leaves them out and says so; the next rate tables carry them
    (test_measured_overheads_are_costed_per_job).
    """
    run = json.loads((REPO / "benchmarks/fullcell/h200-2026-11-27.json").read_text())
    (result,) = run["results"]
    wildcards = {key: str(result[key]) for key in ("dataset", "inlier", "method", "seed")}
    job = Job("train_representation", {**wildcards, "contamination": "0"}, ())
    table = read_rates([REPO / "benchmarks/rates/h200.csv"])
    cost = plan_costs([job], run["config"], device="cuda", rates=table)["train_representation"]
    assert cost.hours is not None
    predicted, measured = cost.hours * 3600, result["timings"]["train_s"]
    source, overheads = sorted(cost.by_method["rotnet"].sources)
    assert source.startswith("compiled, fuse 1, measured NVIDIA H200")  # the run's setting
    assert source.endswith("32 px as measured, single sample")
    assert overheads == "overheads not measured (left out)"  # h200.csv predates them
    assert 0.9 < predicted / measured < 1.1, (predicted, measured)
    # The planner leaves out one-time and per-epoch overheads: it must not over-predict.
    assert predicted < measured
    # What it does model, the steady rate, matches the run's own last epoch within 1 %.
    training = result["training"]
    images = training["epochs"] * (result["n_train"] // training["batch_size"])
    images *= training["batch_size"]
    steady = images / training["images_per_s_last_epoch"]
    assert predicted == pytest.approx(steady, rel=0.01)
