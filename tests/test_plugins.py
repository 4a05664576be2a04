"""Methods and detectors from an installed package: opted in by a config's ``plugins``,
validated and planned like built-in rows, recorded with their package's version, and
invisible to a config that does not name them."""

from __future__ import annotations

import copy
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline_lib.config.grids import variant_training
from pipeline_lib.config.schema import load_schema
from pipeline_lib.config.validate import ConfigError, validate_config
from pipeline_lib.registry import (
    DETECTOR_DEFAULTS,
    METHOD_SPECS,
    activate_plugins,
    detector_job_params,
    plugin_note,
)
from tests.plugin_packages import REPO, example_paths, write_distribution

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
CONFIG = {
    "plugins": ["droc_plugin_example"],
    "datasets": {"digits": {"classes": ["0"]}},
    "methods": ["rotnet", "flip"],
    "seeds": [0],
    "detectors": {"kde": {}, "lof": {"n_neighbors": 5}},
    "train": {"epochs": 2, "plugin": {"label_smoothing": 0.1}},
}


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The example package findable (installed, or a throwaway distribution); the tables
    hold the built-in rows alone again afterwards."""
    for path in example_paths(tmp_path):
        monkeypatch.syspath_prepend(str(path))
    # Parsing the Snakefile in this process (the planner) exports $DROC_PLUGINS: undone after.
    monkeypatch.setenv("DROC_PLUGINS", "")  # records its state (delenv of an unset one does not)
    yield
    activate_plugins([])


def test_a_config_naming_the_plugin_validates_its_rows_and_says_which_package(example) -> None:
    validated = validate_config(CONFIG, SCHEMA)
    assert validated["plugins"] == ["droc_plugin_example"]
    assert plugin_note() == (
        "plugin droc_plugin_example: droc-plugin-example==0.1.0 provides method flip, detector lof"
    )
    assert METHOD_SPECS["flip"].task == "droc_plugin_example.flip:TASK"
    assert DETECTOR_DEFAULTS["lof"] == {"n_neighbors": 20, "normalize": True}
    # Job params: the training section and the detector parameters carry the package's
    # version (a new version re-runs the jobs; a job refuses another installed one).
    training = variant_training("flip", validated["train"], validated["variants"])
    assert training["package"] == "droc-plugin-example==0.1.0"
    assert training["plugin"] == {"label_smoothing": 0.1}
    assert "package" not in variant_training("rotnet", validated["train"], {})
    assert "plugin" not in variant_training("rotnet", validated["train"], {})
    params = detector_job_params(validated["detectors"])
    assert params == {
        "kde": {},
        "lof": {"n_neighbors": 5, "package": "droc-plugin-example==0.1.0"},
    }


def test_installed_plugins_a_config_does_not_name_change_nothing(example) -> None:
    before = copy.deepcopy(load_schema(SCHEMA))
    validate_config(CONFIG, SCHEMA)
    plain = {key: value for key, value in CONFIG.items() if key != "plugins"}
    with pytest.raises(ConfigError) as error:
        validate_config(plain, SCHEMA)
    assert "config key 'detectors': 'lof' is not allowed" in str(error.value)
    # The error says where the row comes from and how to opt in (nothing imported).
    assert (
        "'lof' is a row of the installed package droc-plugin-example: add plugins: "
        "[droc_plugin_example] to use it" in str(error.value)
    )
    assert "flip" not in METHOD_SPECS and "lof" not in DETECTOR_DEFAULTS
    assert load_schema(SCHEMA) == before
    assert plugin_note() == ""


def test_an_unknown_plugin_is_a_clear_error(example) -> None:
    with pytest.raises(ConfigError, match="config key 'plugins': 'droc_no_such' is not an"):
        validate_config({**CONFIG, "plugins": ["droc_no_such"]}, SCHEMA)
    with pytest.raises(ConfigError, match="install it into this environment"):
        validate_config({**CONFIG, "plugins": ["droc_no_such"]}, SCHEMA)


def test_a_variant_may_not_take_a_plugin_id(example) -> None:
    config = {**CONFIG, "variants": {"flip": {"method": "rotnet"}}}
    with pytest.raises(ConfigError, match="'variants.flip': a variant may not reuse a method"):
        validate_config(config, SCHEMA)


def test_a_plugin_may_not_take_a_built_in_id(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "droc_shadow.py").write_text(
        "from pipeline_lib.registry.methods import MethodSpec\n"
        "ROTNET = MethodSpec('rotnet', trained=True, head='rotation_linear',\n"
        "    task='droc_shadow:TASK', batch_size=8, views_per_instance=4)\n"
    )
    methods = {"droc_bench.methods": {"rotnet": "droc_shadow:ROTNET"}}
    monkeypatch.syspath_prepend(str(write_distribution(tmp_path, "droc-shadow", "1.0", methods)))
    monkeypatch.delitem(sys.modules, "droc_shadow", raising=False)
    config = {**CONFIG, "plugins": ["droc_shadow"], "methods": ["rotnet"], "detectors": {"kde": {}}}
    with pytest.raises(ConfigError, match="method 'rotnet' takes a built-in id"):
        validate_config(config, SCHEMA)
    assert METHOD_SPECS["rotnet"].task == "pipeline_lib.ssl.tasks.rotation:TASK"


def test_the_planner_reports_a_plugin_without_rates_as_unmeasured(example, tmp_path) -> None:
    from pipeline_lib.planning.planner import _parse_rates, plan_config
    from pipeline_lib.planning.report import format_plan

    configfile = tmp_path / "plugin.yaml"
    configfile.write_text(yaml.safe_dump({**CONFIG, "experiment": "plugin-plan"}))
    result = plan_config(configfile, measure=False, device="cpu")
    training = result.costs["train_representation"]
    assert training.by_method["flip"].hours is None  # no rate anywhere: unmeasured
    # RotNet keeps its hours from its fallback CPU rate; the rule total is unknown.
    assert training.by_method["rotnet"].hours > 0 and training.hours is None
    assert "flip unmeasured: no cpu rate" in format_plan("plugin", result.costs, device="cpu")
    # A rate given on the command line (an installed package's method is accepted before its
    # config activates it) measures it.
    hours = {}
    for rate in ("24", "48"):
        given = _parse_rates([f"flip={rate}"])
        measured = plan_config(configfile, measure=False, device="cpu", images_per_s=given)
        hours[rate] = measured.costs["train_representation"].by_method["flip"].hours
    assert hours["48"] > 0 and hours["24"] == pytest.approx(2 * hours["48"], rel=1e-12)


def test_the_example_detector_keeps_the_detector_contract(example) -> None:
    validate_config(CONFIG, SCHEMA)
    from sklearn.exceptions import NotFittedError

    from pipeline_lib.detection.detectors import make_detector

    rng = np.random.default_rng(0)
    blob = rng.normal(size=(60, 2)) + np.array([5.0, 5.0])
    far = np.array([[-5.0, -5.0]])
    detector = make_detector("lof", n_neighbors=5, normalize=False)
    with pytest.raises(NotFittedError):
        detector.score_samples(blob)
    assert detector.fit(blob) is detector
    scores = detector.score_samples(np.vstack([blob, far]))
    assert scores.shape == (61,) and scores[-1] < scores[:-1].min()  # higher = more normal
    restored = pickle.loads(pickle.dumps(detector))  # noqa: S301 - the bytes it just wrote
    assert np.array_equal(restored.score_samples(blob), detector.score_samples(blob))
    with pytest.raises(TypeError, match="unknown parameter"):
        make_detector("lof", radius=1.0)
    with pytest.raises(ValueError, match="planned with droc-plugin-example==9.9"):
        make_detector("lof", package="droc-plugin-example==9.9")


@pytest.mark.slow
def test_a_plugin_model_records_its_package_and_settings(example) -> None:
    """The checkpoint fingerprint names the package version and train.plugin; the flip task
    reads train.plugin and trains (its loss starts near log 2, two balanced labels)."""
    validated = validate_config(CONFIG, SCHEMA)
    from pipeline_lib.data import load_dataset
    from pipeline_lib.ssl.run import prepare_run
    from pipeline_lib.ssl.settings import TrainSettings
    from pipeline_lib.ssl.train import train_representation

    images = load_dataset("digits").train_images[:32]
    training = variant_training("flip", validated["train"], validated["variants"])
    settings = TrainSettings.from_config("flip", {**training, "head_depth": 1}, width=4)
    run, _ = prepare_run(settings, images, seed=0)
    assert run.fingerprint["package"] == "droc-plugin-example==0.1.0"
    assert run.fingerprint["plugin"] == {"label_smoothing": 0.1}
    model, history = train_representation(settings, images, seed=0)
    assert model.arch["method"] == "flip" and len(history) == 2
    # Cross-entropy of two classes from a fresh head: about log 2, smoothing or not.
    assert history[0]["loss"] == pytest.approx(np.log(2), abs=0.2)
    with pytest.raises(ValueError, match="planned with droc-plugin-example==0.0.1"):
        TrainSettings.from_config("flip", {**training, "package": "droc-plugin-example==0.0.1"})


def test_a_plugin_detector_cell_is_refused_for_deployment(example) -> None:
    """A package holds data only; a plugin detector scores with its package's code."""
    deploy = {"dataset": "digits", "method": "flip", "registered_name": "droc-flip"}
    validated = validate_config({**CONFIG, "deploy": {**deploy, "detector": "kde"}}, SCHEMA)
    assert validated["deploy"]["method"] == "flip"  # a plugin's method packages as data
    with pytest.raises(
        ConfigError,
        match="'deploy.detector': 'lof' comes from the plugin package "
        "droc-plugin-example==0.1.0 and cannot be packaged",
    ):
        validate_config({**CONFIG, "deploy": {**deploy, "detector": "lof"}}, SCHEMA)


def test_a_package_without_the_head_kind_of_a_method_outside_the_table_is_refused() -> None:
    from pipeline_lib.deploy.package_format import PackageError
    from pipeline_lib.deploy.representation_file import check_representation_spec

    arch = {"method": "flip", "width": 8, "head_depth": 1, "head_hidden": 8, "proj_dim": 8}
    spec = {"kind": "trained", "method": "flip", "arch": arch}
    with pytest.raises(PackageError, match="the head kind of 'flip' is missing"):
        check_representation_spec(spec, Path("representation.pt"))
    with pytest.raises(PackageError, match="head is 'bogus'; allowed: projection"):
        check_representation_spec({**spec, "head": "bogus"}, Path("representation.pt"))
    check_representation_spec(
        {**spec, "head": "projection", "backbone": "resnet18_small"}, Path("representation.pt")
    )
    rotnet = {"kind": "trained", "method": "rotnet", "arch": {**arch, "method": "rotnet"}}
    with pytest.raises(PackageError, match="head 'projection' is not the head of rotnet"):
        check_representation_spec({**rotnet, "head": "projection"}, Path("representation.pt"))
    with pytest.raises(PackageError, match="backbone is 'vit'; allowed: resnet18_small"):
        check_representation_spec({**spec, "head": "projection", "backbone": "vit"}, Path("r.pt"))


def test_validating_a_plugin_config_imports_no_torch(tmp_path: Path) -> None:
    """The Snakefile validates at parse time: the plugin's specs load, its task does not."""
    import os
    import subprocess

    paths = [str(path) for path in example_paths(tmp_path)]
    code = (
        "import sys\n"
        "from pipeline_lib.config.validate import validate_config\n"
        f"validate_config({CONFIG!r}, {str(SCHEMA)!r})\n"
        "print(sorted(m for m in ('torch', 'droc_plugin_example.flip') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(REPO)])}
    env.pop("DROC_PLUGINS", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == "[]"
