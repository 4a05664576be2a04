"""Every Markdown file the code and the docs cite is in the repository, with the section named.

A citation such as ``(docs/protocol.md, "Datasets and splits")`` sends a reader to a file
and a heading; one that names a file beside the checkout, a renamed page or a heading that
no longer exists leaves a clone without the source of the fact. Checked: the Python, Snakemake,
shell, YAML and Markdown files of the library, the workflow, the configs, the benchmarks, the
tests and the docs.

A citation is a path into a folder of the repository (``docs/protocol.md``), out of it
(``../x/README.md``), a top-level document's upper-case name (``README.md``) or a Markdown
link's target; a lower-case name alone (``main_table.md``) is a file the code writes, and a
path under ``results/`` is the workflow's output, not the repository's. It is read from the
repository root or from the citing file's folder. A section is a heading of the cited file,
or its start up to a colon, a parenthesis or code (``"Fused training"`` names ``## Fused
training: K models in one job``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: Where citations are checked, and the files read there.
CITING = {
    "pipeline_lib": ("*.py",),
    "workflow": ("*.py", "*.smk", "*.yaml"),
    "config": ("*.yaml",),
    "benchmarks": ("*.py", "*.sh", "*.md"),
    "tests": ("*.py", "*.yaml"),
    "docs": ("*.md",),
    "profiles": ("*.yaml",),
    ".ci": ("run",),
}
TOP_LEVEL = ("README.md", "Snakefile", "Makefile", "pyproject.toml", "environment.yml")

#: A Markdown path: no wildcard, placeholder or format field in front of it (those name a
#: pattern, e.g. ``benchmarks/*/README.md`` or ``OUT/README.md``, not a file).
MD_PATH = re.compile(r"(?<![\w./*{}<>$-])((?:\.\.?/)?(?:[\w.-]+/)*[\w.-]+\.md)\b")
#: A section named after the path: ``docs/x.md, "Section"`` or ``docs/x.md "Section"``,
#: possibly wrapped onto the next line of a comment or docstring.
SECTION = re.compile(r""",? (?:"([^"]{1,80})"|'([^']{1,80})')""")
#: A line break inside a section's name, with the comment marker of the next line.
WRAP = re.compile(r"\s*\n\s*(?:#:?\s*)?")
#: A folder written in capitals is a placeholder (``OUT/``, ``RUN/``), not a folder.
PLACEHOLDER = re.compile(r"(?:\A|/)[A-Z][A-Z_]*/")
#: A top-level document: ``README.md``, ``CHANGELOG.md``.
DOCUMENT = re.compile(r"[A-Z][A-Z0-9_-]*\.md")
#: The target of a Markdown link, ``[text](path.md#anchor)``.
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")


def repository_folders() -> set[str]:
    """The top-level folders holding files of the repository (not ``results/``, ``.venv``)."""
    listed = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return {path.split("/")[0] for path in listed.splitlines() if "/" in path}


FOLDERS = repository_folders()


def citing_files() -> list[Path]:
    files = [REPO / name for name in TOP_LEVEL if (REPO / name).is_file()]
    for folder, patterns in CITING.items():
        for pattern in patterns:
            files += sorted((REPO / folder).rglob(pattern))
    # This file's own examples are broken on purpose.
    here = Path(__file__).resolve()
    return [path for path in files if "__pycache__" not in path.parts and path != here]


def is_citation(path: str) -> bool:
    first = path.split("/")[0]
    if PLACEHOLDER.search(path):
        return False
    return first == ".." or (first in FOLDERS and "/" in path) or bool(DOCUMENT.fullmatch(path))


def citations(text: str, *, markdown: bool = False) -> list[tuple[str, str | None]]:
    """``(path, section or None)`` for every Markdown file ``text`` cites; ``markdown``:
    ``text`` is a Markdown page, whose links are citations too (in code, a link is text the
    code writes)."""
    found = []
    for match in MD_PATH.finditer(text):
        path = match.group(1)
        if is_citation(path) or (markdown and LINK.match(text, match.start() - 2)):
            named = SECTION.match(text, match.end())
            section = WRAP.sub(" ", named.group(1) or named.group(2)) if named else None
            found.append((path, section))
    return found


def headings(markdown: Path) -> list[str]:
    """The headings of ``markdown``, outside fenced code blocks, without their ``#``."""
    found, fenced = [], False
    for line in markdown.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append(line.lstrip("#").strip())
    return found


def resolve(path: str, citing: Path) -> Path | None:
    for base in (REPO, citing.parent):
        if (base / path).is_file():
            return (base / path).resolve()
    return None


def broken_citations(citing: Path) -> list[str]:
    problems = []
    text = citing.read_text(errors="replace")
    for path, section in citations(text, markdown=citing.suffix == ".md"):
        target = resolve(path, citing)
        if target is None or not target.is_relative_to(REPO):
            problems.append(f"{path}: no such file in the repository")
        elif section is not None and not any(
            heading == section or re.match(rf"{re.escape(section)}(:| \(| `)", heading)
            for heading in headings(target)
        ):
            problems.append(f'{path}, "{section}": no such heading in {path}')
    return problems


def test_the_reader_finds_paths_sections_and_skips_patterns() -> None:
    text = (
        "see (docs/protocol.md, \"Datasets and\n#: splits\"), (docs/x.md, 'Data'), "
        'README.md, "The paper\'s protocol", '
        "../elsewhere/README.md and benchmarks/*/README.md, OUT/README.md, "
        "f'{name}.md', README.md, main_table.md, results/summary/index.md, [page](cluster.md#x)."
    )
    cited = [
        ("docs/protocol.md", "Datasets and splits"),
        ("docs/x.md", "Data"),
        ("README.md", "The paper's protocol"),
        ("../elsewhere/README.md", None),
        ("README.md", None),
    ]
    assert citations(text) == cited
    assert citations(text, markdown=True) == [*cited, ("cluster.md", None)]


def test_a_missing_file_and_a_missing_heading_are_reported(tmp_path: Path) -> None:
    citing = tmp_path / "module.py"
    citing.write_text(
        '"""Facts (docs/protocol.md, "Training recipe"), (docs/protocol.md, "Training") and '
        '(docs/protocol.md, "No such section"), ELSEWHERE.md and ../elsewhere/README.md."""'
    )
    assert broken_citations(citing) == [
        'docs/protocol.md, "Training": no such heading in docs/protocol.md',
        'docs/protocol.md, "No such section": no such heading in docs/protocol.md',
        "ELSEWHERE.md: no such file in the repository",
        "../elsewhere/README.md: no such file in the repository",
    ]


def test_every_cited_markdown_file_and_section_exists() -> None:
    broken = [
        f"{citing.relative_to(REPO)}: {problem}"
        for citing in citing_files()
        for problem in broken_citations(citing)
    ]
    assert broken == []
