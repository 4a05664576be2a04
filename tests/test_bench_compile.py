"""benchmarks/bench_compile.py: the compiled device phase trains what the two-phase step trains.

Dynamo's ``eager`` backend (its graphs run by torch, no compiler), RotNet at width 8, two
epochs of two steps with the rate changing every step (``per_step``), so a rate, a batch or
a random number baked into a graph would show as a recompile or as other weights. The
reference is the library's two-phase step run uncaptured with the rate in a device tensor
(SGD's fused kernel), the update the CUDA path runs. With ``update="library"`` (that same
fused kernel, run eagerly between the graphs) the compiled step equals it bit for bit; that
second compilation is left out of the suite for time (``bench_compile.py --backend eager
--update library`` prints gaps of 0).
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from pipeline_lib.ssl.loop import run_static_step
from tests.benchmark_scripts import load_benchmark
from tests.threads import one_torch_thread

#: Relative weight gap allowed for the traced update. Foreach SGD under dynamo multiplies
#: the gradients by the rate, then adds; the fused kernel adds with the rate as alpha: a
#: last-bit difference per element and step, which four steps of this tiny BatchNorm
#: network grow to 1.7e-4 (the same arithmetic outside dynamo gives the same gap). Measured
#: with deliberate bugs: the random numbers of the first compiled step replayed 0.11, the
#: rate frozen at its first value 0.035.
TRACED_TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_compile.py")


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One thread for the reference and the compiled runs alike (and the shared cores)."""
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    """16 random images: two steps of 8 per epoch."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (16, 32, 32, 3), generator=generator).to(torch.uint8)


def _run(bench, images, device: str = "cpu"):
    options = {"batch_size": 8, "width": 8, "lr": 0.05, "lr_schedule": "per_step", "amp": None}
    options["epochs"] = 2
    return bench.prepared_run("rotnet", images, device=torch.device(device), **options)


@pytest.fixture(scope="module")
def reference(bench, images) -> dict[str, torch.Tensor]:
    """Weights after the uncompiled two-phase step with the device-rate update."""
    run, state = _run(bench, images)
    step = run_static_step(run, state, capture=False, device_lr=True)
    bench.train_epochs(run, state, step, warmup=1)
    return bench.float_weights(state.model)


def _compiled(bench, images) -> tuple[torch.nn.Module, dict[str, int]]:
    """Weights after the compiled step (traced update), and dynamo's graphs and breaks."""
    run, state = _run(bench, images)
    step = bench.compile_static_step(run, state, backend="eager", update="traced")
    torch._dynamo.reset()
    counters.clear()
    bench.train_epochs(run, state, step, warmup=1)
    stats = {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "breaks": sum(counters["graph_break"].values()),
    }
    torch._dynamo.reset()
    return state.model, stats


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_compiled_step_matches_and_compiles_once(bench, images, reference) -> None:
    """The benchmark's default: two graphs (views to loss; SGD), no recompile for the rate."""
    model, stats = _compiled(bench, images)
    model_weights = bench.float_weights(model)
    # Breaks: Optimizer.zero_grad (dynamo skips it) and loss.backward(), nothing else.
    assert stats == {"graphs": 2, "breaks": 2}
    initial = bench.float_weights(_run(bench, images)[1].model)
    assert bench.relative_gap(model_weights, reference, initial) <= TRACED_TOLERANCE
    assert torch.equal(model.state_dict()["backbone.stem.1.num_batches_tracked"], torch.tensor(4))


def test_timed_epochs_give_the_median_rate_and_its_range(bench, images) -> None:
    """``repeats`` timed epochs after the warm-up: the rate is their median, within their
    range, and each epoch trained (two of two steps: four BatchNorm updates)."""
    run, state = _run(bench, images)
    result = bench.train_epochs(run, state, None, warmup=0, repeats=2)
    spread = result["spread"]
    assert spread.repeats == 2 and spread.low <= result["images_per_s"] <= spread.high
    tracked = state.model.state_dict()["backbone.stem.1.num_batches_tracked"]
    assert torch.equal(tracked, torch.tensor(4))


def test_a_captured_compiled_phase_is_refused_where_it_cannot_run(bench) -> None:
    """Off CUDA, or under a mode whose CUDA-graph trees would capture inside the step's own
    capture: a named error before anything compiles (also from the command line)."""
    with pytest.raises(ValueError, match="needs a CUDA device"):
        bench.check_capture(torch.device("cpu"), "default")
    with pytest.raises(ValueError, match="without CUDA graphs of its own"):
        bench.check_capture(torch.device("cuda"), "reduce-overhead")
    bench.check_capture(torch.device("cuda"), "max-autotune-no-cudagraphs")
    with pytest.raises(SystemExit):
        bench.parse_args(["--capture"])
    assert bench.parse_args([]).mode == "reduce-overhead"


def test_the_weights_digest_tells_bit_identical_weights_apart(bench, reference) -> None:
    """Equal weights give one digest; one weight a last bit away gives another."""
    copy = {name: value.clone() for name, value in reference.items()}
    assert bench.weights_digest(copy) == bench.weights_digest(reference)
    name = next(iter(copy))
    flat = copy[name].view(-1)
    flat[0] = torch.nextafter(flat[0], flat[0] + 1)
    assert bench.weights_digest(copy) != bench.weights_digest(reference)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_the_whole_compiled_step_captured_trains_the_graph_run_on_cuda(bench, images) -> None:
    """``--capture``: the compiled phase (inductor, no CUDA graphs of its own) captured as the
    step's graph after its warm-up, trained near the uncompiled captured step (other
    kernels, so other rounding: within the benchmark's tolerance, not bit for bit)."""
    run, state = _run(bench, images, "cuda")
    initial = bench.float_weights(state.model)
    graph = run_static_step(run, state, capture=True)
    bench.train_epochs(run, state, graph, warmup=1)
    captured_run, compiled_state = _run(bench, images, "cuda")
    torch._dynamo.reset()
    counters.clear()
    step = bench.compile_static_step(
        captured_run, compiled_state, backend="inductor", mode="default", capture=True
    )
    bench.train_epochs(captured_run, compiled_state, step, warmup=1)
    graphs = int(counters["stats"]["unique_graphs"])
    torch._dynamo.reset()
    assert graphs >= 2  # views to loss, and SGD: what was captured was compiled
    assert step.graph is not None and step.failure is None  # captured, not fallen back
    gap = bench.relative_gap(
        bench.float_weights(compiled_state.model), bench.float_weights(state.model), initial
    )
    assert gap <= bench.TOLERANCE
