"""Typed results from the JSON objects servers send, whichever era they speak.

``convert(result, cls)`` is what every typed method of ``Client`` and ``TaskHandle``
returns through: the 2026-07-28 type, with what an older server leaves out filled in.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from ..errors import MalformedResponse

__all__ = ["CACHEABLE_RESULTS", "convert"]

#: Results a 2026-07-28 server sends with cache hints (``ttlMs``, ``cacheScope``).
CACHEABLE_RESULTS = frozenset(
    {
        "DiscoverResult",
        "ListToolsResult",
        "ListResourcesResult",
        "ListResourceTemplatesResult",
        "ListPromptsResult",
        "ReadResourceResult",
    }
)

_ResultT = TypeVar("_ResultT", bound=msgspec.Struct)


def convert(result: dict[str, Any], cls: type[_ResultT]) -> _ResultT:
    """The typed result; results of older servers get the fields the type requires.
    Raises ``MalformedResponse`` when the result breaks the type."""
    result.setdefault("resultType", "complete")
    if cls.__name__ in CACHEABLE_RESULTS:
        result.setdefault("ttlMs", 0)
        result.setdefault("cacheScope", "private")
    try:
        return msgspec.convert(result, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise MalformedResponse(f"the server's {cls.__name__} is malformed: {exc}") from None
