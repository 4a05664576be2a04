"""The guides name only config keys and values the schema accepts.

A user copies `train.step_mode: graph` from a doc into a config; a key renamed in the schema
but not in the docs would fail validation with no hint of where the doc went wrong.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from pipeline_lib.registry import DETECTOR_DEFAULTS

REPO = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
GUIDES = sorted(
    [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "benchmarks").glob("*/README.md")]
)
#: Sections whose next level is a user's id (a data set, a detector, a variant).
FREE_FORM = {"datasets", "detectors", "variants"}


def _sections() -> set[str]:
    """Top-level keys a doc writes as `section.key`."""
    return {
        name
        for name, node in SCHEMA["properties"].items()
        if "properties" in node or name in FREE_FORM
    }


def _node(key: str) -> dict | None:
    """The schema node of a dotted key, None when the schema does not accept it."""
    node: dict = SCHEMA
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            node = node["items"]
        if part in node.get("properties", {}):
            node = node["properties"][part]
        elif depth and parts[depth - 1] == "detectors" and part in DETECTOR_DEFAULTS:
            params = parts[depth + 1 : depth + 2]
            return node if all(p in DETECTOR_DEFAULTS[part] for p in params) else None
        elif depth and parts[depth - 1] in FREE_FORM:
            return {}  # a user's id: what follows is that id's own options
        else:
            return None
    return node


def _is_module(key: str) -> bool:
    """`deploy.export` in a doc is the module pipeline_lib.deploy.export, not a key."""
    try:
        return importlib.util.find_spec(f"pipeline_lib.{key}") is not None
    except ModuleNotFoundError:
        return False


def _mentions() -> list[tuple[str, str, str | None]]:
    """(where, dotted key, value or None) for each backticked `section.key[: value]`."""
    sections = "|".join(sorted(_sections()))
    pattern = re.compile(rf"`((?:{sections})(?:\.[a-z_][a-z0-9_]*)+)(?:\s*[:=]\s*([^`|\s]+))?")
    found = []
    for guide in GUIDES:
        for number, line in enumerate(guide.read_text().splitlines(), 1):
            for match in pattern.finditer(line):
                found.append((f"{guide.relative_to(REPO)}:{number}", *match.groups()))
    return found


def test_the_guides_name_config_keys() -> None:
    mentions = _mentions()
    assert len(mentions) > 50  # the pattern still finds what the guides write
    unknown = [
        (where, key) for where, key, _ in mentions if _node(key) is None and not _is_module(key)
    ]
    assert not unknown, f"keys the schema does not have: {unknown}"


def _wrong_values(mentions: list[tuple[str, str, str | None]]) -> list[tuple]:
    wrong = []
    for where, key, value in mentions:
        allowed = (_node(key) or {}).get("enum")
        if value is not None and allowed is not None and yaml.safe_load(value) not in allowed:
            wrong.append((where, key, value, allowed))
    return wrong


def test_the_guides_give_enum_keys_allowed_values() -> None:
    assert not _wrong_values(_mentions())
    assert _wrong_values([("x.md:1", "train.step_mode", "jit")])
    assert not _wrong_values([("x.md:1", "train.amp", "null")])


def test_the_studies_guide_lists_every_variant_setting() -> None:
    variant = SCHEMA["properties"]["variants"]["additionalProperties"]
    allowed = variant["properties"]["train"]["propertyNames"]["enum"]
    text = (REPO / "docs/studies.md").read_text()
    paragraph = text[text.index("* **Variants**") : text.index("optionally `train_size`")]
    assert re.findall(r"`([a-z_]+)`", paragraph) == allowed


@pytest.mark.parametrize(
    ("key", "known"),
    [
        ("train.step_mode", True),
        ("mvtec.embed.max_fit_patches", True),
        ("embed.max_fit_patches", False),
        ("detectors.kde.chunk_size", True),
        ("detectors.kde.no_such_parameter", False),
        ("datasets.catvsdog.options.layout", True),
        ("train.no_such_key", False),
    ],
)
def test_key_lookup(key: str, known: bool) -> None:
    assert (_node(key) is not None) is known


def _resolves(dotted: str) -> bool:
    """A module, or a module's attribute (a class, a function, a table)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_the_guides_name_code_and_files_that_exist() -> None:
    names, paths = set(), set()
    for guide in GUIDES:
        text = guide.read_text()
        names |= set(re.findall(r"\bpipeline_lib(?:\.[A-Za-z_]\w*)+", text))
        for path in re.findall(
            r"`((?:tests|benchmarks|pipeline_lib|workflow|config|docs)/[^`\s]+)`", text
        ):
            if not any(mark in path for mark in "*{}<"):
                paths.add(path.split("::")[0].rstrip("/."))
    assert len(names) > 20 and len(paths) > 20
    assert not sorted(name for name in names if not _resolves(name))
    assert not sorted(path for path in paths if not (REPO / path).exists())
    assert not _resolves("pipeline_lib.registry.NO_SUCH_TABLE")


def test_config_readme_is_written_from_the_schema() -> None:
    """config/README.md is what `python -m pipeline_lib.config.readme` writes now."""
    from pipeline_lib.config.readme import README, current

    assert README.read_text() == current(), "run: python -m pipeline_lib.config.readme"


def _config_keys(value: object, prefix: str = "") -> set[str]:
    """Dotted keys a config sets; a user's ids (data sets, detectors, variants) as `<id>`."""
    keys: set[str] = set()
    if not isinstance(value, dict):
        return keys
    for name, item in value.items():
        own = "<id>" if prefix in FREE_FORM else name
        dotted = f"{prefix}.{own}" if prefix else own
        keys.add(dotted)
        # Reader options and detector parameters are the data set's or the detector's own
        # (the schema leaves their names to the readers and detectors).
        if dotted not in {"datasets.<id>.options", "detectors.<id>"}:
            keys |= _config_keys(item, dotted)
    return keys


def test_config_readme_explains_every_key_of_the_demo_and_the_paper_config() -> None:
    from pipeline_lib.config.readme import SHOWN_CONFIGS, key_rows

    rowed = {dotted for _, dotted, _ in key_rows(SCHEMA)}
    documented = rowed | set(SCHEMA["properties"])  # a section's own heading names it
    # Cells of each key's row, split at the pipes a description does not escape.
    text = (REPO / "config/README.md").read_text()
    rows = [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in text.splitlines()
        if line.startswith("| `")
    ]
    rows = [(key.strip("`"), description) for key, _, _, description, *_ in rows]
    assert {key for key, _ in rows} == rowed
    assert not [key for key, description in rows if not description.strip()]
    for path in SHOWN_CONFIGS.values():
        keys = _config_keys(yaml.safe_load((REPO / path).read_text()))
        assert {"experiment", "datasets.<id>.classes", "detectors.<id>"} & keys
        # A mapping of a user's ids is documented at its own key (detectors.<id>: detectors).
        missing = {
            key for key in keys if key not in documented and key.rsplit(".", 1)[0] not in documented
        }
        assert not missing, f"{path}: keys config/README.md does not explain: {sorted(missing)}"


def test_the_layout_lists_the_packages_of_pipeline_lib() -> None:
    usage = (REPO / "docs/usage.md").read_text()
    block = usage[usage.index("\npipeline_lib/ ") : usage.index("\nconfig/ ")]
    listed = set(re.findall(r"^  ([a-z_]+)/ ", block, flags=re.MULTILINE))
    modules = set(re.findall(r"^  ([a-z_]+\.py) ", block, flags=re.MULTILINE))
    library = REPO / "pipeline_lib"
    packages = {path.parent.name for path in library.glob("*/__init__.py")}
    assert listed == packages
    assert modules == {path.name for path in library.glob("*.py") if path.name != "__init__.py"}


def test_the_guides_list_every_top_level_key_of_the_schema() -> None:
    """docs/usage.md's table of top-level keys names each key of the schema, and no other."""
    usage = (REPO / "docs/usage.md").read_text()
    table = usage[usage.index("| key | what it sets |") : usage.index("`methods` may also name")]
    named = set(re.findall(r"^\| `([a-z_]+)`(?:, `([a-z_]+)`)? \|", table, flags=re.MULTILINE))
    keys = {key for pair in named for key in pair if key}
    assert keys == set(SCHEMA["properties"])


def test_result_paths_in_the_guides_are_the_result_keys() -> None:
    """A path of a split or a result the guides write is ResultKey's pattern (SPLIT, RESULT),
    not a spelling of its own (`contam{ratio}` once stood where the folder is `contam0`)."""
    from pipeline_lib.config.keys import RESULT, SPLIT

    written = []
    for guide in GUIDES:
        # In the experiment's folder, or with it in front as seen from the checkout.
        pattern = r"`(?:results/<experiment>/)?(\{dataset\}/\{inlier\}/[^`]*)`"
        written += re.findall(pattern, guide.read_text())
    assert len(written) >= 3
    assert not [path for path in written if not path.startswith(SPLIT)]
    for guide in ("README.md", "docs/usage.md", "docs/architecture.md"):
        assert RESULT in (REPO / guide).read_text(), guide


def test_the_guides_place_outputs_in_the_experiment_folder() -> None:
    """A run's outputs lie directly in its experiment's folder, results/<experiment>/: no
    guide, config README or config comment names a second results/ inside it, or a folder
    of the run's outputs straight under results/."""
    inside = "{|summary|studies|mlflow|logs|benchmarks|deploy|mvtec|report"
    stale = re.compile(rf"(?<![\w./-])(?:results/(?:{inside})|experiments/(?:<|droc-))")
    texts = [*GUIDES, REPO / "config/README.md", *(REPO / "config").rglob("*.yaml")]
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in texts
        for match in stale.finditer(path.read_text())
    ]
    assert not found


def test_the_workflow_catalog_file_describes_the_usage() -> None:
    """The Snakemake workflow catalog reads .snakemake-workflow-catalog.yml (and the
    config/README.md tested above) to show how to run the workflow."""
    catalog = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())
    usage = catalog["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    assert "--profile profiles/gpu" in usage["mandatory-flags"]["desc"]
    assert set(usage["software-stack-deployment"]) == {"conda", "apptainer", "apptainer+conda"}
    assert usage["report"] is True
