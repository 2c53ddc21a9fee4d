"""``HostServer``: one configured server as the host runs it.

Theory of operation. A ``HostServer`` owns one ``Client`` at a time (named after the
configured server) and keeps three things true about it:

- **Status.** ``"connecting"`` until the first handshake ends, then ``"ready"``;
  ``"failed"`` (with ``error``) when it could not connect within ``spec.timeout``;
  ``"restarting"`` while a crashed stdio server is started again; ``"closed"``.
- **Restart.** The session tells us when the connection ends. A stdio server that ends
  without the host asking is started again after a backoff (``RestartPolicy``: 0.5 s,
  doubling, at most 5 attempts in a row; a server that then stayed up for 30 s starts a
  fresh streak; past the bound it is "failed"). Every cached list is dropped and the
  listen stream is re-opened on the new connection. HTTP servers are not restarted:
  the host did not start them.
- **Fresh lists.** Tools, prompts and resources are cached here for as long as the
  server's ``ttlMs`` says (server/utilities/caching.mdx; handshake-era servers give no
  TTL: their lists are kept until a ``list_changed`` notification if they declared
  ``listChanged``, else fetched each time). A ``list_changed``, over
  ``subscriptions/listen`` (2026-07-28) or as a notification (handshake era), drops the
  list at once; a list fetched while a change arrived is not kept, nor one fetched
  before the listen stream was confirmed (a change then may have been missed).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LocalError, MCPError
from ._config import ServerSpec

if TYPE_CHECKING:
    from ..client import Client
    from ..protocol.types.v2026_07_28 import Prompt, Resource, Tool

__all__ = ["HostServer", "RestartPolicy", "ServerUnavailable"]

log = logging.getLogger("modelctx.host")

LIST_KINDS = ("tools", "prompts", "resources")


class ServerUnavailable(LocalError):
    """The server is not connected (it failed to start, or is closed); the message says why."""


@dataclass(frozen=True)
class RestartPolicy:
    """How a crashed stdio server is restarted: after ``first_backoff`` seconds, doubling
    each time, at most ``attempts`` times in a row; a server that stayed up for
    ``stable_after`` seconds has a fresh count. ``attempts=0``: never restart."""

    attempts: int = 5
    first_backoff: float = 0.5
    stable_after: float = 30.0


@dataclass
class _Cached:
    items: list[Any]
    expires: float  # time.monotonic(); math.inf: until a list_changed
    generation: int


class HostServer:
    """One server of a host: its spec, its ``Client``, its status and its cached lists.

    ``make_client(server)`` builds a fresh, unconnected ``Client`` for it (the host gives
    each the handlers that route elicitation, sampling and roots to the host);
    ``on_change(server, kind)`` is called when a list of ``kind`` changed, or all of them
    after a restart.
    """

    def __init__(
        self,
        name: str,
        spec: ServerSpec | None,
        make_client: Callable[[HostServer], Client],
        on_change: Callable[[HostServer, str], None] = lambda server, kind: None,
        restarts: RestartPolicy | None = None,
    ) -> None:
        self.name = name
        self.spec = spec
        self.client: Client | None = None
        self.status = "connecting"
        self.error: str | None = None
        #: How many times the server was restarted after a crash.
        self.restarts = 0
        self.restart_policy = restarts or RestartPolicy()
        self._make_client = make_client
        self._on_change = on_change
        self._ready = asyncio.Event()
        self._cache: dict[str, _Cached] = {}
        self._generation = dict.fromkeys(LIST_KINDS, 0)
        self._listen_task: asyncio.Task[None] | None = None
        #: The server confirmed the listen stream: changes are heard from now on.
        self.listening = False
        self._restart_task: asyncio.Task[None] | None = None
        self._streak = 0
        self._started_at = 0.0

    def __repr__(self) -> str:
        return f"<HostServer {self.name!r} {self.status}>"

    @property
    def identity(self) -> str:
        """The server's command line or URL (what approvals remembered for it are bound to)."""
        if self.spec is not None:
            return self.spec.identity
        return self.client.transport.name if self.client is not None else self.name

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> Client:
        """Connect within ``spec.timeout``; on failure ``status`` is "failed", ``error`` says
        why, and the error is raised."""
        try:
            client = await self._connect()
        except BaseException as exc:
            self.status = "failed"
            self.error = _describe(exc)
            self._ready.set()  # waiters learn it failed
            raise
        self._adopt(client)
        return client

    def adopt(self, client: Client) -> None:
        """Run an already connected ``client`` (one the host did not start: no restarts)."""
        self._adopt(client)

    async def _connect(self) -> Client:
        client = self._make_client(self)
        timeout = self.spec.connect_timeout if self.spec is not None else 30.0
        try:
            await asyncio.wait_for(client.connect(), timeout)
        except TimeoutError:
            await _quietly_close(client)
            raise ServerUnavailable(
                f"server {self.name!r} ({self.identity}) did not finish connecting within {timeout:g}s; "
                "raise its 'timeout' in the configuration if it starts slowly"
            ) from None
        return client

    def _adopt(self, client: Client) -> None:
        self.client = client
        self.status = "ready"
        self.error = None
        self._started_at = time.monotonic()
        self._drop_all_lists()
        client.session.on_closed = self._connection_ended
        self.listening = False
        self._listen_task = asyncio.ensure_future(self._listen(client))
        self._ready.set()

    async def close(self) -> None:
        """Close the connection (stopping the process of a stdio server); no restart follows."""
        self.status = "closed"
        self._ready.set()
        for task in (self._restart_task, self._listen_task):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.client is not None:
            self.client.session.on_closed = None
            await _quietly_close(self.client)

    async def ready(self, timeout: float | None = None) -> Client:
        """The connected client, waiting (at most ``timeout`` seconds, default the spec's)
        while the server connects or restarts; raises ``ServerUnavailable``."""
        limit = timeout if timeout is not None else (self.spec.timeout if self.spec else 30.0)
        if self.status in ("connecting", "restarting"):
            try:
                await asyncio.wait_for(self._ready.wait(), limit)
            except TimeoutError:
                raise ServerUnavailable(
                    f"server {self.name!r} is still {self.status} after {limit:g}s"
                ) from None
        if self.status != "ready" or self.client is None:
            reason = f": {self.error}" if self.error else ""
            raise ServerUnavailable(f"server {self.name!r} is {self.status}{reason}")
        return self.client

    # -- crash and restart ---------------------------------------------------------------------
    def _connection_ended(self, exc: BaseException) -> None:
        if self.status != "ready":
            return
        self.error = _describe(exc)
        self._drop_all_lists()
        if self.spec is None or self.spec.kind != "stdio":
            self.status = "failed"
            log.warning("server %r disconnected: %s", self.name, self.error)
            self._on_change(self, "all")
            return
        self.status = "restarting"
        self._ready.clear()
        log.warning("server %r stopped (%s); restarting it", self.name, self.error)
        self._restart_task = asyncio.ensure_future(self._restart())

    async def _restart(self) -> None:
        old = self.client
        if self._listen_task is not None:
            self._listen_task.cancel()
        if old is not None:
            old.session.on_closed = None
            await _quietly_close(old)
        policy = self.restart_policy
        if time.monotonic() - self._started_at > policy.stable_after:
            self._streak = 0
        while self.status == "restarting":
            if self._streak >= policy.attempts:
                self.status = "failed"
                self.error = f"gave up after {self._streak} restarts in a row; last: {self.error}"
                log.error("server %r: giving up: %s", self.name, self.error)
                self._ready.set()
                self._on_change(self, "all")
                return
            await asyncio.sleep(policy.first_backoff * 2**self._streak)
            self._streak += 1
            try:
                client = await self._connect()
            except (MCPError, OSError) as exc:  # any failure to start counts against the bound
                self.error = _describe(exc)
                log.warning("server %r: restart %d failed: %s", self.name, self._streak, self.error)
                continue
            if self.status != "restarting":  # closed meanwhile
                await _quietly_close(client)
                return
            self.restarts += 1
            self._adopt(client)
            self._on_change(self, "all")

    # -- freshness --------------------------------------------------------------------------------
    async def _listen(self, client: Client) -> None:
        """Drop a list the moment the server says it changed; the stream is re-opened by the
        client when it drops, and by ``_adopt`` after a restart."""
        caps = client.server_capabilities
        # Handshake-era notifications cost nothing to hear, and some servers send them
        # without declaring listChanged; a listen stream is opened only where announced.
        wanted = {kind: not client.modern or _lists_change(getattr(caps, kind)) for kind in LIST_KINDS}
        if not any(wanted.values()):
            return
        try:
            async for event in client.listen(
                tools=wanted["tools"], prompts=wanted["prompts"], resources=wanted["resources"], on_open=self._heard
            ):
                kind = getattr(event, "kind", None)
                if kind in LIST_KINDS:
                    self.invalidate(kind)
        except MCPError as exc:
            log.info("server %r: listening for changes ended: %s", self.name, exc)
        finally:
            self.listening = False

    def _heard(self) -> None:
        # A list fetched before the stream was confirmed may have missed a change.
        self.listening = True
        self._drop_all_lists()

    def invalidate(self, kind: str) -> None:
        """Forget the cached list of ``kind`` ("tools", "prompts" or "resources") now."""
        self._generation[kind] += 1
        self._cache.pop(kind, None)
        if self.client is not None:
            self.client.cache.invalidate(f"{kind}/list")
            if kind == "resources":
                self.client.cache.invalidate("resources/templates/list")
        self._on_change(self, kind)

    def _drop_all_lists(self) -> None:
        for kind in LIST_KINDS:
            self._generation[kind] += 1
        self._cache.clear()

    async def tools(self) -> list[Tool]:
        """The server's tools, from the cache while it is fresh."""
        client = await self.ready()
        return await self._list("tools", client, client.list_tools, lambda page: page.tools)

    async def prompts(self) -> list[Prompt]:
        """The server's prompts, from the cache while it is fresh."""
        client = await self.ready()
        return await self._list("prompts", client, client.list_prompts, lambda page: page.prompts)

    async def resources(self) -> list[Resource]:
        """The server's resources, from the cache while it is fresh."""
        client = await self.ready()
        return await self._list("resources", client, client.list_resources, lambda page: page.resources)

    async def _list(
        self,
        kind: str,
        client: Client,
        page: Callable[[str | None], Awaitable[Any]],
        items: Callable[[Any], list[Any]],
    ) -> list[Any]:
        cached = self._cache.get(kind)
        generation = self._generation[kind]
        if cached is not None and cached.generation == generation and time.monotonic() < cached.expires:
            return cached.items
        collected: list[Any] = []
        ttl_ms = math.inf
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            result = await page(cursor)
            collected.extend(items(result))
            ttl_ms = min(ttl_ms, result.ttl_ms)
            cursor = result.next_cursor if isinstance(result.next_cursor, str) else None
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
        announces = _lists_change(getattr(client.server_capabilities, kind))
        if not client.modern:
            # No ttlMs in the handshake era: a server that announces changes is believed.
            ttl_ms = math.inf if announces else 0
        # A server that announces changes: keep its list only while we hear them.
        keep = self.listening or not announces
        if keep and self._generation[kind] == generation and ttl_ms > 0:
            self._cache[kind] = _Cached(collected, time.monotonic() + ttl_ms / 1000.0, generation)
        return collected


def _lists_change(capability: object) -> bool:
    return getattr(capability, "list_changed", False) is True


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def _quietly_close(client: Client) -> None:
    try:
        await asyncio.wait_for(client.close(), 10.0)
    except (MCPError, OSError, TimeoutError) as exc:
        log.debug("closing %s: %s", client.name, exc)

