"""JSON with comments and trailing commas (VS Code's ``mcp.json``), read and edited in place.

``blank(text)`` is ``text`` with its comments and trailing commas replaced by spaces (line
breaks kept), so it is strict JSON whose every offset is the original's: ``json`` reads it,
and a position found in it is a position in the user's file. ``with_entry`` then adds or
replaces one server by splicing text into the original, so the user's comments, order and
layout survive: rewriting the parsed value would drop every comment.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["blank", "with_entry"]

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


def blank(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments and trailing commas as spaces."""
    out = list(text)
    i, n = 0, len(text)
    last_comma: int | None = None  # a comma with only blanks after it, so far
    while i < n:
        c = text[i]
        if c == '"':
            i = _string_end(text, i)
            last_comma = None
            continue
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
            continue
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out[i:end] = [ch if ch == "\n" else " " for ch in text[i:end]]
            i = end
            continue
        if c in "}]" and last_comma is not None:
            out[last_comma] = " "
        if c == ",":
            last_comma = i
        elif c not in _SPACE:
            last_comma = None
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return len(text)


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _members(text: str, start: int) -> tuple[list[tuple[str, int, int, int]], int]:
    """The members of the object whose ``{`` is at ``start`` in blanked ``text``: (key,
    key start, value start, value end) each, and the offset of its ``}``."""
    members = []
    i = _skip(text, start + 1)
    while text[i] != "}":
        key, after = _DECODER.raw_decode(text, i)
        colon = _skip(text, after)
        value_start = _skip(text, colon + 1)
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append((key, i, value_start, value_end))
        i = _skip(text, value_end)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return members, i


def _indent_at(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    prefix = text[line_start:offset]
    return prefix if not prefix.strip() else ""


def _dumped(value: Any, indent: str) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def _insert(original: str, blanked: str, brace: int, key: str, value: Any) -> str:
    """``original`` with ``"key": value`` added as the last member of the object whose
    ``{`` is at ``brace``, indented like the members already there."""
    members, close = _members(blanked, brace)
    if members:
        indent = _indent_at(original, members[-1][1])
        at = members[-1][3]
        text = f',\n{indent}"{_escaped(key)}": {_dumped(value, indent)}'
        return original[:at] + text + original[at:]
    line = original[original.rfind("\n", 0, brace) + 1 : brace]
    outer = line[: len(line) - len(line.lstrip())]
    indent = outer + "  "
    text = f'\n{indent}"{_escaped(key)}": {_dumped(value, indent)}'
    if original[brace + 1 : close].strip():  # only comments inside: they stay, after it
        return original[: brace + 1] + text + original[brace + 1 :]
    return original[: brace + 1] + text + f"\n{outer}" + original[close:]


def _escaped(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)[1:-1]


def with_entry(original: str, servers_key: str, name: str, entry: dict[str, Any]) -> str:
    """``original`` (a JSONC object, checked by the caller) with ``entry`` as
    ``[servers_key][name]``: replacing that entry's value when there is one, else added
    after the last server (or as the first, or with a new ``servers_key`` object)."""
    blanked = blank(original)
    top = _skip(blanked, 0)
    members, _ = _members(blanked, top)
    servers = next((m for m in members if m[0] == servers_key), None)
    if servers is None:
        return _insert(original, blanked, top, servers_key, {name: entry})
    inner, _ = _members(blanked, servers[2])
    found = next((m for m in inner if m[0] == name), None)
    if found is not None:
        indent = _indent_at(original, found[1])
        return original[: found[2]] + _dumped(entry, indent) + original[found[3] :]
    return _insert(original, blanked, servers[2], name, entry)
