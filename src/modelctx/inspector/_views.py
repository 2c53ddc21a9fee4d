"""MCP Apps views in the inspector: the HTML a tool's ``ui://`` resource holds, kept
under a random id and served as its own document, and the rule for what a view may call.

The page loads a view in ``<iframe sandbox="allow-scripts" src="/apps/<id>">``: without
``allow-same-origin`` its origin is opaque, so it can neither read the page nor send
the page's requests; its path does not carry the page's access token (a script in the
view reads its own URL); and its answer carries a CSP built from the resource's
``_meta.ui.csp`` (ext-apps 2026-01-26, Content Security Policy Enforcement) that also
says ``sandbox allow-scripts``, so opened by itself it is sandboxed just the same. A
declared domain that is not a plain origin is dropped, as a server other than ours may
send one with ``;`` in it. The view's requests reach the server only through the page's
bridge and this module's rule: a tool listed by this server whose visibility has
``"app"``.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..client import Client
from ..errors import MCPError
from ..protocol.apps import ORIGIN, UI_MIME_TYPE, tool_ui, visible_to

__all__ = ["View", "Views", "view_policy"]

#: Views kept at once (one per tool call shown; the oldest goes first).
VIEWS_KEPT = 16
#: The largest view document the inspector serves.
VIEW_LIMIT = 5_000_000
_CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")


@dataclass(frozen=True)
class View:
    id: str
    tool: str
    uri: str
    html: str
    csp: dict[str, list[str]]
    prefers_border: bool | None


def _declared_csp(meta: Any) -> dict[str, list[str]]:
    """``_meta.ui.csp`` with only plain origins kept."""
    ui = meta.get("ui") if isinstance(meta, dict) else None
    csp = ui.get("csp") if isinstance(ui, dict) else None
    kept: dict[str, list[str]] = {}
    for key in _CSP_KEYS:
        values = csp.get(key) if isinstance(csp, dict) else None
        origins = [v for v in values if isinstance(v, str) and ORIGIN.fullmatch(v)] if isinstance(values, list) else []
        if origins:
            kept[key] = origins
    return kept


def _sources(values: list[str]) -> str:
    return " ".join(values) or "'none'"


def view_policy(view: View, page_origins: list[str]) -> str:
    """The CSP a view is served with: the extension's restrictive default, widened only by
    the declared origins, without ``'self'`` (the inspector's own origin holds its API),
    framed only by the inspector's page, and sandboxed."""
    csp = view.csp
    resources = " ".join(csp.get("resourceDomains", []))
    directives = [
        "default-src 'none'",
        f"script-src 'unsafe-inline' {resources}".strip(),
        f"style-src 'unsafe-inline' {resources}".strip(),
        f"img-src data: {resources}".strip(),
        f"media-src data: {resources}".strip(),
        f"font-src {_sources(csp.get('resourceDomains', []))}",
        f"connect-src {_sources(csp.get('connectDomains', []))}",
        f"frame-src {_sources(csp.get('frameDomains', []))}",
        "object-src 'none'",
        f"base-uri {_sources(csp.get('baseUriDomains', []))}",
        "form-action 'none'",
        f"frame-ancestors {' '.join(page_origins)}",
        "sandbox allow-scripts",
    ]
    return "; ".join(directives)


def _html(contents: list[Any], uri: str) -> tuple[str, Any]:
    """The view document in a ``resources/read`` answer, and its ``_meta``."""
    for entry in contents:
        if not isinstance(entry, dict) or entry.get("mimeType") != UI_MIME_TYPE:
            continue
        text = entry.get("text")
        if not isinstance(text, str) and isinstance(entry.get("blob"), str):
            try:
                text = base64.b64decode(entry["blob"], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise ValueError(f"{uri}: its blob is not base64 of UTF-8 HTML") from None
        if isinstance(text, str):
            if len(text) > VIEW_LIMIT:
                raise ValueError(f"{uri}: the view is over {VIEW_LIMIT} characters; not shown")
            return text, entry.get("_meta")
    raise ValueError(f"{uri} holds no {UI_MIME_TYPE} contents, so it is not a view the inspector can show")


class Views:
    """The views the page has open, by id."""

    def __init__(self) -> None:
        self._views: OrderedDict[str, View] = OrderedDict()

    async def open(self, client: Client, tool: dict[str, Any]) -> dict[str, Any]:
        """Read ``tool``'s UI resource and keep it; what the page needs to show it.
        Raises ``ValueError`` saying why it cannot be shown."""
        name = str(tool.get("name"))
        uri, _ = tool_ui(tool.get("_meta"))
        if uri is None:
            raise ValueError(f"tool {name!r} names no ui:// view in _meta.ui.resourceUri")
        try:
            read = await client.read_resource(uri)
        except MCPError as exc:
            raise ValueError(f"reading the view {uri} of tool {name!r} failed: {exc}") from None
        html, meta = _html(list(read.contents), uri)
        ui = meta.get("ui") if isinstance(meta, dict) else None
        border = ui.get("prefersBorder") if isinstance(ui, dict) else None
        view = View(
            secrets.token_urlsafe(18),
            name,
            uri,
            html,
            _declared_csp(meta),
            border if isinstance(border, bool) else None,
        )
        self._views[view.id] = view
        while len(self._views) > VIEWS_KEPT:
            self._views.popitem(last=False)
        return {
            "view": view.id,
            "src": f"/apps/{view.id}",
            "uri": uri,
            "csp": view.csp,
            "prefersBorder": view.prefers_border,
        }

    def get(self, view_id: str) -> View:
        """Raises ``KeyError`` for an id that is not an open view."""
        return self._views[view_id]

    def clear(self) -> None:
        self._views.clear()

    @staticmethod
    def refusal(tools: list[Any], name: str) -> dict[str, Any] | None:
        """Why a view may not call tool ``name`` (a JSON-RPC error body), or None."""
        listed = next((t for t in tools if isinstance(t, dict) and t.get("name") == name), None)
        if listed is None:
            return {"kind": "jsonrpc", "code": -32602, "message": f"Unknown tool: {name}", "data": None}
        if not visible_to(listed.get("_meta"), "app"):
            return {
                "kind": "jsonrpc",
                "code": -32000,
                "message": f'tool {name!r} is not callable from a view: its _meta.ui.visibility leaves out "app"',
                "data": None,
            }
        return None
