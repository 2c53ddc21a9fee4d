"""Arguments written on the command line: ``key=value`` pairs and ``--args JSON``.

A tool's values are JSON when they parse as JSON (``n=3``, ``flag=true``,
``tags='["a","b"]'``), else strings (``city=Oslo``); write ``text='"3"'`` for the
string "3"; a number no double holds (``1e400``) is refused, never sent as
infinity. ``--args`` takes a JSON object, ``@FILE`` (a file holding one) or ``-``
(standard input); ``key=value`` pairs are laid over it. Every mistake is a
``click.UsageError`` naming the argument.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from typing import Any, BinaryIO

import click

__all__ = ["MAX_ARGUMENTS_BYTES", "string_arguments", "tool_arguments"]

MAX_ARGUMENTS_BYTES = 32 * 1024 * 1024  # more is a mistake (or /dev/zero), never arguments


def _split(pair: str) -> tuple[str, str]:
    key, found, value = pair.partition("=")
    if not found or not key:
        raise click.UsageError(f"{pair!r} is not key=value (e.g. city=Oslo, or --args '{{\"city\": \"Oslo\"}}')")
    return key, value


class _OutOfRange(ValueError):
    """A JSON number no double holds (``1e400``): Python reads it as infinity, which
    JSON has no way to write (it went out as ``null``)."""


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _OutOfRange(text)
    return number


def _no_constant(name: str) -> Any:
    # NaN, Infinity, -Infinity: Python's json reads them, JSON has none of them.
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


def _loads(text: str) -> Any:
    return json.loads(text, parse_float=_finite, parse_constant=_no_constant)


def _out_of_range(where: str, exc: _OutOfRange) -> click.UsageError:
    return click.UsageError(
        f"{where}: the number {exc} is out of range (JSON numbers here must fit a double, "
        "at most about 1.8e308 either way); give a smaller one, or quote it to send a string"
    )


def _json_value(key: str, text: str) -> Any:
    try:
        return _loads(text)
    except _OutOfRange as exc:
        raise _out_of_range(f"{key}={text}", exc) from None
    except json.JSONDecodeError:
        return text
    except RecursionError:
        raise click.UsageError("a key=value value is JSON nested too deeply to read; flatten it") from None


def _bounded(stream: BinaryIO, where: str) -> str:
    data = stream.read(MAX_ARGUMENTS_BYTES + 1)
    if len(data) > MAX_ARGUMENTS_BYTES:
        raise click.UsageError(f"{where} holds more than {MAX_ARGUMENTS_BYTES} bytes; arguments must be smaller")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"{where} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None


def _read_file(name: str) -> str:
    """A regular file's text. Opened non-blocking, so a FIFO is refused instead of waited on."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise click.UsageError(f"--args @{name}: cannot read {name}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise click.UsageError(f"--args @{name}: {name} is not a regular file; to pipe arguments in use --args -")
    with os.fdopen(fd, "rb") as file:
        return _bounded(file, name)


def _args_object(source: str) -> dict[str, Any]:
    if source == "-":
        text, where = _bounded(sys.stdin.buffer, "standard input"), "standard input"
    elif source.startswith("@"):
        text, where = _read_file(source[1:]), source[1:]
    else:
        text, where = source, "--args"
    try:
        value = _loads(text)
    except _OutOfRange as exc:
        raise _out_of_range(where, exc) from None
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"{where} is not JSON: {exc}") from None
    except RecursionError:
        raise click.UsageError(f"{where} is JSON nested too deeply to read; flatten it") from None
    if not isinstance(value, dict):
        raise click.UsageError(f"{where} must be a JSON object of arguments, not {type(value).__name__}")
    return value


def tool_arguments(pairs: tuple[str, ...], args: str | None) -> dict[str, Any]:
    """A tool's arguments from ``--args`` and ``key=value`` pairs (the pairs win)."""
    arguments = _args_object(args) if args is not None else {}
    for pair in pairs:
        key, value = _split(pair)
        arguments[key] = _json_value(key, value)
    return arguments


def string_arguments(pairs: tuple[str, ...]) -> dict[str, str]:
    """A prompt's (or a completion context's) arguments: ``key=value``, values as written."""
    return dict(_split(pair) for pair in pairs)
