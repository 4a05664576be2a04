"""Benchmark: torch.compile of the two-phase training step against its CUDA graph and eager.

Two ways to cut the step's launch overhead, ``torch.compile(mode="reduce-overhead")`` and a
hand-made ``torch.cuda.CUDAGraph``, measured side by side. The library has the second
(:class:`pipeline_lib.ssl.stepper.StaticStep`); this script times, per method at the paper's
batch size, in one process on one device:

* ``eager``: today's loop (:func:`pipeline_lib.ssl.loop.train_epoch` without a static step);
* ``graph``: the StaticStep with its captured CUDA graph (``step_mode="graph"``); on the CPU,
  where nothing is captured, the same step uncaptured (``two_phase``);
* ``compiled``: the same StaticStep whose device phase (gather, views, forward, loss,
  backward, SGD) is ``torch.compile``'d (:func:`compile_static_step`). The host phase still
  puts the batch indices, the random numbers and the rates into static device buffers, so
  no host random number reaches the compiled code.

Each mode trains a fresh model of the same seed on the same random uint8 32x32 images:
warm-up epochs of ``--steps`` steps (contrastive DA: ``4 * --steps``, its training set being
the images with their three rotated copies), as many as make :data:`WARMUP_STEPS` steps
(the recording step, then the compilation at the second step and CUDA-graph trees'
recording at the third, or the graph mode's three uncaptured steps and its capture at the
fourth; "warm s": their seconds), then ``--repeats`` timed epochs (default 3), whose median
rate is the row's and whose range is printed below it. Images/s are training instances
per second as bench_train.py counts them (contrastive DA: rotated copies).

The compiled device phase (dynamo, with ``--backend``):

* The recording step (the first, which draws on demand from the host generator and learns
  the plan of the draws) runs uncompiled; every later step runs the compiled function.
* The rate is always read from the step's device tensor (``device_lr``, as on CUDA): a float
  would be baked into the graph and recompiled whenever the schedule changes it.
* ``--update traced`` (default): SGD as foreach ops reading that tensor, traced into the
  graph, its other settings read once on the host. ``library``: the StaticStep's own
  update, SGD's fused kernel, which torch marks ``torch.compiler.disable``: dynamo runs it
  eagerly after the backward, and retraces that frame whenever the schedule changes the
  group's float rate (every epoch under the default per-epoch schedule), which it guards on.
* :func:`~pipeline_lib.ssl.augment._stream_orders` (the jitter orders of each view stream,
  fixed per run; it builds a ``torch.Generator``, a graph break) is marked a constant.
* ``loss.backward()`` and ``optimizer.zero_grad`` stay graph breaks: AOTAutograd compiles the
  backward graph, which the autograd engine runs between the forward graph and the update
  graph (with ``reduce-overhead`` each of the three is a CUDA graph of its own). Dynamo's
  ``trace_autograd_ops`` removes the backward break but gave wrong weights on the CPU
  (torch 2.14.1: 0.9 relative gap to the uncompiled step, contrastive, width 8), so it is off.
* The images, batch indices, rates and momentum buffers are marked static addresses, so the
  CUDA graphs neither copy them every step nor skip the update graph for mutating an input.

Two candidates of a faster trainer step, measured with the same script:

* ``--capture``: the whole step compiled (views, network, loss, backward, SGD) *and*
  captured as the StaticStep's own CUDA graph after its uncaptured warm-up steps, as the
  trainer captures ``graph`` and ``compiled`` steps, instead of inductor's CUDA-graph trees
  (three graphs per step). Only modes whose kernels inductor launches itself
  (:data:`CAPTURE_MODES`) can be captured so; the row says whether the capture held.
* ``--mode max-autotune-no-cudagraphs --cache-dir DIR``: inductor benchmarks kernel
  configurations and keeps the winners in DIR (its FX-graph and autotuning caches). The
  choice depends on timings, so two fresh processes may pick different kernels and train
  different weights; a process that finds DIR filled reuses them. The ``weights sha256``
  line tells: run twice with one DIR and compare the compiled digests (``AUTOTUNE=1
  benchmarks/gpu_session.sh`` does, and a third time with a fresh DIR).

Weights: after the last epoch the script prints ``gap a-b = ||w_a - w_b|| / ||w_b - w_0||``
(parameters and BatchNorm buffers as one vector) for graph against eager, compiled against
eager and against graph, and a *floor*: the graph mode again with the model in the other
memory format (the same sums in another order), against graph. A network trained from
scratch amplifies rounding step by step (as in benchmarks/check_fused.py), contrastive DA
most, so gaps of rounding are not tiny and depend on the method; ``match`` says whether
both compiled gaps are at most ``max(3 x floor, --tolerance)`` (default 1e-2). A mix-up
of data, random numbers, rates or state gives gaps far above the floor (on the CPU, the
random numbers of the first compiled step replayed: 0.11 after four steps where rounding
gives 2e-4; the broken ``trace_autograd_ops`` above: 0.9). Measured on the CPU in float32
(width 8, ``--steps 2``: three epochs of two steps, ``--backend eager``), floor / compiled
gap: rotnet 3.2e-4 / 6.9e-6, rotation 4.5e-3 / 2.2e-4, denoising 1.4e-6 / 6.7e-8,
contrastive 7.7e-2 / 1.1e-2, contrastive DA 0.86 / 0.51 (its floor is of order 1 after so
few steps, so there the check tells little); with ``--update library`` every compiled gap
is 0 (bit for bit). The sharper check is tests/test_bench_compile.py.

Compile time: inductor compiles the forward, backward and update graphs of each method
anew (``torch._dynamo.reset()`` between methods): on an H200 (2026-11-27) 47 s for RotNet,
24 s for contrastive and 45 s for contrastive DA, so ``COMPILE=1 benchmarks/gpu_session.sh``
(every method) takes about 240 s. On the CPU,
``--backend eager`` or ``aot_eager`` needs no compiler (a smoke run); inductor (C++)
compiled rotnet at width 8 in about 100 s on two busy cores and matched (compiled gap
6e-6; cg-skip 2: CUDA graphs skip the CPU).

Usage::

    python benchmarks/bench_compile.py --device cuda                  # inductor, reduce-overhead
    python benchmarks/bench_compile.py --device cuda --methods rotnet contrastive --steps 10
    python benchmarks/bench_compile.py --backend eager --width 8 --steps 2   # CPU smoke run
    python benchmarks/bench_compile.py --device cuda --capture --mode max-autotune-no-cudagraphs \
        --cache-dir /tmp/inductor --methods contrastive_da    # twice: the same digests
"""

from __future__ import annotations

import argparse
import hashlib
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch._dynamo
from bench_options import RunSpec
from torch._dynamo.utils import counters

from pipeline_lib.planning.timing import median_seconds, time_repeats
from pipeline_lib.registry import TRAINED_METHODS, default_batch_size
from pipeline_lib.ssl import augment
from pipeline_lib.ssl.loop import run_static_step, train_epoch
from pipeline_lib.ssl.run import Run, TrainingState, prepare_run
from pipeline_lib.ssl.settings import Execution, TrainSettings
from pipeline_lib.ssl.stepper import DevicePhase, StaticStep

#: Dynamo backends: inductor (the default; a C++ compiler on the CPU, Triton on CUDA), and
#: the two that need no compiler (dynamo's graph run by torch; the same after AOTAutograd).
BACKENDS: tuple[str, ...] = ("inductor", "eager", "aot_eager")

#: Inductor modes (``reduce-overhead`` and ``max-autotune`` replay CUDA graphs on CUDA).
MODES: tuple[str, ...] = (
    "reduce-overhead",
    "default",
    "max-autotune",
    "max-autotune-no-cudagraphs",
)

#: The modes whose compiled phase the StaticStep can capture (``--capture``): inductor
#: launches their kernels itself, so the step's one CUDA graph holds them all.
CAPTURE_MODES: tuple[str, ...] = ("default", "max-autotune-no-cudagraphs")

#: How the compiled step updates the weights (see the module docstring).
UPDATES: tuple[str, ...] = ("traced", "library")
#: Each of them as the library's StaticStep ``update``.
LIBRARY_UPDATES: dict[str, str] = {"traced": "foreach", "library": "fused"}

#: The compiled step matches if its weight gaps are at most FLOOR_FACTOR x the floor or
#: TOLERANCE, whichever is larger (module docstring, "Weights").
FLOOR_FACTOR = 3.0
TOLERANCE = 1e-2

#: Steps before the timed epochs: the graph mode captures its fourth step, the compiled
#: step compiles its second and CUDA-graph trees record its third.
WARMUP_STEPS = 4

#: The timed step modes (the untimed ``floor`` is ``graph`` in the other memory format).
STEP_MODES: tuple[str, ...] = ("eager", "graph", "compiled")


def prepared_run(
    method: str, images: torch.Tensor, *, device: torch.device, **options: Any
) -> tuple[Run, TrainingState]:
    """A run of seed 0 with the recipe ``options`` over the defaults (eager mode).

    The static steps are built here, so the run itself is prepared as ``eager``.
    """
    execution = Execution(device=device, step_mode="eager")
    return prepare_run(TrainSettings(method, **options), images, seed=0, execution=execution)


def _mark_static(step: StaticStep) -> None:
    """Tensors the compiled graphs read or write in place at fixed addresses."""
    tensors = [*step.images, *step.indices, step.lr]
    for group in step.optimizer.param_groups:
        for parameter in group["params"]:
            buffer = step.optimizer.state.get(parameter, {}).get("momentum_buffer")
            if buffer is not None:
                tensors.append(buffer)
    for tensor in tensors:
        torch._dynamo.mark_static_address(tensor)


def check_capture(device: torch.device, mode: str | None) -> None:
    """Refuse a captured compiled phase that cannot run: off CUDA, or under a mode whose
    CUDA-graph trees would capture inside the StaticStep's own capture."""
    if device.type != "cuda":
        raise ValueError(f"--capture needs a CUDA device, got {device.type!r}")
    if mode not in CAPTURE_MODES:
        raise ValueError(
            f"--capture needs an inductor mode without CUDA graphs of its own "
            f"({', '.join(CAPTURE_MODES)}), got {mode!r}"
        )


def compile_static_step(
    run: Run,
    state: TrainingState,
    *,
    backend: str,
    mode: str | None = None,
    update: str = "traced",
    capture: bool = False,
) -> StaticStep:
    """The run's two-phase step with its device phase ``torch.compile``'d.

    Built through the library's public hooks: the rate in a device tensor (``device_lr``),
    the traceable foreach update (``update="foreach"``) for ``traced``, and
    :meth:`~pipeline_lib.ssl.stepper.StaticStep.wrap_device_phase` for the compiled phase.

    Parameters
    ----------
    run, state : Run, TrainingState
        As :func:`prepared_run` returns them (or a fresh state of the run).
    backend : str
        A dynamo backend (:data:`BACKENDS`).
    mode : str or None, default=None
        An inductor mode (:data:`MODES`); None for the other backends.
    update : {"traced", "library"}, default="traced"
    capture : bool, default=False
        Capture the compiled phase as the StaticStep's own CUDA graph, as the trainer
        captures its step (the whole-step candidate; :data:`CAPTURE_MODES` only, whose
        kernels inductor launches itself). False: uncaptured, CUDA graphs only through
        ``mode``.

    Raises
    ------
    ValueError
        On an unknown update, a mode with a backend other than inductor, or ``capture``
        off CUDA or with a mode that replays CUDA graphs of its own.
    """
    if update not in UPDATES:
        raise ValueError(f"unknown update {update!r}; allowed: {', '.join(UPDATES)}")
    if mode is not None and backend != "inductor":
        raise ValueError(f"mode {mode!r} is an inductor mode; backend is {backend!r}")
    if capture:
        check_capture(run.device, mode)
    step = run_static_step(
        run, state, capture=capture, update=LIBRARY_UPDATES[update], device_lr=True
    )
    # The per-run jitter orders: pure, cached, and built with a torch.Generator (a graph
    # break if traced); dynamo calls it at trace time and keeps the result as a constant.
    torch.compiler.assume_constant_result(augment._stream_orders.__wrapped__)
    cudagraphs = backend == "inductor" and mode in ("reduce-overhead", "max-autotune")

    def wrap(uncompiled: DevicePhase) -> DevicePhase:
        compiled = torch.compile(uncompiled, backend=backend, mode=mode)
        marked = False

        def device_phase(cache_enabled: bool) -> torch.Tensor:
            nonlocal marked
            if not step.recorded:  # draws on demand from the host generator
                return uncompiled(cache_enabled)
            if not marked:
                _mark_static(step)  # the momentum buffers exist after the first update
                marked = True
            if cudagraphs:
                # A new iteration of the CUDA graph trees: the last step's loss was copied.
                torch.compiler.cudagraph_mark_step_begin()
            return compiled(cache_enabled)

        return device_phase

    step.wrap_device_phase(wrap)
    return step


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warmup_epochs(steps_per_epoch: int) -> int:
    """Untimed epochs before the timed ones: at least :data:`WARMUP_STEPS` steps in all."""
    return -(-WARMUP_STEPS // steps_per_epoch)


def train_epochs(
    run: Run, state: TrainingState, step: StaticStep | None, *, warmup: int, repeats: int = 1
) -> dict[str, Any]:
    """``warmup`` untimed epochs, then ``repeats`` timed ones (each synced at both ends).

    ``images_per_s`` is the median of the timed epochs' rates and ``spread`` their range
    (:class:`~pipeline_lib.planning.timing.Spread`); ``warmup_s`` the warm-up's seconds.
    """
    losses: list[torch.Tensor] = []

    def epoch() -> None:
        losses.append(train_epoch(run, state, step))

    def sync() -> None:
        _synchronize(run.device)

    warmup_s = sum(median_seconds(epoch, repeats=1, sync=sync) for _ in range(warmup))
    instances = run.data.steps_per_epoch * run.data.per_step
    spread = time_repeats(epoch, repeats=repeats, instances=instances, sync=sync)
    return {
        "warmup_s": warmup_s,
        "images_per_s": spread.median,
        "spread": spread,
        "loss": float(losses[-1].mean()),
    }


def float_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The floating-point parameters and buffers, on the CPU in float64."""
    return {
        name: value.detach().to("cpu", torch.float64)
        for name, value in model.state_dict().items()
        if value.is_floating_point()
    }


def relative_gap(
    weights: dict[str, torch.Tensor],
    reference: dict[str, torch.Tensor],
    initial: dict[str, torch.Tensor],
) -> float:
    """``||w - w_ref|| / ||w_ref - w_0||`` over all entries as one vector."""
    gap = sum(float(((weights[n] - reference[n]) ** 2).sum()) for n in reference)
    moved = sum(float(((reference[n] - initial[n]) ** 2).sum()) for n in reference)
    return (gap / moved) ** 0.5


def _other_memory_format(device: torch.device) -> torch.memory_format:
    """Not the trainer's format (channels-last on CUDA): the same sums in another order."""
    return torch.contiguous_format if device.type == "cuda" else torch.channels_last


def measure_method(
    method: str,
    spec: RunSpec,
    *,
    backend: str,
    mode: str | None,
    update: str,
    capture: bool = False,
    repeats: int = 1,
) -> dict[str, Any]:
    """Each step mode's timings (``repeats`` timed epochs) and final weights, and the
    compiled step's dynamo counts.

    A mode that raises is reported (``error``) and the others still run.
    """
    batch, steps, side = default_batch_size(method), spec.steps, spec.image_size
    device, width, amp = spec.device, spec.width, spec.amp
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (batch * steps, side, side, 3), generator=generator)
    warmup = warmup_epochs(steps)  # contrastive DA's epochs are longer: never fewer steps
    options = {"batch_size": batch, "width": width, "amp": amp, "epochs": warmup + repeats}
    run, state = prepared_run(method, images.to(torch.uint8), device=device, **options)
    initial = float_weights(state.model)
    builders: dict[str, Callable[[TrainingState], StaticStep | None]] = {
        "eager": lambda s: None,
        "graph": lambda s: run_static_step(run, s, capture=device.type == "cuda"),
        "floor": lambda s: run_static_step(run, s, capture=device.type == "cuda"),
        "compiled": lambda s: compile_static_step(
            run, s, backend=backend, mode=mode, update=update, capture=capture
        ),
    }
    modes: dict[str, dict[str, Any]] = {}
    results: dict[str, Any] = {"batch": batch, "initial": initial, "modes": modes}
    torch._dynamo.reset()
    counters.clear()
    for name, build in builders.items():
        fresh = state if name == "eager" else run.new_state()
        if name == "floor":
            fresh.model.to(memory_format=_other_memory_format(device))  # parameters kept
        try:
            step = build(fresh)
            timing = train_epochs(run, fresh, step, warmup=warmup, repeats=repeats)
        except Exception as error:  # report it, measure the other modes
            modes[name] = {"error": f"{type(error).__name__}: {error}"}
            continue
        timing["ran"] = step.mode if name == "graph" and step is not None else name
        if name == "compiled" and capture and step is not None:
            timing["captured"] = step.graph is not None  # False: capture failed (warned)
        timing["weights"] = float_weights(fresh.model)
        modes[name] = timing
    results["graphs"] = int(counters["stats"]["unique_graphs"])
    results["breaks"] = sum(counters["graph_break"].values())
    results["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"])
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, default=10, help="steps per epoch (default 10)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed epochs per mode, rate = median (default 3)"
    )
    parser.add_argument("--width", type=int, default=64, help="ResNet-18 width (default 64)")
    parser.add_argument(
        "--methods", nargs="+", choices=TRAINED_METHODS, default=list(TRAINED_METHODS)
    )
    parser.add_argument(
        "--amp", choices=["bfloat16", "float16", "none"], default="bfloat16", help="CUDA only"
    )
    parser.add_argument("--backend", choices=BACKENDS, default="inductor")
    parser.add_argument(
        "--mode", choices=MODES, default=None, help="inductor only (default reduce-overhead)"
    )
    parser.add_argument("--update", choices=UPDATES, default="traced")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument(
        "--capture",
        action="store_true",
        help="capture the compiled phase as the step's own CUDA graph, as the trainer does "
        f"(CUDA; --mode {' or '.join(CAPTURE_MODES)}, default {CAPTURE_MODES[0]})",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="inductor's cache folder (TORCHINDUCTOR_CACHE_DIR): a second process with the "
        "same folder reuses the first's compiled kernels and autotuning choices",
    )
    args = parser.parse_args(argv)
    if args.steps < 1 or args.repeats < 1:
        parser.error("--steps and --repeats must be >= 1")
    if args.mode is not None and args.backend != "inductor":
        parser.error(f"--mode is an inductor mode; --backend is {args.backend}")
    if args.backend == "inductor" and args.mode is None:
        args.mode = CAPTURE_MODES[0] if args.capture else "reduce-overhead"
    if args.capture:
        try:
            check_capture(torch.device(args.device), args.mode)
        except ValueError as error:
            parser.error(str(error))
    if args.amp == "float16" and args.device == "cuda":
        parser.error("--amp float16 needs the GradScaler, which the static step cannot run")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but CUDA is not available")
    return args


#: The weight gaps printed: (trained, reference); ``floor`` against ``graph`` first.
GAPS: tuple[tuple[str, str], ...] = (
    ("floor", "graph"),
    ("graph", "eager"),
    ("compiled", "eager"),
    ("compiled", "graph"),
)


def weights_digest(weights: dict[str, torch.Tensor]) -> str:
    """The first 16 hex digits of a SHA-256 of the weights in name order: the same in two
    processes exactly when they trained the same weights bit for bit."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(weights[name].numpy().tobytes())
    return digest.hexdigest()[:16]


def weight_gaps(result: dict[str, Any]) -> dict[tuple[str, str], float]:
    """The relative gaps of :data:`GAPS` between the modes that ran."""
    modes = result["modes"]
    weights = {name: entry["weights"] for name, entry in modes.items() if "weights" in entry}
    return {
        (top, bottom): relative_gap(weights[top], weights[bottom], result["initial"])
        for top, bottom in GAPS
        if top in weights and bottom in weights
    }


def compiled_matches(gaps: dict[tuple[str, str], float], tolerance: float) -> bool | None:
    """Whether both compiled gaps are within max(FLOOR_FACTOR x floor, tolerance)."""
    compiled = [gap for (top, _), gap in gaps.items() if top == "compiled"]
    if not compiled:
        return None
    bound = max(FLOOR_FACTOR * gaps.get(("floor", "graph"), 0.0), tolerance)
    return max(compiled) <= bound


def format_row(method: str, result: dict[str, Any], tolerance: float) -> str:
    """One table row: rates, ratios, first-epoch seconds, weight gaps, dynamo counts."""
    modes = result["modes"]
    rates = {name: modes.get(name, {}).get("images_per_s") for name in STEP_MODES}
    cells = [f"{method:<15}{result['batch']:>6}"]
    for name in STEP_MODES:
        cells.append(f"{rates[name]:>10.1f}" if rates[name] else f"{'-':>10}")
    for top, bottom in (("graph", "eager"), ("compiled", "eager"), ("compiled", "graph")):
        ratio = rates[top] / rates[bottom] if rates[top] and rates[bottom] else None
        cells.append(f"{ratio:>7.2f}" if ratio else f"{'-':>7}")
    for name in STEP_MODES:
        first = modes.get(name, {}).get("warmup_s")
        cells.append(f"{first:>8.1f}" if first is not None else f"{'-':>8}")
    gaps = weight_gaps(result)
    for pair in GAPS:
        cells.append(f"{gaps[pair]:>9.1e}" if pair in gaps else f"{'-':>9}")
    match = compiled_matches(gaps, tolerance)
    cells.append(f"{'-' if match is None else 'yes' if match else 'NO':>6}")
    cells.append(f"{result['graphs']:>7}{result['breaks']:>7}{result['cudagraph_skips']:>8}")
    cells.append(f"  {modes.get('graph', {}).get('ran', '-')}")
    captured = modes.get("compiled", {}).get("captured")
    if captured is not None:
        cells.append(", compiled captured" if captured else ", compiled capture FAILED")
    row = "".join(cells)
    digests = [
        f"{name} {weights_digest(entry['weights'])}"
        for name, entry in modes.items()
        if "weights" in entry
    ]
    ranges = [
        f"{name} {entry['spread'].low:,.1f}-{entry['spread'].high:,.1f} "
        f"({entry['spread'].repeats} epochs)"
        for name, entry in modes.items()
        if "spread" in entry
    ]
    row += "\n  img/s range: " + ", ".join(ranges)
    row += "\n  weights sha256: " + ", ".join(digests)
    for name, entry in modes.items():
        if "error" in entry:
            row += f"\n  {name} failed: {entry['error'][:400]}"
    return row


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.cache_dir is not None:  # read by inductor whenever it opens its caches
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(args.cache_dir.resolve())
    # Dynamo traces through the library's lru_caches: _stream_orders is marked constant and
    # draws._cached_constant only builds a tensor from its arguments, so both trace exactly.
    warnings.filterwarnings("ignore", message="Dynamo detected a call to a `functools.lru_cache`")
    device = torch.device(args.device)
    amp = None if args.amp == "none" or device.type != "cuda" else args.amp
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"device {name} ({args.device}, amp {amp or 'off'}, {torch.get_num_threads()} CPU "
        f"threads), torch {torch.__version__}, ResNet-18 width {args.width}, 32x32; per mode "
        f"{warmup_epochs(args.steps)} warm-up epoch(s) of {args.steps} steps, then "
        f"{args.repeats} timed; "
        f"compiled: backend {args.backend}, mode {args.mode or '-'}, update {args.update}, "
        f"{'captured by the step' if args.capture else 'uncaptured'}, inductor cache "
        f"{args.cache_dir or 'default'}",
        flush=True,
    )
    print(
        "img/s: instances per second, the median of the timed epochs (img/s range: their "
        "range); ratios of img/s; warm s: the warm-up "
        "epochs (capture, compilation); gap a-b: ||w_a - w_b|| / ||w_b - w_0|| at the end, "
        "f: floor (graph with the model in the other memory format); match: compiled gaps <= "
        f"max({FLOOR_FACTOR:g} x gap f-g, {args.tolerance:g}); graphs / breaks / cg-skip: "
        "dynamo graphs, graph breaks and CUDA-graph skips of the compiled step; ran: what the "
        "graph mode ran (and with --capture whether the compiled phase was captured); weights "
        "sha256: equal across processes only for bit-identical weights",
        flush=True,
    )
    print(
        f"{'method':<15}{'batch':>6}{'eager':>10}{'graph':>10}{'compiled':>10}"
        f"{'g/e':>7}{'c/e':>7}{'c/g':>7}{'warm e':>8}{'warm g':>8}{'warm c':>8}"
        f"{'gap f-g':>9}{'gap g-e':>9}{'gap c-e':>9}{'gap c-g':>9}{'match':>6}"
        f"{'graphs':>7}{'breaks':>7}{'cg-skip':>8}  ran",
        flush=True,
    )
    for method in args.methods:
        result = measure_method(
            method,
            RunSpec.from_args(args, device, amp),
            backend=args.backend,
            mode=args.mode,
            update=args.update,
            capture=args.capture,
            repeats=args.repeats,
        )
        print(format_row(method, result, args.tolerance), flush=True)


if __name__ == "__main__":
    main()
