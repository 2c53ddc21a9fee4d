"""Arguments written on the command line: ``key=value`` pairs and ``--args JSON``.

A tool's values are JSON when they parse as JSON (``n=3``, ``flag=true``,
``tags='["a","b"]'``), else strings (``city=Oslo``); write ``text='"3"'`` for the
string "3". ``--args`` takes a JSON object, ``@FILE`` (a file holding one) or ``-``
(standard input); ``key=value`` pairs are laid over it. Every mistake is a
``click.UsageError`` naming the argument.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

__all__ = ["string_arguments", "tool_arguments"]


def _split(pair: str) -> tuple[str, str]:
    key, found, value = pair.partition("=")
    if not found or not key:
        raise click.UsageError(f"{pair!r} is not key=value (e.g. city=Oslo, or --args '{{\"city\": \"Oslo\"}}')")
    return key, value


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _args_object(source: str) -> dict[str, Any]:
    if source == "-":
        text, where = sys.stdin.read(), "standard input"
    elif source.startswith("@"):
        try:
            text, where = Path(source[1:]).read_text(encoding="utf-8"), source[1:]
        except OSError as exc:
            raise click.UsageError(f"--args {source}: cannot read {source[1:]}: {exc.strerror or exc}") from None
    else:
        text, where = source, "--args"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"{where} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise click.UsageError(f"{where} must be a JSON object of arguments, not {type(value).__name__}")
    return value


def tool_arguments(pairs: tuple[str, ...], args: str | None) -> dict[str, Any]:
    """A tool's arguments from ``--args`` and ``key=value`` pairs (the pairs win)."""
    arguments = _args_object(args) if args is not None else {}
    for pair in pairs:
        key, value = _split(pair)
        arguments[key] = _json_value(value)
    return arguments


def string_arguments(pairs: tuple[str, ...]) -> dict[str, str]:
    """A prompt's (or a completion context's) arguments: ``key=value``, values as written."""
    return dict(_split(pair) for pair in pairs)
