"""Click parameter types shared by the commands: each refuses a bad value with a message
that says what a good one looks like (Click prints it as a usage error, status 2)."""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["PORT", "POSITIVE_FLOAT", "POSITIVE_INT", "SCOPE_LIST", "served_url"]


class _Port(click.ParamType[int]):
    name = "port"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            port = int(value)
        except ValueError:
            self.fail(f"{value!r} is not a port number", param, ctx)
        if not 1 <= port <= 65535:
            self.fail(f"{port} is not a port number (1-65535)", param, ctx)
        return port


class _Positive(click.ParamType[int | float]):
    """A number of ``kind`` above zero."""

    def __init__(self, kind: type[int] | type[float]) -> None:
        self.kind = kind
        self.name = kind.__name__

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | float:
        try:
            number = self.kind(value)
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):  # nan is not above zero, yet passes <= 0
            self.fail(f"{value} is not a finite number; give one above zero", param, ctx)
        if number <= 0:
            self.fail(f"{value} must be above zero", param, ctx)
        return number


class _ScopeList(click.ParamType[tuple[str, ...]]):
    name = "a,b"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        scopes = tuple(s.strip() for s in str(value).split(",") if s.strip())
        if not scopes or any(" " in s for s in scopes):
            self.fail(f"{value!r} is not a comma-separated list of scope names (a,b)", param, ctx)
        return scopes


PORT = _Port()
POSITIVE_INT = _Positive(int)
POSITIVE_FLOAT = _Positive(float)
SCOPE_LIST = _ScopeList()


def served_url(host: str, port: int, path: str) -> str:
    """The URL a server listening on ``host:port`` serves ``path`` at."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/{path.strip('/')}"
