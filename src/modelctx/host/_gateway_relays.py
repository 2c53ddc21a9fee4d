"""What the gateway relays besides calls and lists: completions and resource subscriptions.

- ``completion/complete`` goes to the server that owns the prompt (its namespaced name
  mapped back to the server's own) or the resource template or resource (by its URI,
  which the gateway does not rename); the server's answer comes back as it sent it. An
  owner that offers no completions gets an empty list, as the spec allows.
- **Resource subscriptions**: the gateway's clients subscribe to a URI with handshake-era
  ``resources/subscribe`` or a 2026-07-28 listen stream's ``resourceSubscriptions``.
  ``ResourceWatches`` keeps one watch per subscribed URI on the server that owns it
  (``Client.listen(resource_uris=...)``: a listen stream, or ``resources/subscribe`` on
  a handshake-era server), counted by subscriber and closed with the last one; each
  update it hears is published on the gateway's bus, which turns it into
  ``notifications/resources/updated`` for the subscribed sessions and streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import InternalError, InvalidParams, MCPError, ProtocolError
from ..server.dispatch import UriTemplate
from ._host import Denied, Host, UnknownName
from ._server import HostServer

if TYPE_CHECKING:
    from ..client import Client

__all__ = ["ResourceWatches", "complete", "resource_owner"]

log = logging.getLogger("modelctx.host")

#: URIs the gateway watches at once for its subscribers (each is one stream upstream).
MAX_WATCHED_URIS = 1000
#: What an upstream that offers no completions answers.
_NO_COMPLETIONS: dict[str, Any] = {"completion": {"values": [], "total": 0, "hasMore": False}}


async def resource_owner(host: Host, uri: str) -> HostServer | None:
    """The one server that lists the resource ``uri``, or else the one whose resource
    template it is (the template's text itself, or a URI the template matches); None
    when no server, or several, could be meant, or the configuration denies it there
    (a denied resource is neither completed nor watched)."""
    listed = sorted({name for name, resource in await host.resources() if resource.uri == uri})
    if len(listed) > 1:
        return None
    if not listed:
        listed = sorted(
            {name for name, template in await host.resource_templates() if _names_or_matches(template.uri_template, uri)}
        )
    server = host.servers.get(listed[0]) if len(listed) == 1 else None
    return server if server is not None and host.offers(server, "resource", uri) else None


def _names_or_matches(template: str, uri: str) -> bool:
    if template == uri:
        return True
    try:
        return UriTemplate(template).match(uri) is not None
    except ValueError:  # a template this parser refuses matches nothing
        return False


async def complete(host: Host, params: dict[str, Any]) -> dict[str, Any]:
    """The gateway's answer to ``completion/complete`` with ``params``: asked of the
    server that owns the ref (see the module docstring). Raises ``InvalidParams`` for a
    ref no server owns, the upstream's own JSON-RPC error as it sent it."""
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise InvalidParams("Invalid params: completion/complete needs ref and argument objects")
    name, value = argument.get("name"), argument.get("value")
    if not isinstance(name, str) or not isinstance(value, str):
        raise InvalidParams("Invalid params: argument needs name and value (strings)")
    context = params.get("context")
    arguments = context.get("arguments") if isinstance(context, dict) else None
    if ref.get("type") == "ref/prompt":
        prompt = ref.get("name")
        if not isinstance(prompt, str):
            raise InvalidParams("Invalid params: a ref/prompt needs name (a string)")
        try:
            server, own = await host.find_prompt(prompt)
        except UnknownName:
            raise InvalidParams(f"Unknown prompt: {prompt}") from None
        except Denied as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None
        upstream_ref: dict[str, Any] = {"type": "ref/prompt", "name": own.name}
    elif ref.get("type") == "ref/resource":
        uri = ref.get("uri")
        owner = await resource_owner(host, uri) if isinstance(uri, str) else None
        if owner is None:
            raise InvalidParams(f"Unknown resource or template: {uri}")
        server, upstream_ref = owner, {"type": "ref/resource", "uri": uri}
    else:
        raise InvalidParams(f"Invalid params: unknown ref type {ref.get('type')!r}")
    client = await server.ready()
    if client.server_capabilities.completions in (None, msgspec.UNSET):
        return dict(_NO_COMPLETIONS)
    try:
        result = await client.complete(
            upstream_ref, name, value, arguments if isinstance(arguments, dict) else None
        )
    except ProtocolError:
        raise
    except MCPError as exc:  # down, timed out: an error the gateway's client can read
        raise InternalError(f"server {server.name!r} could not complete {name!r}: {exc}") from exc
    return {"completion": _completion_wire(result)}


def _completion_wire(result: Any) -> dict[str, Any]:
    completion = result.completion
    wire: dict[str, Any] = {"values": list(completion.values)}
    for key, attr in (("total", "total"), ("hasMore", "has_more")):
        value = getattr(completion, attr, None)
        if isinstance(value, (int, bool)):
            wire[key] = value
    return wire


class ResourceWatches:
    """One watch per subscribed URI on the server that owns it, shared by every
    subscriber of that URI and stopped with the last. ``updated(uri)`` is called for
    each update a watch hears."""

    def __init__(self, host: Host, updated: Callable[[str], None]) -> None:
        self._host = host
        self._updated = updated
        self._watches: dict[str, tuple[int, asyncio.Task[None]]] = {}

    async def acquire(self, uri: str) -> None:
        """Watch ``uri`` for one more subscriber. Raises ``InvalidParams`` when no one
        server owns it, or too many URIs are watched already."""
        held = self._watches.get(uri)
        if held is not None:
            self._watches[uri] = (held[0] + 1, held[1])
            return
        if len(self._watches) >= MAX_WATCHED_URIS:
            raise InvalidParams(
                f"Invalid params: the gateway already watches {MAX_WATCHED_URIS} resources; "
                "unsubscribe from some first"
            )
        server = await resource_owner(self._host, uri)
        if server is None:
            raise InvalidParams(f"Invalid params: no one upstream server serves the resource {uri!r}")
        held = self._watches.get(uri)  # another subscriber may have started it meanwhile
        if held is not None:
            self._watches[uri] = (held[0] + 1, held[1])
            return
        task = asyncio.get_running_loop().create_task(self._watch(server, uri))
        self._watches[uri] = (1, task)

    def release(self, uri: str) -> None:
        """One subscriber of ``uri`` less; the last one stops its watch."""
        held = self._watches.get(uri)
        if held is None:
            return
        if held[0] > 1:
            self._watches[uri] = (held[0] - 1, held[1])
            return
        del self._watches[uri]
        held[1].cancel()

    def close(self) -> None:
        for _, task in self._watches.values():
            task.cancel()
        self._watches.clear()

    async def _watch(self, server: HostServer, uri: str) -> None:
        from ..client import ResourceUpdated

        try:
            client: Client = await server.ready()
            async for event in client.listen(resource_uris=[uri]):
                if isinstance(event, ResourceUpdated) and event.uri == uri:
                    self._updated(uri)
        except MCPError as exc:
            log.info("server %r: watching %r ended: %s", server.name, uri, exc)
