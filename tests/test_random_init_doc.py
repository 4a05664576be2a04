"""benchmarks/random_init_row.py: docs/protocol.md shows the table of the committed JSON."""

from __future__ import annotations

import json
from pathlib import Path

from tests.benchmark_scripts import load_benchmark

REPO = Path(__file__).resolve().parents[1]


def _script():
    return load_benchmark("random_init_row.py")


def test_protocol_doc_table_is_the_committed_run(tmp_path: Path) -> None:
    script = _script()
    results = json.loads((REPO / "benchmarks/random_init/cifar10_seed0.json").read_text())
    table = script.render(results)
    text = (REPO / "docs/protocol.md").read_text()
    block = text[
        text.index(script.BEGIN) + len(script.BEGIN) : text.index(
            script.END, text.index(script.BEGIN)
        )
    ]
    assert block.strip() == table
    # the means are of the JSON's per-class AUCs, the paper's row beside them
    kde = [line for line in table.splitlines() if line.startswith("| KDE")][0]
    expected = sum(results["aucs"]["released"]["0"]["kde"].values()) / 10
    assert f"| {expected:.1f} |" in kde and "60.5 +- 2.4" in kde

    # --render rewrites only the block, in any copy of the doc
    doc = tmp_path / "protocol.md"
    doc.write_text(f"before\n{script.BEGIN}\nstale\n{script.END}\nafter\n")
    script.write_doc(table, doc)
    assert doc.read_text() == f"before\n{script.BEGIN}\n{table}\n{script.END}\nafter\n"
