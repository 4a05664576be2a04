"""``config/README.md``: every config key, written from the schema's own descriptions.

The Snakemake workflow catalog shows a workflow's ``config/README.md`` as its configuration
guide. Generated rather than written, so it cannot fall behind the schema
(``workflow/schemas/config.schema.yaml``, which validates every run): one table per
top-level key, a row per key with its type or allowed values, its default, its description,
and the value the demo (``config/config.yaml``) and the paper (``config/paper.yaml``) set.

``python -m pipeline_lib.config.readme`` rewrites the file (tests/test_docs_config_keys.py
fails when it is stale).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from pipeline_lib.config.schema import load_schema

__all__ = ["README", "SHOWN_CONFIGS", "key_rows", "render", "main"]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
README = REPO / "config/README.md"
#: The configs whose values the README shows beside each key: column title -> file.
SHOWN_CONFIGS = {"config.yaml": "config/config.yaml", "paper.yaml": "config/paper.yaml"}

_HEADER = """\
# Configuration

Written by `python -m pipeline_lib.config.readme` from the descriptions of
`workflow/schemas/config.schema.yaml`, the schema that validates every run: change the schema,
then run that command, never this file by hand.

A config is a YAML file passed with `snakemake --configfile FILE`; without one, Snakemake runs
`config/config.yaml`, the demo (scikit-learn's digits, no download). `config/paper.yaml` is the
whole paper. A config replaces the demo, it is not merged into it; `--config KEY=VALUE`
overrides single keys. Every config is checked against the schema before any job starts, and
every mistake is named in one message. Each config runs in its own folder,
`results/<experiment>/` (docs/usage.md, "Experiments apart"). Defaults are filled in for
every key the config leaves out; `<id>` stands for a name you choose (a data set, a detector,
a variant). The last two columns give the value `config/config.yaml` and `config/paper.yaml`
set (empty: left at the default).
"""


def _text(value: Any) -> str:
    """A value as a table cell: YAML flow style, one line."""
    if value is None:
        return "`null`"
    dumped = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    dumped = dumped.removesuffix("\n...").removesuffix("...").strip()
    return f"`{dumped}`".replace("|", "\\|")


def _kind(node: Mapping[str, Any]) -> str:
    """The type of a schema node, or its allowed values."""
    if "enum" in node:
        return "one of " + ", ".join(_text(value) for value in node["enum"])
    if "oneOf" in node:
        kinds = []
        for option in node["oneOf"]:
            kinds.append(_text(option["const"]) if "const" in option else _kind(option))
        return " or ".join(kinds)
    kinds = node.get("type", "")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if "array" in kinds and isinstance(node.get("items"), Mapping):
        item = _kind(node["items"])
        kinds = [f"list of {item}" if kind == "array" else kind for kind in kinds]
    bounds = []
    for name, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if name in node:
            bounds.append(f"{sign} {node[name]}")
    return " or ".join(kinds) + (f" ({', '.join(bounds)})" if bounds else "")


def _description(node: Mapping[str, Any]) -> str:
    return re.sub(r"\s+", " ", str(node.get("description", ""))).strip().replace("|", "\\|")


def key_rows(schema: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(top-level key, dotted key, schema node) of every key the schema documents, in order.

    A mapping from a user's names (``datasets``, ``detectors``, ``variants``) goes on as
    ``<id>``; a mapping with fixed keys lists its keys, not itself.
    """

    def walk(top: str, dotted: str, node: Mapping[str, Any]) -> Iterator[tuple]:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if properties:
            if node.get("description") and dotted != top:
                yield top, dotted, node
            for name, sub in properties.items():
                yield from walk(top, f"{dotted}.{name}", sub)
        elif isinstance(extra, Mapping) and "properties" in extra:
            yield top, dotted, node
            yield from walk(top, f"{dotted}.<id>", extra)
        else:
            yield top, dotted, node

    for name, node in schema["properties"].items():
        yield from walk(name, name, node)


def _configured(config: Any, parts: list[str]) -> Any:
    """The value ``config`` sets at the key ``parts`` (``<id>``: the first of its ids that
    sets the rest), or ``...`` if it sets none."""
    if not parts:
        return config
    if not isinstance(config, Mapping):
        return ...
    head, rest = parts[0], parts[1:]
    if head != "<id>":
        return _configured(config[head], rest) if head in config else ...
    for value in config.values():
        found = _configured(value, rest)
        if found is not ...:
            return found
    return ...


def _shown(value: Any) -> str:
    """A configured value as a cell; a mapping of ids as its ids."""
    if value is ...:
        return ""
    if isinstance(value, Mapping):
        return ", ".join(f"`{name}`" for name in value) if value else "`{}`"
    return _text(value)


def render(schema: Mapping[str, Any], configs: Mapping[str, Mapping[str, Any]]) -> str:
    """The README: the header, then one section per top-level key of ``schema``."""
    lines = [_HEADER]
    sections: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for top, dotted, node in key_rows(schema):
        sections.setdefault(top, []).append((dotted, node))
    required = set(schema.get("required", []))
    columns = " | ".join(f"`{name}`" for name in configs)
    for top, rows in sections.items():
        node = schema["properties"][top]
        lines.append(f"## `{top}`\n")
        about = _description(node)
        if about and all(dotted != top for dotted, _ in rows):  # else its own row says it
            lines.append(f"{about}\n")
        lines.append(f"| key | type | default | description | {columns} |")
        lines.append("|---|---|---|---|" + "---|" * len(configs))
        for dotted, sub in rows:
            default = _text(sub["default"]) if "default" in sub else ""
            described = _description(sub)
            if dotted == top and top in required:
                described = f"Required. {described}"
            shown = [_shown(_configured(config, dotted.split("."))) for config in configs.values()]
            lines.append(
                f"| `{dotted}` | {_kind(sub)} | {default} | {described} | "
                + " | ".join(shown)
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def current() -> str:
    """The README as the schema and the shown configs make it now."""
    schema = load_schema(SCHEMA)
    configs = {
        name: yaml.safe_load((REPO / path).read_text()) for name, path in SHOWN_CONFIGS.items()
    }
    return render(schema, configs)


def main() -> int:
    """Rewrite config/README.md."""
    README.write_text(current())
    print(f"wrote {README.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
