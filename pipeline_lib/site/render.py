"""The summary page's blocks rendered as Markdown or as a standalone HTML page.

A page is a list of blocks: ``("h", level, text)``, ``("p", text)``, ``("table", DataFrame
of cells)``, ``("list", [cell, ...])`` and ``("img", alt, href)``; a cell is a string, a
:class:`Link` or a sequence of them (joined by " · ").
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

__all__ = ["HTML", "MARKDOWN", "Cell", "Link", "render_html", "render_markdown"]

#: The page's CSS.
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}"
    "table{border-collapse:collapse;font-size:0.9em;margin-bottom:1em}"
    "th,td{border:1px solid #ccc;padding:0.3em 0.6em;text-align:left}"
    "th{background:#f3f3f3}img{max-width:100%;margin:0.5em 0}.missing{color:#b00}"
    "figcaption{font-size:0.9em;color:#444;max-width:60em}"
)


@dataclass(frozen=True)
class Link:
    text: str
    href: str


# A cell is a str, a link, or a sequence of them (joined by " · ").
Cell = str | Link | Sequence[str | Link]


def md_cell(cell: Cell) -> str:
    if isinstance(cell, Link):
        return f"[{cell.text}]({cell.href})"
    if isinstance(cell, str):
        return cell.replace("|", "\\|").replace("\n", " ")
    parts = [md_cell(part) for part in cell]
    if parts and isinstance(cell[0], str) and cell[0].endswith(": "):
        return parts[0] + " · ".join(parts[1:])  # "Table: md · html · csv · tex"
    return " · ".join(parts)


def html_cell(cell: Cell) -> str:
    if isinstance(cell, Link):
        return f'<a href="{html.escape(cell.href, quote=True)}">{html.escape(cell.text)}</a>'
    if isinstance(cell, str):
        text = html.escape(cell)
        return f'<span class="missing">{text}</span>' if "missing" in cell else text
    parts = [html_cell(part) for part in cell]
    if cell and isinstance(cell[0], str) and cell[0].endswith(": "):
        # a label, then its links: separated, or a browser shows "mdhtmlcsvtex"
        return parts[0] + " · ".join(parts[1:])
    return " · ".join(parts)


def _markdown_table(frame: pd.DataFrame) -> str:
    lines = [
        "| " + " | ".join(str(c) for c in frame.columns) + " |",
        "|" + "|".join("---" for _ in frame.columns) + "|",
    ]
    lines += [
        "| " + " | ".join(md_cell(c) for c in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join(lines) + "\n"


def _html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html_cell(c)}</td>" for c in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _html_figure(alt: str, href: str) -> str:
    return (
        f'<figure><img src="{html.escape(href, quote=True)}" alt="{html.escape(alt, quote=True)}">'
        f"<figcaption>{html.escape(alt)}</figcaption></figure>"
    )


#: Block kind -> its Markdown, from the block's fields after the kind.
MARKDOWN: dict[str, Callable[..., str]] = {
    "h": lambda level, text: f"{'#' * level} {text}\n",
    "p": lambda text: f"{text}\n",
    "list": lambda items: "\n".join(f"- {md_cell(item)}" for item in items) + "\n",
    "img": lambda alt, href: f"![{alt}]({href})\n",
    "table": _markdown_table,
}

#: Block kind -> its HTML element, from the block's fields after the kind.
HTML: dict[str, Callable[..., str]] = {
    "h": lambda level, text: f"<h{level}>{html.escape(text)}</h{level}>",
    "p": lambda text: f"<p>{html.escape(text)}</p>",
    "list": lambda items: "<ul>" + "".join(f"<li>{html_cell(i)}</li>" for i in items) + "</ul>",
    "img": _html_figure,
    "table": _html_table,
}


def render_markdown(blocks: list[tuple]) -> str:
    """The page as Markdown."""
    return "\n".join(MARKDOWN[block[0]](*block[1:]) for block in blocks)


def render_html(blocks: list[tuple], title: str) -> str:
    """The page as a standalone HTML document titled ``title``."""
    body = [HTML[block[0]](*block[1:]) for block in blocks]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
