"""Hostile package folders, each opened in a forked child: exit status, time and peak memory.

Run as ``python -m tests.deploy.hostile_packages FOLDER``: the parent imports torch, MLflow
and the package reader once (one thread), builds a tiny real package (a RotNet of width 4
and a GDE, :func:`small_trained_package`), then, for every case of :func:`cases`, copies
the package, damages one file and forks a child that opens it the way ``droc score`` does
(:func:`pipeline_lib.deploy.cli.main`) and the way a served model does
(:meth:`pipeline_lib.deploy.serving.DrocPyfunc.load_context`). The parent takes the child's
wall time and peak RSS from ``os.wait4`` and prints one JSON line per run.

A child that regresses cannot take the machine with it: its address space is capped
(:data:`ADDRESS_SPACE_HEADROOM` above the parent's) and an alarm ends it after
:data:`CHILD_DEADLINE_S`.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from pipeline_lib.deploy import cli
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.package_format import PackageError
from pipeline_lib.deploy.package_kinds import load_package_folder
from pipeline_lib.deploy.representation_file import ARCH_BOUNDS, representation_spec
from pipeline_lib.deploy.serving import ARTIFACT, DrocPyfunc
from pipeline_lib.detection.detectors import make_detector
from pipeline_lib.models.embed import extract_embeddings
from pipeline_lib.models.proxy import build_proxy_model
from pipeline_lib.registry import method_spec

#: Files the package reader opens.
PACKAGE_FILES = ("package.json", "detector.json", "detector.npz", "representation.pt")
#: Side of the tiny package's images, and its network's width.
SIZE, WIDTH = 8, 4
#: A child still running after this is ended by SIGALRM (the test's bound is lower).
CHILD_DEADLINE_S = 20
#: How far a child's address space may grow past the parent's before allocations fail.
ADDRESS_SPACE_HEADROOM = 3 * 2**30
#: Sparse file size of the "huge" case: refused by its size, never read.
SPARSE_BYTES = 100 * 10**9
#: Fractions of a file's size it is truncated at.
TRUNCATIONS = (0.0, 0.3, 0.7)
#: How each run opens the package.
OPENERS = ("droc", "pyfunc")


def small_trained_package(folder: Path) -> PackagedDetector:
    """A tiny real package: a RotNet (width 4, 8 px, its initial weights) and a fitted GDE."""
    torch.manual_seed(0)
    model = build_proxy_model("rotnet", width=WIDTH, image_size=SIZE).eval()
    spec = representation_spec("rotnet", seed=0, width=WIDTH, arch=model.arch)
    images = np.random.default_rng(0).integers(0, 256, (40, SIZE, SIZE, 3), dtype=np.uint8)
    features = extract_embeddings(model, images, batch_size=64, device="cpu")["f"]
    package = PackagedDetector(
        model,
        make_detector("gde").fit(features),
        image_size=SIZE,
        threshold=0.0,
        info={"representation": spec},
    )
    package.save(folder)
    return package


@dataclass(frozen=True)
class Case:
    """One damage to one file of a copy of the package, and what its refusal must say."""

    name: str
    file: str
    damage: Callable[[Path, Path], None]  # (package folder, scratch folder)
    says: str


def _symlink_to(target: str | Callable[[Path, Path], Path]) -> Callable[[Path, Path], None]:
    def damage(path: Path, scratch: Path) -> None:
        where = target(path, scratch) if callable(target) else target
        path.unlink()
        path.symlink_to(where)

    return damage


def _outside_copy(path: Path, scratch: Path) -> Path:
    copy = scratch / f"outside_{path.name}"
    shutil.copyfile(path, copy)  # the genuine file, outside the package
    return copy


def _fifo(path: Path, scratch: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _directory(path: Path, scratch: Path) -> None:
    path.unlink()
    path.mkdir()


def _truncate(fraction: float) -> Callable[[Path, Path], None]:
    def damage(path: Path, scratch: Path) -> None:
        os.truncate(path, int(path.stat().st_size * fraction))

    return damage


def _sparse(path: Path, scratch: Path) -> None:
    os.truncate(path, SPARSE_BYTES)


def _spec(method: str, **arch: int) -> Callable[[Path, Path], None]:
    """Rewrite the spec of ``representation.pt`` (weights unchanged) to ``arch``."""

    def damage(path: Path, scratch: Path) -> None:
        payload = torch.load(path, weights_only=True)
        payload["method"] = method
        payload["head"] = method_spec(method).head
        payload["arch"] = {**payload["arch"], "method": method, **arch}
        torch.save(payload, path)

    return damage


def cases() -> Iterator[Case]:
    """Every damage of every package file, then specs raised to :data:`ARCH_BOUNDS`."""
    symlink = "a symlink to "
    for file in PACKAGE_FILES:
        yield Case("symlink_dev_zero", file, _symlink_to("/dev/zero"), symlink)
        yield Case("symlink_dev_urandom", file, _symlink_to("/dev/urandom"), symlink)
        yield Case("symlink_outside", file, _symlink_to(_outside_copy), symlink)
        yield Case("symlink_dangling", file, _symlink_to("/nonexistent/gone"), symlink)
        yield Case("fifo", file, _fifo, "a FIFO")
        yield Case("directory", file, _directory, "a directory")
        damaged = "is not JSON" if file.endswith(".json") else "truncated or damaged"
        for fraction in TRUNCATIONS:
            yield Case(f"truncated_{fraction:g}", file, _truncate(fraction), damaged)
        yield Case("sparse_100GB", file, _sparse, "bytes, over the limit of")
    top = {key: high for key, (_, high) in ARCH_BOUNDS.items() if key != "seed"}
    rep, larger = "representation.pt", "refused before building it"
    yield Case("spec_width_max", rep, _spec("rotnet", width=top["width"]), larger)
    yield Case("spec_width_image_1024", rep, _spec("rotnet", width=1024, image_size=1024), larger)
    # RotNet has no head: a head depth is refused by its builder, on the meta device.
    yield Case("spec_rotnet_all_max", rep, _spec("rotnet", **top), "no network this version")
    yield Case("spec_contrastive_all_max", rep, _spec("contrastive", **top), larger)
    headless = {key: value for key, value in top.items() if key != "head_depth"}
    yield Case("spec_denoising_all_max", rep, _spec("denoising", **headless), larger)
    image = top["image_size"]
    yield Case("spec_denoising_image_max", rep, _spec("denoising", image_size=image), larger)


def _open(opener: str, folder: Path, image: Path, scratch: Path) -> int:
    """What the child does: 0 when the package opens (and scores), 2 when it is refused."""
    if opener == "droc":
        output = scratch / "scores.csv"
        argv = ["score", "--model", str(folder), str(image), "--output", str(output)]
        return cli.main([*argv, "--no-progress"])
    try:
        DrocPyfunc().load_context(SimpleNamespace(artifacts={ARTIFACT: str(folder)}))
    except PackageError as error:
        print(f"droc: {error}", file=sys.stderr)
        return 2
    return 0


def _resident_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _address_space_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_child(opener: str, folder: Path, image: Path, scratch: Path) -> dict:
    """Fork, open the package in the child, and measure it from the parent."""
    log, baseline = scratch / f"{opener}.log", scratch / f"{opener}.rss"
    cap = _address_space_bytes() + ADDRESS_SPACE_HEADROOM
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the parent's code
        code = 99
        try:
            signal.alarm(CHILD_DEADLINE_S)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            # Reset the peak RSS to the current one (Linux >= 4.0): a forked child's starts
            # below its parent's (shared file pages are mapped again only when touched).
            Path("/proc/self/clear_refs").write_text("5")
            baseline.write_text(str(_resident_bytes()))
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            code = _open(opener, folder, image, scratch)
        except BaseException:  # noqa: BLE001 - reported in the log, as status 99
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - start
    return {
        "opener": opener,
        "exit": os.waitstatus_to_exitcode(status),
        "seconds": seconds,
        # ru_maxrss (KiB): the child's peak, from the reset above.
        "rss_growth": usage.ru_maxrss * 1024 - int(baseline.read_text() or 0),
        "message": log.read_text(errors="replace")[-2000:],
    }


def main(folder: Path) -> None:
    torch.set_num_threads(1)
    package_dir = folder / "package"
    small_trained_package(package_dir)
    image = folder / "image.png"
    from PIL import Image

    Image.fromarray(np.full((SIZE, SIZE, 3), 7, np.uint8)).save(image)
    load_package_folder(package_dir)  # warm up: every lazy import of the reading path
    linked = folder / "linked_package"
    linked.symlink_to(package_dir)  # the folder itself may be a symlink
    controls = [("intact", package_dir), ("folder_symlink", linked)]
    for name, target in controls:
        for opener in OPENERS:
            scratch = folder / "runs" / f"{name}_{opener}"
            scratch.mkdir(parents=True)
            record = run_child(opener, target, image, scratch)
            print(json.dumps({"case": name, "file": "", "says": "", **record}), flush=True)
    for k, case in enumerate(cases()):
        for opener in OPENERS:
            scratch = folder / "runs" / f"{k}_{opener}"
            scratch.mkdir(parents=True)
            copy = scratch / "package"
            shutil.copytree(package_dir, copy)
            case.damage(copy / case.file, scratch)
            record = run_child(opener, copy, image, scratch)
            line = {"case": case.name, "file": case.file, "says": case.says, **record}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
