"""The test lanes stay honest: a module that runs Snakemake or a server is marked ``workflow``.

``make test-fast`` deselects ``workflow``, ``realdata`` and ``cluster``; a module that starts
Snakemake, ``mlflow server`` or ``mlflow models serve`` without the mark would put minutes of
job start-up back into the edit loop. Read as text (no imports), so this costs nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: What a module does that makes it a workflow test.
STARTS = {
    "Snakemake": ("run_snakemake(", "SNAKEMAKE"),
    "an MLflow server": ('"server"', '"serve"'),
}


def _marks(tree: ast.Module) -> set[str]:
    """Names of the ``pytest.mark.*`` in the module's ``pytestmark``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            return {
                part.attr
                for part in ast.walk(node.value)
                if isinstance(part, ast.Attribute)
                and isinstance(part.value, ast.Attribute)
                and part.value.attr == "mark"
            }
    return set()


def test_modules_that_run_snakemake_or_a_server_are_marked_workflow() -> None:
    unmarked = []
    checked = 0
    for path in sorted(TESTS.rglob("test_*.py")):
        source = path.read_text()
        does = [what for what, needles in STARTS.items() if any(n in source for n in needles)]
        if not does or path == Path(__file__).resolve():
            continue
        checked += 1
        if "workflow" not in _marks(ast.parse(source)):
            unmarked.append(f"{path.relative_to(TESTS)} (runs {', '.join(does)})")
    assert checked >= 10  # the workflow/, mvtec and deploy-serve modules were found
    assert not unmarked, f"not marked workflow: {unmarked}"
