"""Opening a package runs no code from it: old pickle packages and hostile specs are refused."""

from __future__ import annotations

import json
import os
import pickle
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pipeline_lib.deploy import representation_file
from pipeline_lib.deploy.cli import main as droc
from pipeline_lib.deploy.detector_state import ARRAYS_FILE, STATE_FILE
from pipeline_lib.deploy.image_package import PackagedDetector
from pipeline_lib.deploy.package_format import PACKAGE_FORMAT, PackageError
from pipeline_lib.deploy.package_kinds import load_package_folder
from pipeline_lib.deploy.representation_file import MAX_PICKLE_BYTES, check_representation_spec
from tests.deploy.conftest import SMALL_SIZE, small_package


class _Payload:
    """Unpickling this object creates ``path``: what a planted ``detector.pkl`` would do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _images(seed: int, n: int = 6) -> np.ndarray:
    return np.random.default_rng(seed).integers(
        0, 256, size=(n, SMALL_SIZE, SMALL_SIZE, 3), dtype=np.uint8
    )


def _as_format_2(folder: Path, marker: Path) -> None:
    """Turn a package into a format 2 one whose detector.pkl would create ``marker``."""
    path = folder / "package.json"
    document = json.loads(path.read_text())
    document["format"] = "droc-deploy-package/2"
    path.write_text(json.dumps(document))
    (folder / ARRAYS_FILE).unlink()
    (folder / STATE_FILE).unlink()
    (folder / "detector.pkl").write_bytes(pickle.dumps(_Payload(marker)))


@pytest.mark.parametrize("detector", ["gde", "ocsvm"])
def test_a_package_round_trips_without_a_pickle(detector: str, tmp_path: Path) -> None:
    package = small_package(tmp_path / "package", detector)
    assert json.loads((tmp_path / "package" / "package.json").read_text())["format"] == (
        PACKAGE_FORMAT
    )
    assert not list((tmp_path / "package").glob("*.pkl"))
    loaded = load_package_folder(tmp_path / "package")
    images = _images(2)
    scores = package.anomaly_scores(images)
    assert np.ptp(scores) > 0
    # Same arrays, same scoring code: the same kernels run by construction.
    np.testing.assert_array_equal(loaded.anomaly_scores(images), scores)


def test_a_format_2_package_is_refused_and_its_pickle_never_opened(tmp_path: Path) -> None:
    small_package(tmp_path / "package")
    marker = tmp_path / "marker"
    _as_format_2(tmp_path / "package", marker)
    with pytest.raises(PackageError, match="droc-deploy-package/2 package, whose detector is a"):
        load_package_folder(tmp_path / "package")
    with pytest.raises(PackageError, match="re-run the deploy step.*deploy_model"):
        PackagedDetector.load(tmp_path / "package")
    assert not marker.exists()


def test_droc_score_refuses_a_planted_pickle(tmp_path: Path, capsys) -> None:
    small_package(tmp_path / "package")
    marker = tmp_path / "marker"
    _as_format_2(tmp_path / "package", marker)
    Image.fromarray(_images(3, 1)[0]).save(tmp_path / "a.png")
    argv = ["score", "--model", str(tmp_path / "package"), str(tmp_path / "a.png")]
    code = droc([*argv, "--output", str(tmp_path / "out.csv"), "--no-progress"])
    assert code == 2 and "does not load pickles" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "out.csv").exists()


def test_a_format_3_folder_with_only_a_pickle_is_refused(tmp_path: Path) -> None:
    small_package(tmp_path / "package")
    marker = tmp_path / "marker"
    (tmp_path / "package" / ARRAYS_FILE).unlink()
    (tmp_path / "package" / STATE_FILE).unlink()
    (tmp_path / "package" / "detector.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(PackageError, match="holds detector.pkl, a pickled detector"):
        load_package_folder(tmp_path / "package")
    assert not marker.exists()


def test_a_pickle_beside_the_state_is_ignored(tmp_path: Path) -> None:
    package = small_package(tmp_path / "package")
    marker = tmp_path / "marker"
    (tmp_path / "package" / "detector.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    loaded = load_package_folder(tmp_path / "package")
    np.testing.assert_array_equal(
        loaded.anomaly_scores(_images(4)), package.anomaly_scores(_images(4))
    )
    assert not marker.exists()


def _trained(**arch: object) -> dict:
    return {"kind": "trained", "method": "rotnet", "arch": {"method": "rotnet", **arch}}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"kind": "frozen", "method": "raw", "seed": 0, "width": 10**6}, r"width is 1000000"),
        ({"kind": "frozen", "method": "raw", "seed": -1, "width": 8}, r"seed is -1"),
        ({"kind": "frozen", "method": "raw", "seed": 0, "width": True}, r"width is True"),
        ({"kind": "frozen", "method": "resnet50_imagenet", "seed": 0, "width": 8}, "method is"),
        ({"kind": "frozen", "method": "raw", "seed": 0, "width": 8, "x": 1}, r"key\(s\) \['x'\]"),
        (_trained(width=2048), r"arch\.width is 2048"),
        (_trained(image_size=4096), r"arch\.image_size is 4096"),
        (_trained(head_depth=10**4), r"arch\.head_depth is 10000"),
        (_trained(stem_width=10**5), r"arch\.stem_width is 100000"),
        (_trained(method="os.system"), r"arch\.method is 'os.system'"),
        (_trained(depth=9), r"\['arch\.depth'\]"),
        ({"kind": "code", "method": "rotnet"}, "kind 'code' is not"),
    ],
)
def test_a_hostile_representation_spec_is_refused_by_name(spec: dict, message: str) -> None:
    with pytest.raises(PackageError, match=message):
        check_representation_spec(spec, Path("representation.pt"))


def test_a_representation_asking_for_a_huge_network_is_refused_before_building(
    tmp_path: Path, monkeypatch
) -> None:
    small_package(tmp_path / "package")
    path = tmp_path / "package" / "representation.pt"
    payload = torch.load(path, weights_only=True)
    del payload["seed"], payload["width"]  # keys of a frozen spec
    payload.update(kind="trained", method="rotnet", arch={"method": "rotnet", "width": 65536})
    torch.save(payload, path)

    def refuse(*args, **kwargs):
        raise AssertionError("a network was built from a hostile spec")

    monkeypatch.setattr("pipeline_lib.deploy.representation_file.build_proxy_model", refuse)
    with pytest.raises(PackageError, match=r"representation\.pt: arch\.width is 65536"):
        load_package_folder(tmp_path / "package")


def _real_builds(monkeypatch) -> list[str]:
    """Record the builds of a network on a real device (a build on ``meta`` allocates nothing)."""
    real: list[str] = []
    for name in ("build_proxy_model", "build_representation"):
        original = getattr(representation_file, name)

        def build(*args, _original=original, _name=name, **kwargs):
            if torch.get_default_device().type != "meta":
                real.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(representation_file, name, build)
    return real


def _trained_package(folder: Path) -> None:
    """A package whose representation is a RotNet of width 4 (real weights to compare)."""
    from tests.deploy.hostile_packages import small_trained_package

    small_trained_package(folder)


def _rewrite(path: Path, edit) -> None:
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)


def test_a_spec_within_the_bounds_but_larger_than_its_weights_is_never_built(
    tmp_path: Path, monkeypatch
) -> None:
    _trained_package(tmp_path / "package")
    path = tmp_path / "package" / "representation.pt"
    _rewrite(path, lambda p: p["arch"].update(width=1024, image_size=1024))
    real = _real_builds(monkeypatch)
    with pytest.raises(PackageError, match="refused before building it") as caught:
        load_package_folder(tmp_path / "package")
    assert real == []
    sizes = re.search(
        r"network of ([\d,]+) parameter .* declares ([\d,]+) bytes", str(caught.value)
    )
    network, weights = (int(text.replace(",", "")) for text in sizes.groups())
    assert network > 10**4 * weights  # a width-1024 ResNet-18 against the width-4 weights
    monkeypatch.undo()
    _rewrite(path, lambda p: p["arch"].update(width=4, image_size=8))
    real = _real_builds(monkeypatch)
    load_package_folder(tmp_path / "package")  # the spec it was written with: built once
    assert real == ["build_proxy_model"]


def test_weights_of_the_right_size_but_other_names_or_shapes_are_refused(tmp_path: Path) -> None:
    _trained_package(tmp_path / "package")
    path = tmp_path / "package" / "representation.pt"
    original = path.read_bytes()
    state = torch.load(path, weights_only=True)["state_dict"]
    name = next(k for k, v in state.items() if v.ndim == 4)

    def reshape(payload: dict) -> None:
        weight = payload["state_dict"][name]
        payload["state_dict"][name] = weight.reshape(weight.shape[0], -1).clone()

    _rewrite(path, reshape)
    with pytest.raises(PackageError, match=rf"tensor '{re.escape(name)}' is torch.float32 \("):
        load_package_folder(tmp_path / "package")
    path.write_bytes(original)
    _rewrite(path, lambda p: p["state_dict"].update(renamed=p["state_dict"].pop(name)))
    with pytest.raises(PackageError, match=r"missing \[.*\], unexpected \['renamed'\]"):
        load_package_folder(tmp_path / "package")


def test_a_zip_directory_larger_than_its_members_may_take_is_refused_unparsed(
    tmp_path: Path,
) -> None:
    small_package(tmp_path / "package")
    path = tmp_path / "package" / ARRAYS_FILE
    data = bytearray(path.read_bytes())
    at = data.rfind(b"PK\x05\x06")
    data[at + 12 : at + 16] = (2**31).to_bytes(4, "little")  # the directory's declared size
    path.write_bytes(bytes(data))
    with pytest.raises(PackageError, match=r"zip directory of \d+ members in 2,147,483,648 byt"):
        load_package_folder(tmp_path / "package")


def test_every_file_is_refused_by_kind_before_any_is_read(tmp_path: Path, monkeypatch) -> None:
    _trained_package(tmp_path / "package")
    (tmp_path / "package" / ARRAYS_FILE).unlink()
    (tmp_path / "package" / ARRAYS_FILE).symlink_to("/dev/zero")
    real = _real_builds(monkeypatch)
    with pytest.raises(PackageError, match=r"detector\.npz is a symlink to /dev/zero;"):
        load_package_folder(tmp_path / "package")
    assert real == []  # named before the network was built


def test_the_package_folder_may_be_a_symlink(tmp_path: Path) -> None:
    package = small_package(tmp_path / "package")
    (tmp_path / "link").symlink_to(tmp_path / "package")
    loaded = load_package_folder(tmp_path / "link")
    np.testing.assert_array_equal(
        loaded.anomaly_scores(_images(5)), package.anomaly_scores(_images(5))
    )


def test_a_representation_member_that_is_not_tensor_data_is_bounded(tmp_path: Path) -> None:
    small_package(tmp_path / "package")
    path = tmp_path / "package" / "representation.pt"
    with zipfile.ZipFile(path, "a") as archive:  # torch reads such records whole
        archive.writestr("representation/byteorder_extra", b"\0" * (2 * MAX_PICKLE_BYTES))
    with pytest.raises(PackageError, match=r"member representation/byteorder_extra declares"):
        load_package_folder(tmp_path / "package")
