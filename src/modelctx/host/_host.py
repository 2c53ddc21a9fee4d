"""``Host``: many MCP servers joined into one set of tools (and prompts and resources).

::

    async with Host.from_file("mcp.json") as host:      # every server connects, in parallel
        tools = await host.tools()                       # namespaced: "weather_forecast", ...
        result = await host.call_tool("weather_forecast", {"city": "Oslo"})

Theory of operation. Each configured server is a ``HostServer`` (its ``Client``, status,
restarts, cached lists). ``start`` connects them all at once, each within its own
timeout; one that fails is reported (``host.failures``, ``HostServer.status/error``)
and the others work. ``tools()`` asks every server for its (cached, fresh) tools,
applies the per-server allow/deny globs, and names them with one ``NameMap`` over the
whole set, so the names do not depend on the order servers connected in and map back
exactly. ``call_tool`` maps a name back, asks the approval hook, then calls.

Approval. By default the hook is ``Approvals(ApprovalPolicy.from_config(config), ui)``:
each server's ``"approval"`` (allow, ask, deny; per tool globs; ``readOnlyHint`` tools
allowed on servers configured ``"trusted": true``) decides, ``ask`` goes to ``ui.approve``, and with the
default ``DeclineUI`` (no person to ask) an ``ask`` is a denied call whose result says how
to allow it. Tools a policy denies outright are left out of ``tools()`` and refused by
``call_tool``. "Always" answers last for the host's life, or across runs in the file
``approval_store`` names (``Host(approval_store=path)``, or ``"approvalStore"`` in the
configuration). A host that wants no approval at all passes ``approvals=AllowAll()``.
Resources (and templates) and prompts: a server whose approval is "deny" offers none, and
its ``"resources"``/``"prompts"`` globs exclude others; those are left out of the lists,
and reading or getting one raises ``Denied`` (no question is asked for them: see
``ApprovalPolicy.permits``).

Authorization. An HTTP server with an ``"auth"`` block gets an OAuth provider from
``modelctx.auth`` (``OAuthClientProvider`` or ``ClientCredentialsProvider``), all of them
keeping tokens in one ``FileTokenStore`` (the configuration's ``"tokenStore"``, else
``~/.config/modelctx/tokens.json``), so a person signs in once, not once per run. When a
server needs the person to sign in, ``authorization_handler(server_name, url)`` sends
them to ``url`` (default: the system browser; the gateway prints it on stderr).

What servers ask of the host is wired per server (``handlers_for``): elicitation goes to
the ``HostUI`` (``ui.elicit(server_name, elicitation)``), sampling to the ``sample``
callback the host was given (``sample(server_name, params)``; no callback: the capability
is not declared), roots to the configured folders (``"roots"`` in the configuration, top
level or per server).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, Self

import msgspec

from ..errors import LocalError, MCPError
from ..protocol.apps import visible_to
from ._approval import ApprovalPolicy, Approvals, Kind, Verdict
from ._config import HostConfig, ServerSpec, load_config
from ._names import NameMap, _clean
from ._server import HostServer, RestartPolicy, ServerUnavailable
from ._ui import DeclineUI, HostUI, SampleCallback, handlers_for

if TYPE_CHECKING:
    from ..auth import TokenStore
    from ..client import Client, ProgressCallback
    from ..protocol.types.v2026_07_28 import (
        CallToolResult,
        GetPromptResult,
        Prompt,
        ReadResourceResult,
        Resource,
        ResourceTemplate,
        Tool,
    )

__all__ = ["AllowAll", "ApprovalCheck", "Denied", "GuardedClient", "Host", "UnknownName"]

log = logging.getLogger("modelctx.host")

#: Called with (server name, kind) when a list of a server changed; kind "all" after a
#: restart or a server added or removed.
ChangeListener = Callable[[str, str], None]
#: Sends the person to an authorization URL: (server name, url).
AuthorizationHandler = Callable[[str, str], Awaitable[None]]


class ApprovalCheck(Protocol):
    """The seam before every tool call (``Approvals`` is the host's own).

    ``check`` returns a truthy value to let the call go on (``Approvals`` returns a
    ``Verdict``; True does), a falsy one to deny it (the call never reaches the server;
    the caller gets an ``isError`` result saying it was denied, with the ``Verdict``'s
    reason when there is one). ``tool`` is
    the server's own definition (original name); ``arguments`` are exactly what will be
    sent. ``hidden`` is True for a tool every call of which would be denied: ``tools()``
    leaves it out."""

    async def check(self, server: HostServer, tool: Tool, arguments: dict[str, Any]) -> Verdict | bool: ...

    def hidden(self, server: HostServer, tool: Tool) -> bool: ...


class AllowAll:
    """An approval hook for a host that wants none: every call goes on, no tool is hidden
    (``Host(approvals=AllowAll())``; the configuration's ``"approval"`` is then ignored)."""

    async def check(self, server: HostServer, tool: Tool, arguments: dict[str, Any]) -> bool:
        return True

    def hidden(self, server: HostServer, tool: Tool) -> bool:
        return False


class UnknownName(LocalError, LookupError):
    """No server offers a tool (or prompt, or resource) by that name."""


class Denied(LocalError, PermissionError):
    """The configuration denies the resource or prompt asked for (the server is denied
    as a whole, or its ``"resources"``/``"prompts"`` globs exclude it); nothing was
    asked of the server. The message names it, the server and the setting."""


class Host:
    """Many MCP servers, one set of tools for a model. Use ``async with``.

    ``config``: the servers and roots (``HostConfig``, ``Host.from_file(path)``).
    ``ui``: the person's side: asked to approve calls and when a server wants the user
    (default ``DeclineUI``: denies and declines, saying how to allow).
    ``approvals``: the hook asked before each tool call (default: ``Approvals`` with the
    configuration's policy and ``ui``; ``AllowAll()`` for none).
    ``approval_store``: a JSON file that keeps "always" answers across runs (default: the
    configuration's ``"approvalStore"``; none: they last for the host's life). Only used
    by the default ``approvals``.
    ``sample``: ``sample(server_name, params)`` answers servers' sampling requests;
    without it the host does not offer sampling. ``request_timeout``: the default
    deadline of each request to a server, restarted by each progress report the server
    sends; ``request_max_timeout`` (600 s): the most a request may take however long it
    keeps reporting (``Client(timeout=)``, ``ClientOptions(max_timeout=)``).
    ``restarts``: how crashed stdio servers are restarted (``RestartPolicy``). ``authorization_handler(server_name, url)``: sends the
    person to an OAuth authorization URL (default: the system browser). ``token_store``:
    where OAuth tokens are kept (default: a ``FileTokenStore`` at the configuration's
    ``"tokenStore"``, else ``~/.config/modelctx/tokens.json``).
    """

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        approvals: ApprovalCheck | None = None,
        ui: HostUI | None = None,
        approval_store: str | os.PathLike[str] | None = None,
        sample: SampleCallback | None = None,
        request_timeout: float = 60.0,
        request_max_timeout: float = 600.0,
        restarts: RestartPolicy | None = None,
        authorization_handler: AuthorizationHandler | None = None,
        token_store: TokenStore | None = None,
    ) -> None:
        self.config = config or HostConfig()
        self.ui: HostUI = ui or DeclineUI()
        if approvals is not None and approval_store is not None:
            raise ValueError("pass approval_store to your own Approvals(..., store=) rather than to Host")
        store = approval_store if approval_store is not None else self.config.approval_store
        self.approvals: ApprovalCheck = approvals or Approvals(
            ApprovalPolicy.from_config(self.config), self.ui, store=store
        )
        self.sample = sample
        self.request_timeout = request_timeout
        self.request_max_timeout = request_max_timeout
        self.restarts = restarts or RestartPolicy()
        self.authorization_handler = authorization_handler
        self._token_store: TokenStore | None = token_store
        #: Every server by name, connected or not (see ``HostServer.status``).
        self.servers: dict[str, HostServer] = {}
        self._registered: set[str] = set()
        self._tool_index = _ToolIndex()
        self._hidden: set[str] = set()
        # Names of tools only an MCP Apps view may call: listed by tools(views=True), never called by call_tool.
        self._app_only: set[str] = set()
        #: Extensions each server's client declares (``ClientOptions.extensions``), for the
        #: servers connected after it is set; the gateway declares MCP Apps here.
        self.client_extensions: dict[str, dict[str, Any]] = {}
        self._prompt_index: dict[str, tuple[HostServer, Prompt]] = {}
        self._hidden_prompts: set[str] = set()
        self._listeners: list[ChangeListener] = []

    @classmethod
    def from_config(cls, config: HostConfig, **options: Any) -> Host:
        return cls(config, **options)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **options: Any) -> Host:
        """A host for the ``mcpServers`` file at ``path``; raises ``HostConfigError``."""
        return cls(load_config(path), **options)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- servers ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect every configured server at once, each within its own ``timeout``. A
        server that fails is left "failed" (see ``failures``); the others are registered.
        Servers the host already has (a second ``start``) are left as they are."""
        specs = [spec for name, spec in self.config.servers.items() if name not in self.servers]
        await asyncio.gather(*(self.add_server(spec) for spec in specs))

    @property
    def failures(self) -> dict[str, str]:
        """Server name to what went wrong, for every server that is not working."""
        return {name: s.error or s.status for name, s in self.servers.items() if s.status == "failed"}

    async def connect(self, spec: ServerSpec) -> Client:
        """Start the server ``spec`` describes and return its connected ``Client`` (named
        ``spec.name``); raises what connecting raised. The server is known to the host
        (``host.servers``) but offers nothing until ``register(client)``."""
        if spec.name in self.servers:
            raise ValueError(f"a server named {spec.name!r} is already in this host; remove_server it first")
        server = HostServer(spec.name, spec, self._make_client, self._changed, self.restarts)
        self.servers[spec.name] = server
        return await server.start()

    def register(self, client: Client) -> None:
        """Offer ``client``'s tools, prompts and resources through this host. A client the
        host did not connect is adopted under ``client.name`` (never restarted)."""
        server = self.servers.get(client.name)
        if server is None or server.client is not client:
            if server is not None:
                raise ValueError(f"a server named {client.name!r} is already in this host")
            server = HostServer(client.name, None, self._make_client, self._changed)
            server.adopt(client)
            self.servers[client.name] = server
        self._registered.add(client.name)
        self._changed(server, "all")

    def instructions(self) -> dict[str, str]:
        """Each registered, ready server's ``instructions`` (what it told the host about
        using it), by server name; servers that gave none are left out. The model loop
        puts them in the system prompt (``server_instructions``)."""
        return {
            client.name: client.instructions
            for client in self.unguarded_clients()
            if isinstance(client.instructions, str) and client.instructions.strip()
        }

    def unguarded_clients(self) -> list[Client]:
        """The connected clients of the registered servers, by name. Unguarded: a tool
        called through one of them skips the approval hook; a model's calls go through
        ``call_tool`` (or ``find_client_for(name).call_tool``), which ask it first."""
        return [
            server.client
            for name, server in sorted(self.servers.items())
            if name in self._registered and server.status == "ready" and server.client is not None
        ]

    async def add_server(self, spec: ServerSpec) -> HostServer:
        """Connect and register one more server. Never raises for a server that fails to
        connect: the returned ``HostServer`` says so (``status`` "failed", ``error``)."""
        try:
            await self.connect(spec)
        except (MCPError, OSError) as exc:
            log.warning("server %r failed to start: %s", spec.name, exc)
        server = self.servers[spec.name]
        if server.status == "ready" and server.client is not None:
            self.register(server.client)
        return server

    async def remove_server(self, name: str) -> None:
        """Disconnect the server ``name`` (stopping its process) and forget it."""
        server = self.servers.pop(name, None)
        if server is None:
            raise UnknownName(f"no server named {name!r}; the servers are {sorted(self.servers)}")
        self._registered.discard(name)
        # Its names go at once, not at the next tools(): a call to one is an unknown tool.
        self._tool_index = self._tool_index.without(server)
        self._prompt_index = {key: found for key, found in self._prompt_index.items() if found[0] is not server}
        await server.close()
        self._changed(server, "all")

    async def close(self) -> None:
        """Disconnect every server."""
        await asyncio.gather(*(server.close() for server in self.servers.values()))

    def add_listener(self, listener: ChangeListener) -> None:
        """Call ``listener(server_name, kind)`` whenever a server's list changes."""
        self._listeners.append(listener)

    def _changed(self, server: HostServer, kind: str) -> None:
        for listener in list(self._listeners):
            listener(server.name, kind)

    # -- what servers ask of the host ----------------------------------------------------------
    def _make_client(self, server: HostServer) -> Client:
        from ..client import Client, ClientOptions

        spec = server.spec
        if spec is None:
            raise ServerUnavailable(f"server {server.name!r} was not started by this host; it cannot restart it")
        roots = spec.roots if spec.roots is not None else self.config.roots
        handlers = handlers_for(spec.name, self.ui, self.sample, roots)
        # Signing in happens within the first request: its wait includes the person's.
        probe = min(10.0, spec.timeout) + spec.connect_timeout - spec.timeout
        options = ClientOptions(
            probe_timeout=probe, max_timeout=self.request_max_timeout, extensions=dict(self.client_extensions)
        )
        auth = self._auth_for(spec) if spec.auth is not None else None
        return Client(
            _transport(spec, auth), name=spec.name, handlers=handlers, options=options, timeout=self.request_timeout
        )

    def _auth_for(self, spec: ServerSpec) -> Any:
        from .oauth import provider_for, token_store

        if self._token_store is None:
            self._token_store = token_store(self.config.token_store)
        assert spec.auth is not None
        return provider_for(spec.name, spec.auth, self._token_store, self.authorization_handler)

    # -- tools --------------------------------------------------------------------------------------
    async def tools(self, *, views: bool = False) -> list[Tool]:
        """Every tool of every registered server that serves tools, fresh, filtered by the
        server's allow/deny globs and by the approval hook (a denied tool is left out),
        renamed ``<server>_<tool>`` (see ``_names``). A tool only an MCP Apps view may call
        (``_meta.ui.visibility`` without ``"model"``) is left out, and ``call_tool``
        refuses it; ``views=True`` lists it too, for a client that shows views (the
        gateway's). Ordered by server name, then as the server lists them. A server that
        cannot answer in time is left out (and logged)."""
        listed = await self._gather("tools", lambda server: server.tools())
        pairs = [
            (server, tool)
            for server, tools in listed
            for tool in tools
            if server.spec is None or server.spec.tools.permits(tool.name)
        ]
        # Hidden tools keep their names (the names of the others do not depend on the
        # policy, nor on who asks) and their index entry: a call by name is refused as
        # denied, not unknown.
        names = NameMap((server.name, tool.name) for server, tool in pairs)
        self._tool_index = _ToolIndex((names.name_for(server.name, tool.name), server, tool) for server, tool in pairs)
        self._hidden = {
            names.name_for(server.name, tool.name) for server, tool in pairs if self.approvals.hidden(server, tool)
        }
        self._app_only = {
            names.name_for(server.name, tool.name) for server, tool in pairs if not visible_to(tool.meta, "model")
        }
        left_out = self._hidden if views else self._hidden | self._app_only
        return [
            msgspec.structs.replace(tool, name=name)
            for server, tool in pairs
            if (name := names.name_for(server.name, tool.name)) not in left_out
        ]

    def listed_tool(self, name: str) -> Tool | None:
        """The server's definition behind a namespaced ``name`` of the last ``tools()``."""
        found = self._tool_index.get(name)
        return None if found is None else found[1]

    def listed(self, name: str) -> tuple[HostServer, Tool] | None:
        """The server and its own definition behind a namespaced ``name`` of the last
        ``tools()``; None for a name it did not list."""
        return self._tool_index.get(name)

    def find_client_for(self, name: str) -> tuple[GuardedClient, str]:
        """The server behind a namespaced ``name``, as a ``GuardedClient``, and the
        server's own tool name.

        The handle's ``call_tool`` goes through this host's approval hook, as
        ``host.call_tool`` does: routing a name is never a way around approval. The raw
        ``Client`` is ``handle.unguarded_client``, for code that has already decided.
        Names come from the last ``tools()``. A plain ``<server>_<tool>`` built by hand is
        also understood when exactly one registered server's name fits. Raises
        ``UnknownName``, or ``ServerUnavailable`` while that server is down."""
        found = self._tool_index.get(name)
        if found is not None:
            server, tool = found
            if server.client is None or server.status != "ready":
                raise ServerUnavailable(f"server {server.name!r} is {server.status}")
            return GuardedClient(self, server), tool.name
        fits = [
            client
            for client in self.unguarded_clients()
            if name.startswith(f"{_clean(client.name)}_") and len(name) > len(client.name) + 1
        ]
        if len(fits) == 1:
            return GuardedClient(self, self.servers[fits[0].name]), name[len(fits[0].name) + 1 :]
        why = f"servers {sorted(c.name for c in fits)} could each own it" if fits else "no server's name fits"
        raise UnknownName(f"no tool named {name!r} ({why}); use the names host.tools() returns")

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallToolResult:
        """Call the tool ``name`` (a name from ``tools()``) after the approval hook allowed it.

        An unknown name and a denied call come back as ``isError`` results (what a model
        can read and act on); the call then never reaches a server. Errors of the server
        or the connection raise ``MCPError``, as ``Client.call_tool`` does.
        ``timeout`` (default ``request_timeout``) restarts with each progress report of
        the server, up to ``request_max_timeout``; ``progress(progress, total,
        message)`` is called with each report."""
        found = self._tool_index.get(name)
        if found is None:
            await self.tools()  # the list may have changed since the caller saw it
            found = self._tool_index.get(name)
        if found is None or name in self._app_only:
            offered = sorted(self._tool_index.names() - self._hidden - self._app_only)
            only = " (only an MCP Apps view may call it)" if found is not None else ""
            return _error_result(f"there is no tool named {name!r}{only}; the tools are: {', '.join(offered)}")
        server, tool = found
        return await self._guarded_call(server, tool, name, arguments, timeout, progress)

    async def _guarded_call(
        self,
        server: HostServer,
        tool: Tool,
        name: str,
        arguments: dict[str, Any] | None,
        timeout: float | None,
        progress: ProgressCallback | None,
    ) -> CallToolResult:
        sent = dict(arguments or {})
        verdict = await self.approvals.check(server, tool, sent)
        if not verdict:
            why = verdict.reason if isinstance(verdict, Verdict) else None
            why = why or ("the configuration denies it" if name in self._hidden else "it was not approved")
            return _error_result(
                f"the call to {name} (tool {tool.name!r} of server {server.name!r}) was denied: {why}; "
                "it was not run"
            )
        client = await server.ready()
        return await client.call_tool(tool.name, sent, timeout=timeout, progress=progress)

    async def _call_server_tool(
        self,
        server: HostServer,
        original: str,
        arguments: dict[str, Any] | None,
        timeout: float | None,
        progress: ProgressCallback | None,
    ) -> CallToolResult:
        """``server``'s own tool ``original``, through approval (``GuardedClient.call_tool``)."""
        name = self._tool_index.name_of(server, original)
        if name is None:  # not in the last tools(): the server's list may have changed since
            await self.tools()
            name = self._tool_index.name_of(server, original)
        if name is not None:
            # Through call_tool: its refusals (a tool only a view may call) hold here too.
            return await self.call_tool(name, arguments, timeout=timeout, progress=progress)
        return _error_result(f"server {server.name!r} offers no tool named {original!r} through this host")

    # -- prompts and resources ------------------------------------------------------------------------
    def offers(self, server: HostServer, kind: Kind, name: str) -> bool:
        """Whether the host offers ``server``'s resource (``name``: its URI, or a
        template's URI template) or prompt (its own name): the server's ``"resources"``
        or ``"prompts"`` globs, then the approval hook's ``permits`` when it has one (a
        server at "deny" offers none)."""
        spec = server.spec
        if spec is not None and kind != "tool":
            globs = spec.resources if kind == "resource" else spec.prompts
            if not globs.permits(name):
                return False
        permits = getattr(self.approvals, "permits", None)
        return permits is None or bool(permits(server, kind, name))

    def _refuse(self, server: HostServer, kind: Kind, name: str) -> None:
        if not self.offers(server, kind, name):
            key = "resources" if kind == "resource" else "prompts"
            raise Denied(
                f"the {kind} {name!r} of server {server.name!r} is denied by the configuration (the "
                f"server's 'approval' is 'deny', or its {key!r} globs exclude it); it was not asked for"
            )

    async def prompts(self) -> list[Prompt]:
        """Every prompt of every registered server, named ``<server>_<prompt>`` as tools
        are, less those the configuration denies (their names are kept, as tools' are)."""
        listed = await self._gather("prompts", lambda server: server.prompts())
        pairs = [(server, prompt) for server, prompts in listed for prompt in prompts]
        names = NameMap((server.name, prompt.name) for server, prompt in pairs)
        self._prompt_index = {names.name_for(s.name, p.name): (s, p) for s, p in pairs}
        self._hidden_prompts = {
            names.name_for(s.name, p.name) for s, p in pairs if not self.offers(s, "prompt", p.name)
        }
        return [
            msgspec.structs.replace(p, name=name)
            for s, p in pairs
            if (name := names.name_for(s.name, p.name)) not in self._hidden_prompts
        ]

    async def find_prompt(self, name: str) -> tuple[HostServer, Prompt]:
        """The server of the prompt ``name`` (a name from ``prompts()``) and that server's
        own definition of it; ``UnknownName``, ``Denied`` for one the configuration denies."""
        found = self._prompt_index.get(name)
        if found is None:
            await self.prompts()
            found = self._prompt_index.get(name)
        if found is None:
            offered = sorted(set(self._prompt_index) - self._hidden_prompts)
            raise UnknownName(f"no prompt named {name!r}; the prompts are {offered}")
        self._refuse(found[0], "prompt", found[1].name)
        return found

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> GetPromptResult:
        """The messages of the prompt ``name`` (a name from ``prompts()``); ``UnknownName``,
        ``Denied``."""
        server, prompt = await self.find_prompt(name)
        return await (await server.ready()).get_prompt(prompt.name, arguments)

    async def resources(self) -> list[tuple[str, Resource]]:
        """Every resource of every registered server, as (server name, resource), less
        those the configuration denies."""
        return [(server.name, resource) for server, resource in await self._resources() if self.offers(server, "resource", resource.uri)]

    async def _resources(self) -> list[tuple[HostServer, Resource]]:
        listed = await self._gather("resources", lambda server: server.resources())
        return [(server, resource) for server, resources in listed for resource in resources]

    async def resource_templates(self) -> list[tuple[str, ResourceTemplate]]:
        """Every resource template of every registered server, as (server name,
        template), less those the configuration denies (globs over the URI template)."""

        async def fetch(server: HostServer) -> list[ResourceTemplate]:
            return list(await (await server.ready()).resource_templates())

        listed = await self._gather("resources", fetch)
        return [
            (server.name, template)
            for server, templates in listed
            for template in templates
            if self.offers(server, "resource", template.uri_template)
        ]

    async def read_resource(self, uri: str, *, server: str | None = None) -> ReadResourceResult:
        """Read ``uri`` from ``server``, or from the one server that lists it; raises
        ``UnknownName`` when none or several do (then name the server), ``Denied`` when
        the configuration denies it (nothing is sent to the server)."""
        if server is None:
            owners = sorted({s.name for s, resource in await self._resources() if resource.uri == uri})
            if len(owners) != 1:
                why = f"servers {owners} all list it" if owners else "no server lists it"
                raise UnknownName(f"cannot tell which server to read {uri!r} from ({why}); pass server=")
            server = owners[0]
        target = self.servers.get(server)
        if target is None:
            raise UnknownName(f"no server named {server!r}; the servers are {sorted(self.servers)}")
        self._refuse(target, "resource", uri)
        return await (await target.ready()).read_resource(uri)

    async def _gather(
        self, kind: str, fetch: Callable[[HostServer], Awaitable[list[Any]]]
    ) -> list[tuple[HostServer, list[Any]]]:
        """``fetch`` from every ready, registered server that serves ``kind``, in parallel,
        each within its own timeout; by server name."""
        servers = [
            server
            for name, server in sorted(self.servers.items())
            if name in self._registered
            and server.status in ("ready", "restarting")
            and (server.client is None or getattr(server.client.server_capabilities, kind))
        ]

        async def one(server: HostServer) -> list[Any]:
            limit = server.spec.timeout if server.spec is not None else self.request_timeout
            try:
                return await asyncio.wait_for(fetch(server), limit)
            except (MCPError, TimeoutError) as exc:
                log.warning("server %r: could not list its %s: %s", server.name, kind, exc or "timed out")
                return []

        results = await asyncio.gather(*(one(server) for server in servers))
        return list(zip(servers, results, strict=True))


class _ToolIndex:
    """The tools of the last ``Host.tools()`` both ways: by the host's name, and by the
    server and its own name (what a ``GuardedClient`` calls). Built from one list and
    only ever replaced whole, so the two ways never disagree."""

    __slots__ = ("_by_name", "_by_own")

    def __init__(self, entries: Iterable[tuple[str, HostServer, Tool]] = ()) -> None:
        self._by_name: dict[str, tuple[HostServer, Tool]] = {}
        self._by_own: dict[tuple[HostServer, str], str] = {}
        for name, server, tool in entries:
            self._by_name[name] = (server, tool)
            self._by_own[(server, tool.name)] = name

    def get(self, name: str) -> tuple[HostServer, Tool] | None:
        return self._by_name.get(name)

    def name_of(self, server: HostServer, own: str) -> str | None:
        """The host's name for ``server``'s tool ``own``."""
        return self._by_own.get((server, own))

    def names(self) -> set[str]:
        return set(self._by_name)

    def without(self, server: HostServer) -> _ToolIndex:
        """This index less ``server``'s tools (it was removed)."""
        return _ToolIndex((name, owner, tool) for name, (owner, tool) in self._by_name.items() if owner is not server)


class GuardedClient:
    """One server of a host, as ``Host.find_client_for`` hands it out: ``call_tool`` asks
    the host's approval hook first (a denied call is an ``isError`` result and never
    reaches the server), exactly as ``Host.call_tool`` does. ``name`` is the server's.
    ``unguarded_client`` is the raw ``Client``: what is sent through it skips approval,
    so use it only where the call was approved already (the gateway does its own check)."""

    __slots__ = ("_host", "_server")

    def __init__(self, host: Host, server: HostServer) -> None:
        self._host = host
        self._server = server

    @property
    def name(self) -> str:
        return self._server.name

    @property
    def unguarded_client(self) -> Client:
        """The server's ``Client`` itself; raises ``ServerUnavailable`` while it is down."""
        client = self._server.client
        if client is None:
            raise ServerUnavailable(f"server {self._server.name!r} is {self._server.status}")
        return client

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> CallToolResult:
        """Call this server's own tool ``name`` after the host's approval hook allowed it."""
        return await self._host._call_server_tool(self._server, name, arguments, timeout, progress)

    def __repr__(self) -> str:
        return f"GuardedClient({self._server.name!r})"


def _transport(spec: ServerSpec, auth: Any = None) -> Any:
    if spec.command is not None:
        from ..transports.stdio_client import StdioClientTransport

        return StdioClientTransport(
            spec.command, spec.args, env=dict(spec.env) or None, cwd=spec.cwd, connect_timeout=spec.timeout
        )
    from ..transports.http_client import HttpClientTransport

    assert spec.url is not None  # a spec has a command or a url
    return HttpClientTransport(
        spec.url, headers=dict(spec.headers), connect_timeout=min(spec.timeout, 10.0), auth=auth,
        transport=spec.transport,
    )


def _error_result(text: str) -> CallToolResult:
    from ..protocol.types.v2026_07_28 import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=text)], is_error=True, result_type="complete")
