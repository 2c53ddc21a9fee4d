"""The gateway's side of the person: its own client, asked per call.

The person is behind the gateway's client. What a gateway call needs to ask it (an
approval, a question an upstream server asks while the call runs) goes to the client
of that call, as a form elicitation or a sampling request on the call's ``Context``:

- **Approval**: each call hands ``Approvals.check`` a ``CallAsker`` (allow once / always /
  deny, with the server, the tool and the arguments), whose ``scope`` says which client
  an "always" holds for (``GatewayUI.client_scope``).
- **What an upstream asks** about a call (elicitation, sampling) and what it logs goes to
  that call's client: the gateway calls the upstream with handlers of the call's own
  (``CallScope.handlers``, ``Client.call_tool_raw(..., handlers=)``), and the client
  answers with them what the upstream relates to that call: a 2026-07-28 upstream's
  ``input_required`` rounds, a handshake-era upstream's requests on the call's own reply
  stream (HTTP) or naming it in ``_meta`` (modelctx's servers, any transport), or, when
  it names none (other SDKs' servers on stdio), the one call in flight on that upstream
  connection (``ClientSession``: a server asks while it handles a request). With several
  in flight, what an upstream relates to no call comes to ``GatewayUI.elicit``/``sample``
  (the host's client-wide handlers) and is declined there; so is a handshake-era
  upstream's question to a 2026-07-28 client, which is asked in stateless rounds that the
  gateway cannot hold the upstream call across.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LocalError, ProtocolError
from ..server import Context, ElicitResult
from ..server.dispatch import InputRequired, caller_identity
from ._approval import ApprovalRequest, Decision, Verdict
from ._server import HostServer
from ._ui import handlers_for

if TYPE_CHECKING:
    from ..client import ClientHandlers, Elicitation
    from ..protocol import Notification
    from ..server.dispatch import Call

__all__ = ["DECISION_FORM", "CallAsker", "CallScope", "GatewayUI"]

log = logging.getLogger("modelctx.host")

#: The form an ``ask`` approval shows the gateway's client.
DECISION_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "oneOf": [
                {"const": "allow_once", "title": "Allow once"},
                {"const": "always", "title": "Always allow"},
                {"const": "deny", "title": "Deny"},
            ],
        }
    },
    "required": ["decision"],
}
_DECISIONS = {"allow_once": Decision.ALLOW_ONCE, "always": Decision.ALWAYS, "deny": Decision.DENY}


@dataclass
class CallScope:
    """One gateway ``tools/call`` in flight: its context, for what its upstream asks and
    logs about it (the ``HostUI`` of that call: ``handlers_for(server, scope, ...)``)."""

    ctx: Context
    server: str
    questions: int = field(default=0)
    #: The upstream asks within the call's own rounds (2026-07-28 ``input_required``), where
    #: the gateway's 2026-07-28 client can be asked in turn with ``input_required``; a
    #: handshake-era upstream asks on its connection, where it cannot.
    in_rounds: bool = field(default=True)

    def handlers(self, *, sample: bool, in_rounds: bool, roots: Sequence[str | Path] = ()) -> ClientHandlers:
        """The upstream call's own handlers: elicitation (and sampling, when the
        gateway's client samples for the host: ``sample``) asked of this call's client,
        the upstream's log messages about the call sent to it; roots are the client's.
        ``in_rounds``: the upstream speaks 2026-07-28 (see the attribute)."""
        self.in_rounds = in_rounds
        handlers = handlers_for(self.server, self, self.sample if sample else None, roots)
        return dataclasses.replace(handlers, notification=self.log)

    def _unaskable(self, what: str) -> bool:
        """After ``InputRequired``: True when it cannot reach the gateway's client (a
        handshake-era upstream asking a 2026-07-28 client); else it must unwind the call."""
        if self.in_rounds:
            return False
        log.warning(
            "declined: server %r asked for %s on its connection while the gateway's client speaks 2026-07-28",
            self.server, what,
        )
        return True

    async def approve(self, request: ApprovalRequest) -> Decision:
        """Approvals are asked through ``CallAsker``, not here: denied."""
        return Decision.DENY

    async def elicit(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        """What the upstream asks about this call, asked of its client."""
        self.questions += 1
        key = f"gateway-{server}-{self.questions}"
        answer: ElicitResult[Any]
        try:
            if elicitation.mode == "url" and elicitation.url is not None:
                answer = await self.ctx.elicit_url(elicitation.message, elicitation.url, key=key)
            else:
                schema = elicitation.requested_schema or {"type": "object", "properties": {}}
                answer = await self.ctx.elicit(elicitation.message, schema, key=key)
        except ProtocolError as exc:
            log.warning("declined: server %r asked the gateway's client, which cannot answer: %s", server, exc)
            return {"action": "decline"}
        except InputRequired:
            if self._unaskable("elicitation"):
                return {"action": "decline"}
            raise
        reply: dict[str, Any] = {"action": answer.action}
        if answer.action == "accept" and isinstance(answer.content, dict):
            reply["content"] = answer.content
        return reply

    async def sample(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        """A sampling request of the upstream about this call: the call's client samples."""
        self.questions += 1
        options = {k: v for k, v in params.items() if k not in ("messages", "maxTokens", "_meta")}
        messages = params.get("messages") or []
        max_tokens = int(params.get("maxTokens") or 1000)
        try:
            return await self.ctx.sample(messages, max_tokens, key=f"gateway-{server}-{self.questions}", **options)
        except InputRequired:
            if self._unaskable("sampling"):
                raise LocalError(f"server {server!r} asked for sampling the gateway's client cannot answer") from None
            raise

    def log(self, note: Notification) -> None:
        """A log message of the upstream about this call, to its client at its level."""
        level, logger = note.params.get("level"), note.params.get("logger")
        if note.method != "notifications/message" or not isinstance(level, str):
            return
        relay = asyncio.ensure_future(
            self.ctx.log(level, note.params.get("data"), logger if isinstance(logger, str) else None)
        )
        _relays.add(relay)
        relay.add_done_callback(_relays.discard)

    async def show(self, message: str) -> None:
        log.warning("%s", message)


#: Log relays being sent (a reference each, until sent).
_relays: set[asyncio.Task[None]] = set()


class CallAsker:
    """The ``Asker`` of one gateway call: its client, asked with a form elicitation.
    ``scope``: who that client is (see ``GatewayUI.client_scope``)."""

    __slots__ = ("ctx", "scope")

    def __init__(self, ctx: Context, scope: str | None) -> None:
        self.ctx = ctx
        self.scope = scope

    async def approve(self, request: ApprovalRequest) -> Decision | Verdict:
        message = "Approve this tool call?\n" + request.describe()
        try:
            answer = await self.ctx.elicit(message, DECISION_FORM, key="gateway-approval")
        except ProtocolError as exc:  # the client cannot elicit (MissingRequiredClientCapability), ...
            return Verdict(False, f"it needs approval and the gateway's client cannot be asked ({exc.message})")
        if answer.action != "accept" or not isinstance(answer.content, dict):
            return Verdict(False, f"the gateway's client answered {answer.action!r} to the approval")
        decision = _DECISIONS.get(str(answer.content.get("decision")), Decision.DENY)
        if decision is Decision.DENY:
            return Verdict(False, "the gateway's client denied it")
        return decision


class GatewayUI:
    """The ``HostUI`` of a gateway: the person is behind the gateway's own client.

    Nothing is asked here: each call hands ``Approvals.check`` its own ``CallAsker`` and
    calls its upstream with its own handlers (``CallScope.handlers``), so what an
    upstream asks about a call reaches that call's client. What reaches ``approve``,
    ``elicit`` and ``sample`` is asked outside any call the upstream relates it to:
    there is no one to ask, denied / declined. ``client_scope`` names the client of a
    call, for the "always" answers it gives.
    """

    def __init__(self) -> None:
        # A name for each duplex connection (stdio, in-process) while it lives.
        self._connections: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
        self._numbers = itertools.count(1)

    def client_scope(self, call: Call) -> str | None:
        """Who sent ``call``, as an "always" answer is remembered for: its authenticated
        principal (issuer, subject, client id), else its handshake session, else its
        duplex connection; None when nothing tells it from another client (2026-07-28
        over HTTP without authorization)."""
        principal = caller_identity(call)  # the one identity rule (server.dispatch)
        if principal is not None:
            return "principal:" + principal
        if call.session is not None:
            return f"session:{call.session.id}"
        connection = call.connection
        if connection is None:
            return None
        name = self._connections.get(connection)
        if name is None:
            name = self._connections[connection] = f"connection:{next(self._numbers)}"
        return name

    async def approve(self, request: ApprovalRequest) -> Decision:
        """Asked without the call's ``Asker`` (a caller of ``Approvals.check`` that did not
        hand one in): there is no one to ask here, denied."""
        log.warning(
            "denied %r of server %r: approvals are asked through the gateway call's own asker", request.tool.name,
            request.server,
        )
        return Decision.DENY

    async def elicit(self, server: str | HostServer, elicitation: Elicitation) -> dict[str, Any]:
        """An upstream asked outside any call it relates the question to: declined."""
        name = server if isinstance(server, str) else server.name  # a host of this writing passes its HostServer
        log.warning(
            "declined: server %r asked %r about no gateway call it named; only a question about a call is "
            "asked of that call's client", name, elicitation.message,
        )
        return {"action": "decline"}

    async def sample(self, server: HostServer | str, params: dict[str, Any]) -> dict[str, Any]:
        """The host's sampling callback, for a request about no call: refused."""
        name = server if isinstance(server, str) else server.name
        raise LocalError(f"server {name!r} asked for sampling about no gateway call; there is no one to ask")

    async def show(self, message: str) -> None:
        log.warning("%s", message)
