"""Route maps: which MCP kind each OpenAPI operation becomes.

The maps are tried in order and the first that matches an operation decides; an operation
no map matches becomes a tool. Everything is a tool by default (as in FastMCP): most clients
offer models tools only, and a resource the model cannot reach is an API it cannot use.
``RouteMap.reads_as_resources()`` is the common alternative: GETs as resources and templates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ...errors import RegistrationError

__all__ = ["Kind", "RouteMap", "choose"]

Kind = Literal["tool", "resource", "template", "exclude"]
_KINDS = ("tool", "resource", "template", "exclude")


@dataclass(frozen=True)
class RouteMap:
    """Operations that match ``methods``, ``pattern`` and ``tags`` become ``kind``.

    ``methods``: HTTP methods (any case), empty for all. ``pattern``: a regular expression
    searched in the path as the spec writes it (``/pets/{petId}``), ``None`` for all.
    ``tags``: the operation must have every one of them. ``kind``: ``"tool"``,
    ``"resource"`` (a GET without path parameters), ``"template"`` (a GET; path and query
    parameters become the URI template's variables) or ``"exclude"``.
    """

    kind: Kind
    methods: Sequence[str] = ()
    pattern: str | None = None
    tags: Iterable[str] = field(default=())

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise RegistrationError(f"RouteMap kind {self.kind!r} is not one of {', '.join(_KINDS)}")
        if isinstance(self.methods, str):
            object.__setattr__(self, "methods", (self.methods,))
        object.__setattr__(self, "methods", tuple(m.upper() for m in self.methods))
        object.__setattr__(self, "tags", frozenset(self.tags))
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise RegistrationError(f"RouteMap pattern {self.pattern!r} is not a regular expression: {exc}") from None

    def matches(self, method: str, path: str, tags: Iterable[str]) -> bool:
        if self.methods and method.upper() not in self.methods:
            return False
        if self.pattern is not None and re.search(self.pattern, path) is None:
            return False
        return frozenset(self.tags) <= set(tags)

    @classmethod
    def reads_as_resources(cls) -> list[RouteMap]:
        """GET with path parameters: a template; other GETs: resources; the rest: tools."""
        return [cls("template", methods=("GET",), pattern=r"\{[^}]+\}"), cls("resource", methods=("GET",))]


def choose(maps: Sequence[RouteMap], method: str, path: str, tags: Iterable[str]) -> Kind:
    """The kind of the first map that matches, else ``"tool"``."""
    tags = list(tags)
    for route in maps:
        if route.matches(method, path, tags):
            return route.kind
    return "tool"
