"""``Gateway``: a host's joined tool set served again as one MCP server.

::

    host = Host.from_file("mcp.json")
    Gateway(host).run()                      # stdio; .run("http", port=8000) for HTTP

    modelctx gateway --config mcp.json [--http --host 127.0.0.1 --port 8000]

Theory of operation. ``Gateway`` is a ``Server`` whose tools, prompts and resources are
not registered but asked of the host at each list (the host's lists are cached by each
upstream's ``ttlMs`` and dropped at its ``list_changed``, so a list costs no upstream
request while it is fresh). One middleware answers the list, call, get and read methods
from the host; everything else (eras, ``initialize``/``server/discover``, listen
streams, errors, ``input_required`` sealing) is the ordinary server machinery.

- **Upstream connections** are the host's: opened once when the gateway starts (the
  server's lifespan starts the host) and reused by every call.
- **Names** are the host's: ``<server>_<tool>``, filtered by the configured globs;
  tools the approval policy denies are left out of the list, and a call to one is
  refused without reaching the server.
- **Approval** ``ask`` becomes a form elicitation (allow once / always / deny, with the
  server, the tool and the arguments) to the gateway's own client: the call handler
  hands ``Approvals.check`` an ``Asker`` for the call being served (``_gateway_ui.CallAsker``), and
  gets a ``Verdict`` back. On 2026-07-28 the question travels as ``input_required`` and
  the retry replays the call with the answer; in the handshake era it is a request on
  the same connection. Declined, cancelled, unanswered, or a client that cannot elicit:
  the call never reaches the upstream server and the result is an ``isError`` saying why.
  "Always" holds for the client that answered it (the asker's ``scope``): its
  authenticated principal (issuer, subject, client id), else its handshake session, else
  its stdio connection; a 2026-07-28 client over HTTP with no principal has no identity,
  and its "always" counts as allow once. A server configured ``"alwaysScope": "shared"``
  has one "always" for every client.
- **Resources and prompts** the configuration denies (a server at "deny", or its
  ``"resources"``/``"prompts"`` globs) are left out of the lists and refused on
  ``resources/read``, ``prompts/get``, ``completion/complete`` and subscriptions, with
  an error that says so; nothing is asked of the upstream.
- **What an upstream asks** about one of our calls (elicitation, sampling) is asked of
  that call's client the same way: the upstream call carries the call's own handlers
  (``_gateway_ui.CallScope.handlers``, ``Client.call_tool_raw(..., handlers=)``).
- **Changes**: the host tells its listeners when an upstream list changed; the gateway
  publishes it on its own bus, which ``subscriptions/listen`` streams and handshake
  sessions turn into ``notifications/*/list_changed``.
- **Progress** of an upstream call is relayed to the gateway's client when it asked for
  progress; **cancellation** of a gateway call cancels the upstream request (the
  client sends ``notifications/cancelled``); upstream **log messages** about a call go
  to its client (``CallScope.log``), at the caller's level.

- **Completions and resource subscriptions** (``_gateway_relays.py``): ``completion/complete``
  goes to the server owning the prompt (name mapped back) or resource template; a URI
  subscribed to (handshake ``resources/subscribe``, or a listen stream's
  ``resourceSubscriptions``) is watched on its server while someone subscribes, and its
  updates are published on the gateway's bus. A handshake session that ends without
  unsubscribing keeps its watches until the gateway stops.
- **MCP Apps views** (``_gateway_views.py``): the gateway declares the ui extension when an
  upstream does; its host's clients declare views, so upstreams list their view-only
  tools, which go on to the gateway's clients that show views only. A tool's
  ``_meta.ui.resourceUri`` is the gateway's name for its view, read from that tool's server.
- **One relay path** for ``tools/call``: ``_route_of`` (the gateway name to a server and
  its tool), ``_approve`` (``_allowed_outright``, else ``Approvals.check`` with the call's
  asker), the upstream request, ``_answer`` (the upstream's result or failure as ours),
  then the dispatcher's ``decorate`` (server/dispatch.py). The common way runs it in the
  call's task (``_tools_call``, ``_forward``: the client's ``call_tool_raw``); the fast
  lane (``serve_fast``) runs the same steps from the loop's callbacks when none of them
  can wait: a tool the policy allows outright, with no ``outputSchema``, a 2026-07-28
  upstream over stdio, a client the dispatcher admits (``Dispatcher.admit``) that asked
  for no logs. No task or coroutine per call there (a task only to send a progress
  report on), and what the client gets is what the common way gives.
- **Deadlines**: every upstream request carries a progress token whether or not the
  gateway's client asked for progress, so the upstream's reports push the gateway's own
  deadline on it (the host's ``request_timeout``) back, up to ``request_max_timeout``.

Which call an upstream's question or log message is about is what the upstream says:
the call's own ``input_required`` rounds (2026-07-28), its reply stream (HTTP), or the
call's request id in ``_meta`` (modelctx's servers, ``protocol.meta.RELATED_REQUEST``;
stdio carries nothing else); a question that names none (other SDKs' servers on stdio)
is about the one call in flight on that upstream connection, if only one is
(``ClientSession``). With several in flight nothing is guessed: such a question is
declined, and a log message naming no call is never relayed to a call. Not relayed yet: a question
a handshake-era upstream asks while the gateway's own client speaks 2026-07-28 (it comes
on the upstream's connection, outside the call's task, where ``input_required`` cannot
be raised; it is declined).
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import (
    InvalidParams,
    MalformedResponse,
    MCPError,
    ProtocolError,
    ResourceNotFound,
)
from ..protocol import meta as _meta
from ..protocol.apps import UI_EXTENSION, UI_MIME_TYPE, client_shows_ui, tool_ui, visible_to
from ..protocol.jsonrpc import Request, is_request_id, result_response
from ..server import Context, Event, Server, ServerConfig, StartupError
from ..server.dispatch import Call, Caller, InputRequired, error_reply, input_required, load_answers
from ._approval import ApprovalPolicy, Approvals, Verdict
from ._gateway_relays import ResourceWatches, complete
from ._gateway_ui import CallAsker, CallScope, GatewayUI
from ._gateway_views import Views
from ._host import AllowAll, Denied, Host, UnknownName
from ._server import HostServer

if TYPE_CHECKING:
    from ..client import Client, ClientSession
    from ..protocol.types.v2026_07_28 import Tool
    from ..transports.server_seam import Peer, Send

__all__ = ["Gateway", "GatewayUI", "serve_gateway"]

log = logging.getLogger("modelctx.host")

Handler = Callable[[Call], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class _Route:
    """Where a gateway tool name leads: the server, its own definition of the tool and,
    when the policy allows every call of it outright, the ``Approvals`` that said so."""

    server: HostServer
    tool: Tool
    allowed_by: Approvals | None = None
    #: The tool has no ``outputSchema``: its results need no check, the fast lane may relay it.
    plain: bool = False


def _allowing(approvals: object, server: HostServer, tool: Tool) -> Approvals | None:
    """``approvals`` when its ``check`` allows every call of ``tool`` without asking or
    pinning anything (the level is "allow", not through ``readOnlyHint``); else None."""
    if not isinstance(approvals, Approvals):
        return None
    level, source = approvals.policy.rules(server).resolve(tool)
    return approvals if level == "allow" and source != "readOnlyHint" else None


class Gateway(Server):
    """A ``Server`` that serves ``host``'s tools, prompts and resources (see the module
    docstring). Serving it starts the host (and closes it after), unless the host was
    started already. ``name``/``version``: what the gateway calls itself.

    The host is given a ``GatewayUI`` (``gateway.ui``); a host with no approval hook of
    its own gets ``Approvals`` over its configuration's policy and that UI. Each call's
    approval is asked of its own client (``CallAsker``).

    ``bare_names``: offer each tool under its server's own name when no other server
    has a tool of that name (the namespaced name otherwise): a gateway in front of one
    server then looks like that server.
    """

    def __init__(
        self,
        host: Host,
        name: str = "modelctx-gateway",
        version: str = "0.1.0",
        *,
        bare_names: bool = False,
        **options: Any,
    ) -> None:
        config = options.pop("config", None) or ServerConfig()
        # Innermost: the routing answers most methods itself, so the author's middleware
        # (logs, traces, rate limits, RequiredScopes) must run before it, not be skipped.
        config.middleware.append(self._route)
        super().__init__(name, version, config=config, lifespan=_run_host, **options)
        self.host = host
        self.bare_names = bare_names
        self.ui = GatewayUI()
        self._adopt(host)
        self.views = Views()
        self._hooked: weakref.WeakSet[Client] = weakref.WeakSet()
        # The same, by id (a weak reference each: cheaper to look up than the WeakSet).
        self._hooked_by_id: dict[int, weakref.ref[Client]] = {}
        self._relays: set[asyncio.Task[None]] = set()
        self._index: dict[str, _Route] = {}
        self._view_names: dict[str, _Route] = {}  # tools a view calls by their own names
        self._routes: dict[str, Handler] = {
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "completion/complete": self._complete,
        }
        # Handlers that wrap the server's own: (call, call_next).
        self._wrapped: dict[str, Callable[[Call, Handler], Awaitable[dict[str, Any] | None]]] = {
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "subscriptions/listen": self._listen,
        }
        self.watches = ResourceWatches(host, self.resource_updated)

    def _adopt(self, host: Host) -> None:
        """Make ``host`` this gateway's: its sampling and approvals ask through the
        gateway's UI (an ``AllowAll`` host gets ``Approvals`` over its configuration's
        policy), its upstreams' changes reach the gateway's clients, and it declares the
        MCP Apps extension to them."""
        host.ui = self.ui
        if host.sample is None:
            host.sample = self.ui.sample
        if isinstance(host.approvals, AllowAll):
            host.approvals = Approvals(ApprovalPolicy.from_config(host.config), self.ui)
        elif isinstance(host.approvals, Approvals):
            host.approvals.ui = self.ui
        host.add_listener(self._upstream_changed)
        # MCP Apps: the upstreams list their view-only tools to the gateway, which lists
        # them on to the clients that show views (see _gateway_views.py).
        host.client_extensions.setdefault(UI_EXTENSION, {"mimeTypes": [UI_MIME_TYPE]})

    def run(self, transport: str = "stdio", **options: Any) -> None:
        """``Server.run``; on stdio, on uvloop when it is installed and stdin and stdout
        are both pipes or sockets (it took about 100 us off each relayed call)."""
        if transport != "stdio":
            super().run(transport, **options)
            return
        from ..transports.stdio import serve_stdio

        try:
            serve_stdio(self, loop_factory=_fast_loop_factory())
        except StartupError as exc:  # its traceback is logged where it was raised
            raise SystemExit(f"modelctx: {exc}") from None

    # -- what the gateway declares ------------------------------------------------------------
    def _upstream_kinds(self) -> set[str]:
        kinds: set[str] = set()
        for client in self.host.unguarded_clients():
            caps = client.server_capabilities
            kinds.update(kind for kind in ("tools", "prompts", "resources", "completions") if _declared(caps, kind))
        return kinds

    def _upstream_subscribes(self) -> bool:
        """Whether some upstream lets its resources be subscribed to."""
        return any(
            getattr(client.server_capabilities.resources, "subscribe", False) is True
            for client in self.host.unguarded_clients()
        )

    def capabilities(self) -> dict[str, Any]:
        caps = super().capabilities()
        kinds = self._upstream_kinds() | {"tools"}  # tools always: a gateway is for tools
        for kind in kinds - {"completions"}:
            caps[kind] = {"listChanged": True}
        if "completions" in kinds:
            caps["completions"] = {}
        if "resources" in kinds and self._upstream_subscribes():
            caps["resources"]["subscribe"] = True
        if any(UI_EXTENSION in client.server_extensions for client in self.host.unguarded_clients()):
            caps.setdefault("extensions", {})[UI_EXTENSION] = {}
        return caps

    def serves(self, method: str) -> bool:
        if method.startswith("tools/"):  # first: checked on every call the gateway relays
            return True  # a gateway is for tools
        kind = method.split("/", 1)[0]
        if kind in ("tools", "prompts", "resources"):
            return kind == "tools" or kind in self._upstream_kinds()
        if kind == "completion":
            return "completions" in self._upstream_kinds()
        return super().serves(method)

    def _upstream_changed(self, server: str, kind: str) -> None:
        kinds = ("tools", "prompts", "resources") if kind == "all" else (kind,)
        for changed in kinds:
            if changed == "tools":
                self._index = {}
                self._view_names = {}
            self._publish(Event(changed))

    # -- the middleware ---------------------------------------------------------------------
    async def _route(self, call: Call, call_next: Handler) -> dict[str, Any] | None:
        handler = self._routes.get(call.method)
        if handler is not None:
            return await handler(call)
        wrapper = self._wrapped.get(call.method)
        if wrapper is not None:
            return await wrapper(call, call_next)
        return await call_next(call)

    async def _refresh(self) -> list[Tool]:
        """The host's tools less those the policy denies; rebuilds the call index."""
        host = self.host
        approvals = host.approvals
        policy = approvals.policy if isinstance(approvals, Approvals) else None
        found: list[tuple[Tool, HostServer, Tool]] = []
        for tool in await host.tools(views=True):
            listed = host.listed(tool.name)  # the server and its own definition, from the same tools()
            assert listed is not None, f"{tool.name!r} is in host.tools() but not in its index"
            server, own = listed
            if policy is None or not policy.hidden(server, own):
                found.append((tool, server, own))
        owners = Counter(own.name for _, _, own in found)
        index: dict[str, _Route] = {}
        shown = []
        self.views.rebuild((server.name, own) for _, server, own in found)
        for tool, server, own in found:
            tool = self.views.renamed(server.name, tool)
            if self.bare_names and owners[own.name] == 1 and own.name not in index:
                tool = msgspec.structs.replace(tool, name=own.name)
            plain = own.output_schema is None or own.output_schema is msgspec.UNSET
            index[tool.name] = _Route(server, own, _allowing(approvals, server, own), plain)
            shown.append(tool)
        # A view calls its own server's tools by their own names (it knows no gateway
        # names): for a server with a view, each tool a view may call ("app" in its
        # visibility) is also routed by its own name when no other server has one like
        # it and no listed name is the same. Never listed; same approval as by name.
        with_views = {server.name for _, server, own in found if tool_ui(own.meta)[0] is not None}
        self._view_names = {
            own.name: index[name]
            for name, (_, server, own) in zip((t.name for t in shown), found, strict=True)
            if server.name in with_views
            and owners[own.name] == 1
            and own.name not in index
            and visible_to(own.meta, "app")
        }
        self._index = index
        return shown

    async def _tools_list(self, call: Call) -> dict[str, Any]:
        tools = await self._refresh()
        if not client_shows_ui(call.capabilities):  # a tool only a view may call: not for its model
            tools = [tool for tool in tools if visible_to(tool.meta, "model")]
        return {"tools": [_wire(tool) for tool in tools]}

    # -- tools/call: one relay path (the module docstring) -------------------------------------
    # route -> approval -> upstream -> answer -> the dispatcher's decoration, in the call's
    # task (``_tools_call``) or, when no step can wait, from loop callbacks (``serve_fast``).
    def _route_of(self, name: str) -> _Route | None:
        """Where the gateway tool ``name`` leads, from the index ``_refresh`` built (None:
        not known, or the index is being rebuilt)."""
        return self._index.get(name) or self._view_names.get(name)

    def _allowed_outright(self, route: _Route) -> bool:
        """The policy lets every call of ``route``'s tool through without asking, and the
        host still has the approvals that said so: no check is made per call."""
        return route.allowed_by is not None and route.allowed_by is self.host.approvals

    async def _approve(self, route: _Route, arguments: dict[str, Any], asker: CallAsker) -> dict[str, Any] | None:
        """None when the call may reach its server; else the ``isError`` result saying why not."""
        if self._allowed_outright(route):
            return None
        server, tool = route.server, route.tool
        approvals = self.host.approvals
        if isinstance(approvals, Approvals):
            verdict: Verdict | bool = await approvals.check(server, tool, arguments, asker=asker)
        else:
            verdict = await approvals.check(server, tool, arguments)
        if verdict:
            return None
        why = verdict.reason if isinstance(verdict, Verdict) else "the approval policy denies it"
        return _error(f"{tool.name!r} of server {server.name!r} was not run: {why}")

    async def _tools_call(self, call: Call) -> dict[str, Any]:
        """``tools/call`` the common way (the gateway's middleware, in the call's task)."""
        params = call.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("Invalid params: tools/call needs name (a string)")
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            return _error("Invalid arguments: expected an object")
        route = self._route_of(name)
        if route is None:
            await self._refresh()
            route = self._route_of(name)
            if route is None:
                raise InvalidParams(f"Unknown tool: {name}")
        load_answers(call)  # a retry: the approval it answered
        scope = CallScope(Context(call), route.server.name)
        try:
            return await self._forward(call, scope, route, dict(arguments or {}))
        except InputRequired as asked:
            return input_required(call, asked)

    async def _forward(self, call: Call, scope: CallScope, route: _Route, arguments: dict[str, Any]) -> dict[str, Any]:
        refused = await self._approve(route, arguments, CallAsker(scope.ctx, self.ui.client_scope(call)))
        if refused is not None:
            return refused
        server, tool = route.server, route.tool
        try:
            client = await server.ready()
            if client not in self._hooked:
                await self._hook(server.name, client)
            progress = _relay_progress(scope.ctx) if call.progress_token is not None else None
            # What the upstream asks and logs about this call goes to this call's client.
            handlers = scope.handlers(sample=self.host.sample == self.ui.sample, in_rounds=client.modern)
            # The result as the upstream sent it: converting it to a CallToolResult and
            # back cost as much as the rest of the gateway's work on a call.
            result = await client.call_tool_raw(tool.name, arguments, progress=progress, handlers=handlers)
        except ProtocolError:
            raise  # the upstream's JSON-RPC error, as it sent it
        except MCPError as exc:  # the upstream is down, timed out, answered garbage
            return _answer(route, None, exc)
        return _answer(route, result, None)

    # -- the fast lane: the same path, from callbacks ---------------------------------------------
    def serve_fast(
        self, request: Request, peer: Peer, send: Send, respond: Callable[[dict[str, Any] | None], None]
    ) -> Callable[[], None] | None:
        """Take a ``tools/call`` the relay path can run with no task and no coroutine
        (the duplex transports' fast lane, ``transports/_seam.FastLane``): returns its
        ``cancel``, or None to leave the request to ``handle``.

        Taken: a call of a tool the policy allows outright (``_allowed_outright``), with
        no ``outputSchema``, to an upstream ``_lane_session`` finds, from a caller the
        dispatcher admits (``Dispatcher.admit``) that asked for no logs, with no
        ``inputResponses``/``requestState`` and no middleware but the gateway's own.
        The request is renamed and sent upstream (``ClientSession.begin``); the answer
        is made ours (``_answer``, ``Dispatcher.decorate``) in the callback that receives
        it, after any progress reports (under the caller's token). An upstream that
        answers ``input_required`` has the call served again the common way, which asks.
        """
        if request.method != "tools/call" or len(self.middleware) != 1:
            return None
        params = request.params
        name = params.get("name")
        route = self._route_of(name) if isinstance(name, str) else None
        if route is None or not route.plain or not self._allowed_outright(route):
            return None
        arguments = params.get("arguments")
        if not (arguments is None or isinstance(arguments, dict)) or not params.keys() <= _PLAIN_CALL:
            return None
        session = self._lane_session(route)
        meta = params.get("_meta")
        token = meta.get(_meta.PROGRESS_TOKEN) if isinstance(meta, dict) else None
        if session is None or (token is not None and (not is_request_id(token) or isinstance(token, bool))):
            return None  # not relayable here; a token that is no request id: handle() answers as it does
        try:
            caller = self.dispatcher.admit(request, peer)
        except ProtocolError:
            return None  # handle() answers with the error
        if caller.log_rank is not None:
            return None  # the common way relays the logs
        relay = _Relay(self, request, peer, caller, send, respond, route, token)
        try:
            relay.abandon = session.begin(
                "tools/call",
                {"name": route.tool.name, "arguments": arguments or {}},
                relay.settled,
                logs=False,
                progress=relay.progressed if token is not None else None,
            )
        except MCPError:
            return None  # the connection is gone: the common way says so
        return relay.cancel

    def _lane_session(self, route: _Route) -> ClientSession | None:
        """The session the fast lane relays ``route``'s calls on: its server's, when that
        is ready, speaks 2026-07-28 and sends no headers (stdio), with its log relay set
        up here; None: the common way."""
        upstream = route.server
        client = upstream.client
        if client is None or upstream.status != "ready":
            return None
        session = client.session
        if not session.modern or session.transport.sends_headers:
            return None
        hooked = self._hooked_by_id.get(id(client))
        if hooked is None or hooked() is not client:
            self._hook_modern(upstream.name, client)
        return session

    def _serve_again(
        self, request: Request, peer: Peer, send: Send, respond: Callable[[dict[str, Any] | None], None]
    ) -> asyncio.Task[None]:
        """Serve ``request`` the common way, in a task, and ``respond`` with its answer."""

        async def serve() -> None:
            respond(await self.handle(request, peer, send))

        task = asyncio.get_running_loop().create_task(serve())
        self._relays.add(task)
        task.add_done_callback(self._relays.discard)
        return task

    async def _hook(self, server: str, client: Client) -> None:
        """Have ``client``'s server send its log messages (each call's handlers relay
        those about it to its client: ``CallScope.log``; the others are dropped)."""
        if client.modern:
            self._hook_modern(server, client)
            return
        self._hooked.add(client)
        self._hooked_by_id[id(client)] = weakref.ref(client)
        session = client.session
        if session.log_level is None and client.server_capabilities.logging:
            try:
                await session.request("logging/setLevel", {"level": "debug"})
            except MCPError as exc:
                log.info("server %r refused logging/setLevel: %s", server, exc)

    def _hook_modern(self, server: str, client: Client) -> None:
        """``_hook`` for a 2026-07-28 upstream, where it needs no request."""
        self._hooked.add(client)
        self._hooked_by_id[id(client)] = weakref.ref(client)
        if client.session.log_level is None:
            client.session.log_level = "debug"  # every request asks for every level

    async def _prompts_list(self, call: Call) -> dict[str, Any]:
        return {"prompts": [_wire(prompt) for prompt in await self.host.prompts()]}

    async def _prompts_get(self, call: Call) -> dict[str, Any]:
        name = call.params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("Invalid params: prompts/get needs name (a string)")
        arguments = call.params.get("arguments")
        try:
            result = await self.host.get_prompt(name, arguments if isinstance(arguments, dict) else None)
        except UnknownName:
            raise InvalidParams(f"Unknown prompt: {name}") from None
        except Denied as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        return _passthrough(result)

    async def _resources_list(self, call: Call) -> dict[str, Any]:
        listed = []
        for server, resource in await self.host.resources():
            wire = _wire(resource)
            wire["uri"] = self.views.gateway_uri(server, resource.uri)
            listed.append(wire)
        return {"resources": listed}

    async def _templates_list(self, call: Call) -> dict[str, Any]:
        return {"resourceTemplates": [_wire(template) for _, template in await self.host.resource_templates()]}

    # -- completions and resource subscriptions (_gateway_relays.py) ---------------------------
    async def _complete(self, call: Call) -> dict[str, Any]:
        return await complete(self.host, call.params)

    async def _subscribe(self, call: Call, call_next: Handler) -> dict[str, Any] | None:
        """Handshake-era ``resources/subscribe``: the URI watched upstream, then the
        session's subscription (which the gateway's bus events reach)."""
        uri = call.params.get("uri")
        session = call.session
        if not isinstance(uri, str) or session is None or uri in session.subscriptions:
            return await call_next(call)  # refused there, or already subscribed
        await self.watches.acquire(uri)
        try:
            return await call_next(call)
        except BaseException:
            self.watches.release(uri)
            raise

    async def _unsubscribe(self, call: Call, call_next: Handler) -> dict[str, Any] | None:
        uri = call.params.get("uri")
        session = call.session
        if isinstance(uri, str) and session is not None and uri in session.subscriptions:
            self.watches.release(uri)
        return await call_next(call)

    async def _listen(self, call: Call, call_next: Handler) -> dict[str, Any] | None:
        """2026-07-28 ``subscriptions/listen``: each URI of ``resourceSubscriptions`` is
        watched upstream while the stream is open; a URI no one upstream server serves
        is left out of the agreed filter (the acknowledgement shows it)."""
        wanted = call.params.get("notifications")
        uris = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
        if not isinstance(wanted, dict) or not isinstance(uris, list) or not uris:
            return await call_next(call)
        watched: list[str] = []
        try:
            for uri in dict.fromkeys(u for u in uris if isinstance(u, str)):
                try:
                    await self.watches.acquire(uri)
                except InvalidParams as exc:
                    log.info("gateway: listen stream %r: %s", call.id, exc.message)
                    continue
                watched.append(uri)
            call.params = {**call.params, "notifications": {**wanted, "resourceSubscriptions": watched}}
            return await call_next(call)
        finally:
            for uri in watched:
                self.watches.release(uri)

    async def _resources_read(self, call: Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("Invalid params: resources/read needs uri (a string)")
        if uri.startswith("ui://"):
            view = self.views.upstream(uri)
            if view is None:
                await self._refresh()  # names the views of the tools (cached lists: no request)
                view = self.views.upstream(uri)
            if view is not None:  # a tool's view: read from that tool's server
                server, upstream = view
                try:
                    read = await self.host.read_resource(upstream, server=server)
                except Denied as exc:
                    raise InvalidParams(f"Invalid params: {exc}") from None
                return self.views.contents(_passthrough(read), upstream, uri)
        try:
            return _passthrough(await self.host.read_resource(uri))
        except UnknownName:
            pass
        except Denied as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        # Not listed by exactly one server: a template's URI, say. Ask each that serves
        # resources and whose configuration offers it (the host refuses the others).
        denied: Denied | None = None
        for client in self.host.unguarded_clients():
            if client.server_capabilities.resources:
                try:
                    return _passthrough(await self.host.read_resource(uri, server=client.name))
                except Denied as exc:
                    denied = exc
                except ResourceNotFound:
                    continue
        if denied is not None:
            raise InvalidParams(f"Invalid params: {denied}")
        raise ResourceNotFound(uri)


@asynccontextmanager
async def _run_host(server: Server) -> AsyncIterator[Host]:
    assert isinstance(server, Gateway)
    host = server.host
    try:
        if host.servers:  # started by its owner: not ours to close
            yield host
            return
        async with host:
            for name, problem in host.failures.items():
                log.warning("gateway: server %r is not available: %s", name, problem)
            yield host
    finally:
        server.watches.close()


def _declared(capabilities: object, kind: str) -> bool:
    """Whether ``capabilities`` declares ``kind`` (``completions: {}`` declares it too)."""
    value = getattr(capabilities, kind, None)
    return value is not None and value is not msgspec.UNSET


def _fast_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed and this process's stdin and stdout are pipes
    or sockets (uvloop aborts the process on a stdout that is a regular file); None
    (plain asyncio) otherwise, or when ``MODELCTX_NO_UVLOOP`` is set."""
    if os.environ.get("MODELCTX_NO_UVLOOP"):
        return None
    try:
        import uvloop
    except ImportError:
        return None
    for fd in (0, 1):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return None
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _relay_progress(ctx: Context) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.report_progress(progress, total, message)

    return relay


def _wire(item: Any) -> dict[str, Any]:
    wire: dict[str, Any] = msgspec.to_builtins(item)
    return wire


def _passthrough(result: Any) -> dict[str, Any]:
    """A typed upstream result as the gateway sends it (see ``_strip``)."""
    return _strip(_wire(result))


def _strip(wire: dict[str, Any]) -> dict[str, Any]:
    """An upstream result (JSON, changed in place) as the gateway sends it: what the
    dispatcher adds for this gateway (its resultType, serverInfo and cache hints) taken out."""
    for key in ("resultType", "ttlMs", "cacheScope"):
        wire.pop(key, None)
    meta = wire.get("_meta")
    if isinstance(meta, dict):
        meta.pop(_meta.SERVER_INFO, None)
        if not meta:
            del wire["_meta"]
    return wire


#: The params of a ``tools/call`` the fast lane takes (anything else: the common way).
_PLAIN_CALL = frozenset({"name", "arguments", "_meta"})


def _answer(route: _Route, result: dict[str, Any] | None, error: BaseException | None) -> dict[str, Any]:
    """The gateway's ``tools/call`` result for the upstream's ``result`` (changed in
    place) or ``error``: the result less what the upstream's dispatcher added for it
    (``_strip``); a server that is down, timed out or answered garbage, an ``isError``
    result naming it. Raises the upstream's JSON-RPC error as it sent it
    (``ProtocolError``), and anything that is not an ``MCPError``."""
    if error is None and result is not None and isinstance(result.get("content"), list):
        return _strip(result)
    if error is None:
        error = MalformedResponse(f"its result has no content list: {str(result)[:200]}")
    if isinstance(error, ProtocolError) or not isinstance(error, MCPError):
        raise error
    return _error(f"server {route.server.name!r} could not run {route.tool.name!r}: {error}")


class _Relay:
    """One call the fast lane relays: ``settled`` takes the upstream's answer (from
    ``ClientSession.begin``) and responds with ours; ``cancel`` gives it up. One object
    a call, not a closure each (and their cells)."""

    __slots__ = (
        "gateway",
        "request",
        "peer",
        "caller",
        "send",
        "respond",
        "route",
        "abandon",
        "again",
        "token",
        "reporting",
        "waiting",
        "final",
    )

    def __init__(
        self,
        gateway: Gateway,
        request: Request,
        peer: Peer,
        caller: Caller,
        send: Send,
        respond: Callable[[dict[str, Any] | None], None],
        route: _Route,
        token: str | int | None = None,
    ) -> None:
        self.gateway = gateway
        self.request = request
        self.peer = peer
        self.caller = caller  # as the dispatcher admitted it
        self.send = send
        self.respond = respond
        self.route = route
        self.abandon: Callable[[], None] | None = None
        self.again: asyncio.Task[None] | None = None  # served again the common way
        self.token = token  # the caller's progress token, if it asked for progress
        self.reporting: asyncio.Task[None] | None = None  # a progress report being sent
        self.waiting: dict[str, Any] | None = None  # the latest report that arrived meanwhile
        self.final: tuple[dict[str, Any] | None, BaseException | None] | None = None  # after the reports

    def progressed(self, progress: float, total: float | None, message: str | None) -> None:
        """The upstream reported progress: report it to the caller, under its token.
        One report is sent at a time; one that arrives meanwhile waits, and a newer one
        replaces it (as the client's own callbacks get them)."""
        params: dict[str, Any] = {"progressToken": self.token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        if self.reporting is not None:
            self.waiting = note
            return
        self._report(note)

    def _report(self, note: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(_send_report(self.send, note))
        self.reporting = task
        task.add_done_callback(self._reported)

    def _reported(self, _: asyncio.Task[None]) -> None:
        self.reporting = None
        note, self.waiting = self.waiting, None
        if note is not None:
            self._report(note)
            return
        final, self.final = self.final, None
        if final is not None:
            self._settled(*final)

    def settled(self, result: dict[str, Any] | None, error: BaseException | None) -> None:
        if self.reporting is not None:
            # The reports sent first: none may follow the result (progress.mdx).
            self.final = (result, error)
            return
        self._settled(result, error)

    def _settled(self, result: dict[str, Any] | None, error: BaseException | None) -> None:
        self.abandon = None  # the upstream's request holds this: no cycle left behind
        request, gateway = self.request, self.gateway
        try:
            if result is not None and result.get("resultType", "complete") != "complete":
                # input_required: the common way asks, and answers.
                self.again = gateway._serve_again(request, self.peer, self.send, self.respond)
                return
            # What the dispatcher would answer, had the call come the common way.
            answer = gateway.dispatcher.decorate("tools/call", _answer(self.route, result, error), self.caller)
            response = result_response(request.id, answer)
        except Exception as exc:  # noqa: BLE001 - an answer for every request; error_reply logs it
            response = error_reply(request, exc)
        self.respond(response)

    def cancel(self) -> None:
        abandon, self.abandon = self.abandon, None
        if abandon is not None:
            abandon()
        if self.again is not None:
            self.again.cancel()


async def _send_report(send: Send, note: dict[str, Any]) -> None:
    try:
        await send(note)
    except (MCPError, OSError) as exc:  # the caller left: its answer will not be read either
        log.debug("gateway: a progress report was not delivered: %s", exc)


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def serve_gateway(
    config: str | Any,
    *,
    transport: str = "stdio",
    name: str = "modelctx-gateway",
    bare_names: bool = False,
    **options: Any,
) -> None:
    """Serve the servers of ``config`` (a path to an ``mcpServers`` file, or a
    ``HostConfig``) as one gateway until stopped: ``transport`` "stdio" or "http"
    (``host``, ``port`` and the other options of ``Server.run``)."""
    host = Host.from_file(config) if isinstance(config, str) else Host(config)
    Gateway(host, name=name, bare_names=bare_names).run(transport, **options)

