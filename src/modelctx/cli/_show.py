"""Results drawn for people: tables of tools, resources and prompts, content blocks as text.

Each function takes the result as plain JSON data (``msgspec.to_builtins`` of the wire
struct, so the wire's names) and draws it on a ``Screen``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._screen import Screen

__all__ = ["show_content", "show_discovery", "show_messages", "show_prompts", "show_resources", "show_tools"]


def _first_line(text: Any) -> str:
    return str(text or "").strip().split("\n", 1)[0]


def _argument_names(names: Sequence[str], required: Sequence[str]) -> str:
    """``city*, unit``: a star marks a required argument."""
    return ", ".join(f"{name}*" if name in required else name for name in names)


def show_tools(screen: Screen, tools: Sequence[Mapping[str, Any]]) -> None:
    rows = []
    for tool in tools:
        schema = tool.get("inputSchema") or {}
        arguments = _argument_names(list(schema.get("properties") or {}), schema.get("required") or [])
        rows.append((tool["name"], arguments, _first_line(tool.get("description"))))
    screen.table(f"tools ({len(rows)}; * required)", ("name", "arguments", "description"), rows)


def show_resources(
    screen: Screen, resources: Sequence[Mapping[str, Any]], templates: Sequence[Mapping[str, Any]]
) -> None:
    screen.table(
        f"resources ({len(resources)})",
        ("uri", "name", "mime type", "description"),
        [(r["uri"], r.get("name", ""), r.get("mimeType", ""), _first_line(r.get("description"))) for r in resources],
    )
    screen.table(
        f"resource templates ({len(templates)})",
        ("uri template", "name", "mime type", "description"),
        [
            (t["uriTemplate"], t.get("name", ""), t.get("mimeType", ""), _first_line(t.get("description")))
            for t in templates
        ],
    )


def show_prompts(screen: Screen, prompts: Sequence[Mapping[str, Any]]) -> None:
    rows = []
    for prompt in prompts:
        arguments = prompt.get("arguments") or []
        names = [a["name"] for a in arguments]
        required = [a["name"] for a in arguments if a.get("required")]
        rows.append((prompt["name"], _argument_names(names, required), _first_line(prompt.get("description"))))
    screen.table(f"prompts ({len(rows)}; * required)", ("name", "arguments", "description"), rows)


def show_discovery(screen: Screen, found: Mapping[str, Any]) -> None:
    info = found.get("serverInfo") or {}
    capabilities = found.get("capabilities") or {}
    rows = [
        ("server", f"{info.get('name', '?')} {info.get('version', '')}".strip()),
        ("protocol version", str(found.get("protocolVersion"))),
        ("era", found["era"]),
        ("supported versions", ", ".join(found.get("supportedVersions") or [])),
        ("capabilities", ", ".join(sorted(capabilities)) or "none"),
    ]
    instructions = str(found.get("instructions") or "").strip()
    if instructions:
        lines = instructions.count("\n") + 1
        rows.append(("instructions", _first_line(instructions) + (f" ({lines} lines; --json shows all)" if lines > 1 else "")))
    screen.table(f"server at {found['target']}", ("", ""), rows, header=False)


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(block.get("data", "")) * 3 // 4
        return f"[{kind} {block.get('mimeType', '')}, about {size} bytes; --json shows the base64]"
    if kind == "resource_link":
        return f"[resource link {block.get('uri')} {block.get('name', '')}]".replace(" ]", "]")
    if kind == "resource":
        return _resource_text(block.get("resource") or {})
    return json.dumps(block, ensure_ascii=False)


def _resource_text(contents: Mapping[str, Any]) -> str:
    if "text" in contents:
        return str(contents["text"])
    size = len(contents.get("blob", "")) * 3 // 4
    return f"[{contents.get('mimeType', 'binary')} {contents.get('uri', '')}, about {size} bytes; --json shows the base64]"


def show_content(screen: Screen, blocks: Sequence[Mapping[str, Any]], structured: Any = None) -> None:
    """Content blocks as text; structured content as JSON when no block says it."""
    for block in blocks:
        screen.text(_block_text(block))
    if structured is not None and not blocks:
        screen.text(json.dumps(structured, indent=2, ensure_ascii=False))


def show_read(screen: Screen, contents: Sequence[Mapping[str, Any]]) -> None:
    for item in contents:
        screen.text(_resource_text(item))


def show_messages(screen: Screen, messages: Sequence[Mapping[str, Any]]) -> None:
    for message in messages:
        screen.text(f"{message.get('role', '?')}: {_block_text(message.get('content') or {})}")
