"""MCP Apps on the server side: a tool's UI declared in its decorator.

::

    board = UiResource("ui://weather/board", html=BOARD_HTML, csp=UiCsp(connect_domains=["https://api.example.com"]))

    @server.tool(ui=board)                          # the view shows this tool's results
    def forecast(city: str) -> dict: ...

    @server.tool(ui=board, ui_visibility=["app"])   # only the view calls it, not the model
    def refresh(city: str) -> dict: ...

The ``UiResource`` is registered as a resource of type ``text/html;profile=mcp-app`` the
first time a tool names it (the same object named by many tools is one resource); its
``_meta.ui`` (CSP domains, permissions, dedicated domain, border) goes with the listed
resource and with its contents. The tool's ``_meta.ui`` gets ``resourceUri`` and
``visibility``. ``ui="ui://..."`` names a resource registered by hand instead (views
built per request). Registering any of this declares the extension in the server's
capabilities (``extensions["io.modelcontextprotocol/ui"] = {}``).

Negotiation (ext-apps 2026-01-26, Client<>Server Capability Negotiation): the UI
metadata is listed to every client, since a client without the extension ignores it and
the tool works as a plain one; but a tool only the app may call (``visibility
["app"]``) is left out of ``tools/list`` for a client that did not declare the
extension for HTML views, as that client would otherwise hand it to its model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import RegistrationError
from ..protocol.apps import ORIGIN, UI_EXTENSION, UI_MIME_TYPE, VISIBILITIES, client_shows_ui, visible_to

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["UiCsp", "UiResource", "bind_tool_ui", "tool_filter", "tools_for_client"]

_PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")


def _origins(kind: str, values: Iterable[str]) -> tuple[str, ...]:
    values = (values,) if isinstance(values, str) else tuple(values)
    for value in values:
        if not isinstance(value, str) or not ORIGIN.fullmatch(value):
            raise RegistrationError(
                f"UiCsp {kind}: {value!r} is not an origin; write a scheme and a host, as in "
                '"https://api.example.com" or "https://*.example.com" (no path, spaces or quotes)'
            )
    return values


@dataclass(frozen=True)
class UiCsp:
    """The origins a view may reach beyond its own document (``_meta.ui.csp``); none by
    default, and hosts keep to what is declared. Raises ``RegistrationError`` for a
    value that is not an origin."""

    connect_domains: Sequence[str] = ()  # fetch, XHR, WebSocket (connect-src)
    resource_domains: Sequence[str] = ()  # scripts, styles, images, fonts, media
    frame_domains: Sequence[str] = ()  # nested iframes (frame-src)
    base_uri_domains: Sequence[str] = ()  # <base href> (base-uri)

    def __post_init__(self) -> None:
        for name in ("connect_domains", "resource_domains", "frame_domains", "base_uri_domains"):
            object.__setattr__(self, name, _origins(name, getattr(self, name)))

    def wire(self) -> dict[str, list[str]]:
        keys = {
            "connectDomains": self.connect_domains,
            "resourceDomains": self.resource_domains,
            "frameDomains": self.frame_domains,
            "baseUriDomains": self.base_uri_domains,
        }
        return {key: list(values) for key, values in keys.items() if values}


@dataclass(frozen=True)
class UiResource:
    """A tool's view: one HTML document served as ``uri`` (``ui://...``).

    ``csp``: origins it may reach; ``permissions``: browser features it asks for
    (``camera``, ``microphone``, ``geolocation``, ``clipboardWrite``; hosts may refuse);
    ``domain``: a dedicated origin, in the host's own format; ``prefers_border``: ask for
    a visible frame (or none). Raises ``RegistrationError`` for a URI that is not
    ``ui://``, HTML that is not text, or an unknown permission.
    """

    uri: str
    html: str
    name: str | None = None
    title: str | None = None
    description: str | None = None
    csp: UiCsp | None = None
    permissions: Sequence[str] = ()
    domain: str | None = None
    prefers_border: bool | None = None
    _meta: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or not self.uri.startswith("ui://") or len(self.uri) <= len("ui://"):
            raise RegistrationError(
                f"UiResource uri {self.uri!r} is not a ui:// URI; MCP Apps views are named "
                'ui://<server>/<view>, e.g. "ui://weather/board"'
            )
        if not isinstance(self.html, str):
            raise RegistrationError(
                f"UiResource {self.uri!r}: html must be the document as text (str), not "
                f"{type(self.html).__name__}; read a file with Path(...).read_text()"
            )
        unknown = sorted(set(self.permissions) - set(_PERMISSIONS))
        if unknown:
            raise RegistrationError(
                f"UiResource {self.uri!r}: permissions {unknown} are not known; they are {list(_PERMISSIONS)}"
            )
        object.__setattr__(self, "permissions", tuple(self.permissions))
        object.__setattr__(self, "_meta", self._build_meta())

    def _build_meta(self) -> dict[str, Any]:
        ui: dict[str, Any] = {}
        if self.csp is not None and self.csp.wire():
            ui["csp"] = self.csp.wire()
        if self.permissions:
            ui["permissions"] = {name: {} for name in self.permissions}
        if self.domain:
            ui["domain"] = self.domain
        if self.prefers_border is not None:
            ui["prefersBorder"] = self.prefers_border
        return {"ui": ui} if ui else {}

    @property
    def meta(self) -> dict[str, Any]:
        """The resource's ``_meta`` (``{"ui": {...}}``, or empty with nothing to say)."""
        return dict(self._meta)

    def contents(self) -> dict[str, Any]:
        """What ``resources/read`` answers for it (the URI and type are added by the server)."""
        entry: dict[str, Any] = {"text": self.html}
        if self._meta:
            entry["_meta"] = self.meta
        return entry


def _register(server: Server, resource: UiResource) -> None:
    existing = server.registry.resources.get(resource.uri)
    if existing is not None and getattr(existing.fn, "ui_resource", None) == resource:
        return  # named by another tool already: one resource

    async def view() -> dict[str, Any]:
        return resource.contents()

    view.ui_resource = resource  # type: ignore[attr-defined]
    server.resource(
        resource.uri,
        name=resource.name or resource.uri.removeprefix("ui://"),
        title=resource.title,
        description=resource.description,
        mime_type=UI_MIME_TYPE,
        meta=resource.meta or None,
    )(view)


def _visibility(tool: str, value: Any) -> list[str]:
    words = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else None
    if not words or any(word not in VISIBILITIES for word in words):
        raise RegistrationError(
            f"tool {tool!r}: ui_visibility={value!r} must list who may call the tool: "
            '["model"], ["app"] or ["model", "app"]'
        )
    return [v for v in VISIBILITIES if v in words]


def bind_tool_ui(server: Server, fn: Any, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of ``@server.tool`` with ``ui`` and ``ui_visibility`` turned into the
    tool's ``_meta.ui`` (registering a ``UiResource`` on the way). Raises
    ``RegistrationError`` for a ``ui`` that is neither a ``UiResource`` nor a ``ui://``
    URI, a wrong visibility, or a ``meta`` that already has ``ui``."""
    if "ui" not in options and "ui_visibility" not in options:
        return options
    options = dict(options)
    ui, visibility = options.pop("ui", None), options.pop("ui_visibility", None)
    tool = str(options.get("name") or getattr(fn, "__name__", "?"))
    meta: Mapping[str, Any] = options.get("meta") or {}
    if "ui" in meta:
        raise RegistrationError(f"tool {tool!r}: give its UI as ui=... or in meta['ui'], not both")
    declared: dict[str, Any] = {}
    if isinstance(ui, UiResource):
        _register(server, ui)
        declared["resourceUri"] = ui.uri
    elif isinstance(ui, str) and ui.startswith("ui://"):
        declared["resourceUri"] = ui
    elif ui is not None:
        raise RegistrationError(
            f"tool {tool!r}: ui={ui!r} is not a UiResource nor a ui:// URI of a resource registered for it"
        )
    if visibility is not None:
        declared["visibility"] = _visibility(tool, visibility)
    options["meta"] = {**meta, "ui": declared}
    server.extensions.setdefault(UI_EXTENSION, {})
    return options


def tools_for_client(server: Server, tools: list[dict[str, Any]], capabilities: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool list a client sees: without the app-only tools unless it shows views.
    Costs nothing on a server with no UI."""
    keep = tool_filter(server, capabilities)
    return tools if keep is None else [tool for tool in tools if keep(tool)]


def tool_filter(server: Server, capabilities: dict[str, Any]) -> Callable[[dict[str, Any]], bool] | None:
    """Which listed tools a client with ``capabilities`` sees (None: all of them): the
    app-only ones only if it shows views."""
    if UI_EXTENSION not in server.extensions or client_shows_ui(capabilities):
        return None
    return _model_visible


def _model_visible(tool: dict[str, Any]) -> bool:
    return visible_to(tool.get("_meta"), "model")
