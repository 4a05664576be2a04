"""Fuzzing the deploy readers: every hostile file scores or is its own error, memory bounded.

The corpus (:mod:`tests.deploy.hostile_corpus`, seeded) goes through the two paths that read
untrusted images: ``droc score``'s chunks of files (:func:`pipeline_lib.deploy.cli.score_files`)
and the server's rows (:func:`pipeline_lib.deploy.serving.score_rows`). Each item must come
back as a score or as an error row naming it; the good items between the hostile ones score
as they do alone; and a subprocess reading the whole corpus stays within a memory bound
derived from ``max_pixels``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipeline_lib.deploy import cli, serving
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.images import read_image_file
from tests.deploy.conftest import run_fresh_python
from tests.deploy.hostile_corpus import ERROR, SCORE, hostile_inputs

#: Pillow's TIFF reader warns about the damaged tags it skips; the outcome is what is tested.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:PIL.TiffImagePlugin")

SEED = 0
#: Per-image limit of the fuzz runs: the corpus's large legal images (2 Mpx) fit, its lying
#: headers (49 Mpx and up) do not.
MAX_PIXELS = 4_000_000
#: The embedding runs in float32 (eps 1.2e-7) and the batch's composition changes the
#: summation order of its kernels: a score may move by a few hundred eps relative, not more.
SCORE_RTOL = 1e-4


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, bytes, str]]:
    folder = tmp_path_factory.mktemp("hostile")
    items = []
    for name, data, outcome in hostile_inputs(SEED):
        path = folder / name
        path.write_bytes(data)
        items.append((path, data, outcome))
    assert len(items) >= 200
    return items


def _check_outcomes(
    outcomes: dict[str, tuple[float | None, str]], corpus: list[tuple[Path, bytes, str]]
) -> None:
    """Every item once, scored or with a reason; the required outcomes met."""
    assert set(outcomes) == {str(path) for path, _, _ in corpus}
    for path, _, required in corpus:
        score, reason = outcomes[str(path)]
        assert (score is None) != (reason == ""), (path.name, score, reason)
        if required == SCORE:
            assert score is not None, f"{path.name} should score: {reason}"
        elif required == ERROR:
            assert score is None, f"{path.name} should be an error, scored {score}"


def _alone(package: PackagedDetector, paths: list[Path]) -> np.ndarray:
    """Scores of the good files read and scored on their own, without the hostile ones."""
    images = np.stack(
        [read_image_file(p, size=package.image_size, max_pixels=MAX_PIXELS) for p in paths]
    )
    return package.anomaly_scores(images)


def test_droc_score_chunks_score_or_name_every_hostile_file(kde_package: Path, corpus) -> None:
    package = PackagedDetector.load(kde_package)
    files = [path for path, _, _ in corpus]
    outcomes: dict[str, tuple[float | None, str]] = {}
    chunks = 0
    for rows, errors, done in cli.score_files(package, files, max_pixels=MAX_PIXELS):
        assert done == len(rows) + len(errors)
        outcomes.update({row[0]: (row[1], "") for row in rows})
        outcomes.update({path: (None, reason) for path, reason in errors})
        chunks += 1
    assert chunks >= len(files) // cli.CHUNK  # hostile and good files shared chunks
    _check_outcomes(outcomes, corpus)
    scored = [path for path in files if outcomes[str(path)][0] is not None]
    errors = len(files) - len(scored)
    print(f"fuzz, droc score: {len(scored)} scored, {errors} errors of {len(files)} files")
    assert errors >= sum(outcome == ERROR for _, _, outcome in corpus)
    together = np.array([outcomes[str(path)][0] for path in scored])
    np.testing.assert_allclose(together, _alone(package, scored), rtol=SCORE_RTOL)


def test_server_rows_score_or_name_every_hostile_item(kde_package: Path, corpus) -> None:
    package = PackagedDetector.load(kde_package)
    frame = pd.DataFrame(
        {
            "name": [str(path) for path, _, _ in corpus],
            "image": [base64.b64encode(data).decode() for _, data, _ in corpus],
        }
    )
    assert len(frame) <= serving.MAX_ROWS
    answer = serving.score_rows(package, frame, max_pixels=MAX_PIXELS, request_pixels=10**12)
    assert list(answer["name"]) == list(frame["name"])
    outcomes = {
        name: (score, error)
        for name, score, error in zip(answer["name"], answer["score"], answer["error"], strict=True)
    }
    _check_outcomes(outcomes, corpus)
    scored = [path for path, _, _ in corpus if outcomes[str(path)][0] is not None]
    together = np.array([outcomes[str(path)][0] for path in scored], dtype=np.float64)
    np.testing.assert_allclose(together, _alone(package, scored), rtol=SCORE_RTOL)


#: Read the corpus in a fresh process, as droc score (files) and the server (bytes) do, and
#: report the growth of the peak RSS (VmHWM, reset after warming up) over the RSS then.
_MEMORY_SCRIPT = """
import base64, json, sys
from pathlib import Path
from pipeline_lib.deploy import cli
from pipeline_lib.deploy.images import ImageError, decode_base64_image, read_images

folder, max_pixels = Path(sys.argv[1]), int(sys.argv[2])
files = sorted(folder.iterdir())
good = [p for p in files if "_good" in p.name][:2]
read_images(good, size=32, max_pixels=max_pixels)  # warm up: imports, codecs, allocator


def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024


# Reset the peak RSS to the current one (Linux >= 4.0), so the imports' peak is not counted.
Path("/proc/self/clear_refs").write_text("5")
base = status("VmRSS")
counts = {"scored": 0, "errors": 0}
for chunk, header_errors in cli.chunk_files(files, size=32, max_pixels=max_pixels):
    scored, errors = read_images(chunk, size=32, max_pixels=max_pixels)
    counts["scored"] += len(scored)
    counts["errors"] += len(header_errors) + len(errors)
for path in files:
    try:
        decode_base64_image(base64.b64encode(path.read_bytes()), size=32, max_pixels=max_pixels)
    except ImageError:
        pass
print(json.dumps({"delta_bytes": status("VmHWM") - base, **counts}))
"""


def test_reading_the_corpus_stays_within_a_memory_bound(corpus) -> None:
    folder = corpus[0][0].parent
    result = run_fresh_python(["-c", _MEMORY_SCRIPT, str(folder), str(MAX_PIXELS)], timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # One decode at max_pixels holds at most: Pillow's image (4 bytes a pixel: RGB is stored
    # as 32 bits), its RGB conversion (4), the numpy copy and its bytes (3 + 3), then the
    # resize's input and output images (4 + 4): 22 bytes a pixel. Plus 64 MiB for the codec
    # buffers, the largest file in memory and the allocator's slack. A lying header decoded
    # (65,535 x 65,535 is 17 GB) or a 1,000,000 x 1 resize intermediate (3 GB) is far above.
    bound = 22 * MAX_PIXELS + 64 * 2**20
    print(
        f"fuzz memory: peak RSS grew {report['delta_bytes'] / 2**20:.1f} MiB, bound "
        f"{bound / 2**20:.0f} MiB; {report['scored']} scored, {report['errors']} errors"
    )
    assert report["scored"] + report["errors"] == len(corpus)
    assert report["delta_bytes"] <= bound
    # The measure sees real decoding: large_gray.png (2,000 x 1,000) alone is 6 MB as RGB.
    assert report["delta_bytes"] >= 3 * 2_000 * 1_000
