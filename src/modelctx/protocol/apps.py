"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension, SEP-1865, ext-apps
specification 2026-01-26): the names and the reading of a tool's UI, shared by the
server that declares one and the hosts that show it or say they cannot.

A tool points at its view with ``_meta.ui.resourceUri`` (a ``ui://`` resource whose
contents have the type ``text/html;profile=mcp-app``) and says who may call it with
``_meta.ui.visibility``: ``"model"`` (the agent), ``"app"`` (the view, through its
host, on the same server only); both when absent. A client supports the extension when
its capabilities hold ``extensions["io.modelcontextprotocol/ui"]`` with that type in
``mimeTypes``. No I/O here.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "ORIGIN",
    "UI_EXTENSION",
    "UI_MIME_TYPE",
    "VISIBILITIES",
    "client_shows_ui",
    "tool_ui",
    "visible_to",
]

UI_EXTENSION = "io.modelcontextprotocol/ui"
UI_MIME_TYPE = "text/html;profile=mcp-app"
#: Who may call a tool (``_meta.ui.visibility``); both when the field is absent.
VISIBILITIES = ("model", "app")
#: An origin a view may reach, as a host writes it into a CSP: a scheme, a host (its first
#: label may be "*"), an optional port, nothing else. A space, ";" or quote in a declared
#: domain would add CSP directives of the server's choosing to the host's policy.
ORIGIN = re.compile(r"(?:https?|wss?)://(?:\*\.)?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::\d{1,5})?")
# The flat key the extension deprecates for ``ui.resourceUri``; still read, never written.
_DEPRECATED_URI_KEY = "ui/resourceUri"


def client_shows_ui(capabilities: Any) -> bool:
    """Did the client declare MCP Apps for HTML views (``capabilities.extensions``)?"""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    settings = extensions.get(UI_EXTENSION) if isinstance(extensions, dict) else None
    types = settings.get("mimeTypes") if isinstance(settings, dict) else None
    return isinstance(types, list) and UI_MIME_TYPE in types


def tool_ui(meta: Any) -> tuple[str | None, tuple[str, ...]]:
    """A tool's ``_meta`` read as (resource URI or None, visibility). A URI that is not
    ``ui://`` is no UI. An absent visibility is both (the extension's default); a list
    keeps the words it knows, so a list of none of them lets nobody call the tool (the
    safe reading of a value this side does not understand)."""
    ui = meta.get("ui") if isinstance(meta, dict) else None
    uri = ui.get("resourceUri") if isinstance(ui, dict) else None
    if uri is None and isinstance(meta, dict):
        uri = meta.get(_DEPRECATED_URI_KEY)
    listed = ui.get("visibility") if isinstance(ui, dict) else None
    visibility = (
        VISIBILITIES if listed is None else tuple(v for v in VISIBILITIES if isinstance(listed, list) and v in listed)
    )
    resource = uri if isinstance(uri, str) and uri.startswith("ui://") else None
    return resource, visibility


def visible_to(meta: Any, caller: str) -> bool:
    """May ``caller`` (``"model"`` or ``"app"``) see and call the tool with this ``_meta``?"""
    return caller in tool_ui(meta)[1]
