"""MCP Apps views through the gateway: the ``ui://`` resources its tools name.

The gateway serves resources under their upstream URIs (a read goes to the one server
that lists the URI). A view is named by a tool, so it belongs to that tool's server: the
gateway keeps, from its last tool list, which server each named ``ui://`` URI is read
from. Two servers naming the same URI (two instances of one apps server, say) would
make it ambiguous; then each is served as ``ui://<server>/<rest>`` (the mount's form) and
the tools' ``_meta.ui.resourceUri`` say so. The names depend on the set of tools only,
not on the order servers answered in. No I/O here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import msgspec

from ..protocol.apps import tool_ui

if TYPE_CHECKING:
    from ..protocol.types.v2026_07_28 import Tool

__all__ = ["Views"]

_SCHEME = "ui://"
_DEPRECATED_URI_KEY = "ui/resourceUri"


class Views:
    """Gateway ``ui://`` URI to (server, upstream URI), rebuilt at each tool list."""

    __slots__ = ("_to_gateway", "_to_upstream")

    def __init__(self) -> None:
        self._to_gateway: dict[tuple[str, str], str] = {}
        self._to_upstream: dict[str, tuple[str, str]] = {}

    def rebuild(self, tools: Iterable[tuple[str, Tool]]) -> None:
        """Name the views ``tools`` (server name, the server's own tool) point at."""
        servers: defaultdict[str, set[str]] = defaultdict(set)
        for server, tool in tools:
            uri = tool_ui(_meta_of(tool))[0]
            if uri is not None:
                servers[uri].add(server)
        to_gateway: dict[tuple[str, str], str] = {}
        for uri, owners in servers.items():
            for server in owners:
                name = uri if len(owners) == 1 else f"{_SCHEME}{quote(server, safe='')}/{uri[len(_SCHEME):]}"
                to_gateway[server, uri] = name
        self._to_gateway = to_gateway
        self._to_upstream = {name: pair for pair, name in to_gateway.items()}

    def upstream(self, uri: str) -> tuple[str, str] | None:
        """(server, upstream URI) of the gateway's ``uri``; None for one no tool names."""
        return self._to_upstream.get(uri)

    def gateway_uri(self, server: str, uri: str) -> str:
        return self._to_gateway.get((server, uri), uri)

    def renamed(self, server: str, tool: Tool) -> Tool:
        """``tool`` (as the gateway lists it) with its view's URI the gateway's name."""
        meta = _meta_of(tool)
        uri = tool_ui(meta)[0]
        if uri is None or (name := self.gateway_uri(server, uri)) == uri:
            return tool
        meta = dict(meta)
        if isinstance(meta.get("ui"), dict) and meta["ui"].get("resourceUri") == uri:
            meta["ui"] = {**meta["ui"], "resourceUri": name}
        if meta.get(_DEPRECATED_URI_KEY) == uri:
            meta[_DEPRECATED_URI_KEY] = name
        return msgspec.structs.replace(tool, meta=meta)

    def contents(self, result: dict[str, Any], upstream: str, name: str) -> dict[str, Any]:
        """A ``resources/read`` result (JSON, changed in place) with the view under ``name``."""
        for item in result.get("contents") or ():
            if isinstance(item, dict) and item.get("uri") == upstream:
                item["uri"] = name
        return result


def _meta_of(tool: Tool) -> dict[str, Any]:
    meta = tool.meta
    return meta if isinstance(meta, dict) else {}
