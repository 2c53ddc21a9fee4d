"""Form fields of a server's elicitation, as the chat asks them: a hint of what to type,
and the typed text read as the field's value (elicitation.mdx, the restricted schema:
strings, numbers, booleans, single- and multi-select enums, titled or not).

Choices are shown by their titles when the schema gives them (``oneOf``/``anyOf`` of
``{const, title}``), and either a title (any case) or the value itself is accepted; the
value is what is sent. Defaults are shown as one would type them, or as JSON.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CANCELLED", "SKIPPED", "field_hint", "parse_field"]


class _Marker:
    pass


SKIPPED = _Marker()
CANCELLED = _Marker()


def field_hint(prop: dict[str, Any], required: bool) -> str:
    """How to answer one form field, in a few words: its type, choices (by title when
    the schema gives titles), default (as it would be typed, or as JSON)."""
    kind = prop.get("type", "string")
    shown = [title for _, title in _options(prop)]
    parts = [f"one of {', '.join(shown)}" if shown else {"boolean": "y/n"}.get(str(kind), str(kind))]
    if kind == "array":
        parts = [f"comma-separated, from {', '.join(shown)}" if shown else "comma-separated"]
    if "default" in prop:
        parts.append(f"default {_shown_default(prop)}")
    elif not required:
        parts.append("optional")
    return f"({'; '.join(parts)})"


def _shown_default(prop: dict[str, Any]) -> str:
    default = prop["default"]
    titles = dict(_options(prop))
    if titles and isinstance(default, str):
        return titles.get(default, default)
    if titles and isinstance(default, list):
        return ", ".join(titles.get(str(value), str(value)) for value in default)
    if isinstance(default, bool):
        return "y" if default else "n"
    return default if isinstance(default, str) else json.dumps(default, ensure_ascii=False)


def _options(prop: dict[str, Any]) -> list[tuple[str, str]]:
    """A choice field's ``(value, title)`` pairs (the value itself when untitled);
    [] for a field that is not a choice. Titled enums are ``oneOf``/``anyOf`` of
    ``{const, title}`` (elicitation.mdx, TitledSingleSelectEnumSchema and the multi-select kin)."""
    items = prop.get("items") if prop.get("type") == "array" else prop
    if not isinstance(items, dict):
        return []
    if isinstance(items.get("enum"), list):
        return [(str(value), str(value)) for value in items["enum"]]
    options = items.get("oneOf") or items.get("anyOf")
    if isinstance(options, list):
        return [
            (str(option["const"]), str(option.get("title") or option["const"]))
            for option in options
            if isinstance(option, dict) and "const" in option
        ]
    return []


def _pick(text: str, options: list[tuple[str, str]]) -> str | None:
    """The value meant by ``text``: a title (any case) or the value itself."""
    for value, title in options:
        if text == value or text.casefold() == title.casefold():
            return value
    return None


def parse_field(text: str, prop: dict[str, Any], required: bool) -> Any:
    """The value typed for one form field (a primitive schema, elicitation.mdx); raises
    ``ValueError`` saying what to type instead. An empty answer is the default, else
    skipped when optional. A choice may be typed by its title or its value."""
    if not text:
        if "default" in prop:
            return prop["default"]
        if required:
            raise ValueError("this field is required")
        return SKIPPED
    kind = prop.get("type", "string")
    options = _options(prop)
    shown = ", ".join(title for _, title in options)
    if kind == "array":
        picked = [item.strip() for item in text.split(",") if item.strip()]
        if not options:
            return picked
        wrong = [item for item in picked if _pick(item, options) is None]
        if wrong:
            raise ValueError(f"{', '.join(wrong)}: choose from {shown}")
        return [_pick(item, options) for item in picked]
    if kind == "boolean":
        if text.lower() in ("y", "yes", "true"):
            return True
        if text.lower() in ("n", "no", "false"):
            return False
        raise ValueError("answer y or n")
    if kind in ("integer", "number"):
        try:
            number: float = int(text) if kind == "integer" else float(text)
        except ValueError:
            raise ValueError(f"type a{'n integer' if kind == 'integer' else ' number'}") from None
        low, high = prop.get("minimum"), prop.get("maximum")
        if isinstance(low, int | float) and number < low:
            raise ValueError(f"the least is {low}")
        if isinstance(high, int | float) and number > high:
            raise ValueError(f"the most is {high}")
        return number
    if options:
        value = _pick(text, options)
        if value is None:
            raise ValueError(f"choose one of {shown}")
        return value
    return text
