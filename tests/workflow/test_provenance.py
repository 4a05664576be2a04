"""The report carries its provenance: config, code version and package versions."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from pipeline_lib.results.provenance import code_provenance, provenance_html
from tests.workflow.conftest import REPO, run_snakemake

pytestmark = pytest.mark.workflow

TINY = REPO / "tests/configs/tiny.yaml"


def test_provenance_names_config_code_and_packages(tiny_run: Path) -> None:
    provenance = json.loads((tiny_run / "summary/provenance.json").read_text())
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert provenance["code"]["commit"] == head
    assert provenance["code"]["describe"].startswith(head[:7])
    assert provenance["packages"]["torch"] == importlib.metadata.version("torch")
    assert provenance["packages"]["snakemake"] == importlib.metadata.version("snakemake")
    # The validated config: the file's values plus the schema's defaults.
    tiny = yaml.safe_load(TINY.read_text())
    assert provenance["config"]["datasets"]["digits"]["classes"] == ["0", "8"]
    assert provenance["config"]["seeds"] == tiny["seeds"]
    assert provenance["config"]["train"]["epochs"] == 2048  # a default the file leaves out
    logged = json.loads((tiny_run / "mlflow/logged.json").read_text())
    assert provenance["sweep"] == logged["sweep"]
    page = (tiny_run / "summary/provenance.html").read_text()
    assert page == provenance_html(provenance)
    assert head in page and "&quot;digits&quot;" in page


def test_report_embeds_the_provenance(tiny_run: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.zip"  # a zip report keeps every file readable as it is
    run_snakemake(tiny_run, "--configfile", str(TINY), "--report", str(report))
    with zipfile.ZipFile(report) as archive:
        names = archive.namelist()
        pages = [name for name in names if name.endswith("provenance.html")]
        assert len(pages) == 1, names
        page = archive.read(pages[0]).decode()
    provenance = json.loads((tiny_run / "summary/provenance.json").read_text())
    assert provenance["code"]["commit"] in page
    assert any(name.endswith("main_table.html") for name in names)


def test_code_provenance_lists_changed_files(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "test@example.com")
    git("config", "user.name", "test")
    (tmp_path / "Snakefile").write_text("rule all:\n")
    git("add", "Snakefile")
    git("commit", "-q", "-m", "first")
    clean = code_provenance(tmp_path)
    assert not clean["dirty"] and clean["changed_files"] == []
    assert len(clean["commit"]) == 40 and clean["describe"] == clean["commit"][:7]
    (tmp_path / "Snakefile").write_text("rule all:\n    input: []\n")
    dirty = code_provenance(tmp_path)
    assert dirty["dirty"] and dirty["changed_files"] == ["Snakefile"]
    assert dirty["describe"].endswith("-dirty")
    assert code_provenance(tmp_path / "missing")["commit"] is None
