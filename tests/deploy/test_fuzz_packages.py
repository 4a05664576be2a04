"""Fuzzing the package reader: every damaged file of a package is a named refusal, fast and small.

Beside the image fuzz test (:mod:`tests.deploy.test_fuzz_images`): for each file the reader
opens, a symlink (to ``/dev/zero``, ``/dev/urandom``, a genuine copy outside the package,
nowhere), a FIFO, a directory, truncations and a sparse 100 GB file; and the network spec
raised to ``ARCH_BOUNDS`` (:mod:`tests.deploy.hostile_packages`). Each is opened by
``droc score`` and by the pyfunc's ``load_context`` in a child forked from one parent that
imported torch once; the bounds are those of a denial of service, not a speed target: a
hang, a read of an endless device or a network built before its weights were checked
would take minutes and gigabytes where these take a fraction of a second and megabytes.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.deploy.conftest import run_fresh_python
from tests.deploy.hostile_packages import OPENERS, cases

#: A refusal comes within this (the reader needs ~0.1 s; the child's own deadline is 20 s).
REFUSAL_SECONDS = 5.0
#: Peak RSS growth of a refusal (the intact package loads and scores in ~40 MiB).
REFUSAL_BYTES = 2**30


def test_every_damaged_package_file_is_a_named_refusal(tmp_path: Path) -> None:
    result = run_fresh_python(["-m", "tests.deploy.hostile_packages", str(tmp_path)], timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    expected = {(c.name, c.file, o) for c in cases() for o in OPENERS}
    controls = [run for run in runs if not run["file"]]
    refused = {(run["case"], run["file"], run["opener"]): run for run in runs if run["file"]}
    assert set(refused) == expected
    # The intact package (and the package folder given through a symlink) opens and scores:
    # the harness tells a refusal from a success, and its memory measure sees the reader.
    assert {(run["case"], run["opener"]) for run in controls} == {
        (case, opener) for case in ("intact", "folder_symlink") for opener in OPENERS
    }
    for run in controls:
        assert run["exit"] == 0, run
        assert 2**20 < run["rss_growth"] < REFUSAL_BYTES, run
    worst_seconds = max(run["seconds"] for run in refused.values())
    worst_bytes = max(run["rss_growth"] for run in refused.values())
    print(
        f"package fuzz: {len(refused)} refusals, slowest {worst_seconds:.2f} s, "
        f"largest peak RSS growth {worst_bytes / 2**20:.1f} MiB"
    )
    for (case, file, opener), run in refused.items():
        where = f"{case} of {file} through {opener}: {run['message'][-600:]}"
        assert run["exit"] == 2, where
        assert run["seconds"] < REFUSAL_SECONDS, where
        assert run["rss_growth"] < REFUSAL_BYTES, where
        assert f"/package/{file} " in run["message"] or f"/package/{file}: " in run["message"]
        assert run["says"] in run["message"], where
        assert "Traceback" not in run["message"], where
