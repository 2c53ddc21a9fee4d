"""The gateway's side of the person: its own client, asked per call.

The person is behind the gateway's client. What a gateway call needs to ask it (an
approval, a question an upstream server asks while the call runs) goes to the client
of that call, as a form elicitation or a sampling request on the call's ``Context``:

- **Approval**: each call hands ``Approvals.check`` a ``CallAsker`` (allow once / always /
  deny, with the server, the tool and the arguments), whose ``scope`` says which client
  an "always" holds for (``GatewayUI.client_scope``).
- **What an upstream asks** (``GatewayUI.elicit``, ``sample``: the host's ``HostUI`` and
  sampling callback) goes to the call it belongs to: the call whose task asks (a 2026-07-28
  upstream's ``input_required`` is answered inside the call's own ``call_tool_raw``), else
  the one call to that server in flight (a handshake-era upstream asks on its own
  connection, outside any call's task); neither: declined.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import LocalError, ProtocolError
from ..server import Context, ElicitResult
from ..server.dispatch import caller_identity
from ._approval import ApprovalRequest, Decision, Verdict
from ._server import HostServer

if TYPE_CHECKING:
    from ..client import Elicitation
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
    """One gateway ``tools/call`` in flight: its context, for what its upstream asks."""

    ctx: Context
    server: str
    questions: int = field(default=0)


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


_current: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar("modelctx_gateway_call", default=None)


class GatewayUI:
    """The ``HostUI`` of a gateway: the person is behind the gateway's own client.

    Approval questions do not come here: each call hands ``Approvals.check`` its own
    ``CallAsker`` (``approve`` here, asked without one, denies). ``elicit`` and
    ``sample`` relay what an upstream server asks to the client of the call it belongs
    to (a context variable the call handler sets, or the one call to that server in
    flight); outside a call there is no one to ask: declined. ``client_scope`` names
    the client of a call, for the "always" answers it gives.
    """

    def __init__(self) -> None:
        self._inflight: dict[str, list[CallScope]] = {}
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

    def enter(self, scope: CallScope) -> contextvars.Token[CallScope | None]:
        self._inflight.setdefault(scope.server, []).append(scope)
        return _current.set(scope)

    def leave(self, scope: CallScope, token: contextvars.Token[CallScope | None]) -> None:
        _current.reset(token)
        calls = self._inflight.get(scope.server)
        if calls is not None and scope in calls:
            calls.remove(scope)

    def scope_for(self, server: str) -> CallScope | None:
        """The gateway call that what ``server`` asks or says now belongs to, if known."""
        return self._scope_for(server)

    def _scope_for(self, server: str) -> CallScope | None:
        scope = _current.get()
        if scope is not None:
            return scope
        # A handshake-era upstream asks on its own connection, outside our call's task:
        # it belongs to our call only when exactly one call to that server is running.
        calls = self._inflight.get(server) or []
        return calls[0] if len(calls) == 1 else None

    async def approve(self, request: ApprovalRequest) -> Decision:
        """Asked without the call's ``Asker`` (a caller of ``Approvals.check`` that did not
        hand one in): there is no one to ask here, denied."""
        log.warning(
            "denied %r of server %r: approvals are asked through the gateway call's own asker", request.tool.name,
            request.server,
        )
        return Decision.DENY

    async def elicit(self, server: str | HostServer, elicitation: Elicitation) -> dict[str, Any]:
        # The configured name (the host of this writing passes its HostServer instead).
        server = server if isinstance(server, str) else server.name
        scope = self._scope_for(server)
        if scope is None:
            log.warning("declined: server %r asked %r outside a gateway call", server, elicitation.message)
            return {"action": "decline"}
        scope.questions += 1
        key = f"gateway-{server}-{scope.questions}"
        answer: ElicitResult[Any]
        try:
            if elicitation.mode == "url" and elicitation.url is not None:
                answer = await scope.ctx.elicit_url(elicitation.message, elicitation.url, key=key)
            else:
                schema = elicitation.requested_schema or {"type": "object", "properties": {}}
                answer = await scope.ctx.elicit(elicitation.message, schema, key=key)
        except ProtocolError as exc:
            log.warning("declined: server %r asked the gateway's client, which cannot answer: %s", server, exc)
            return {"action": "decline"}
        reply: dict[str, Any] = {"action": answer.action}
        if answer.action == "accept" and isinstance(answer.content, dict):
            reply["content"] = answer.content
        return reply

    async def sample(self, server: HostServer | str, params: dict[str, Any]) -> dict[str, Any]:
        """The host's sampling callback: the gateway's client samples (its model)."""
        name = server if isinstance(server, str) else server.name
        scope = self._scope_for(name)
        if scope is None:
            raise LocalError(f"server {name!r} asked for sampling outside a gateway call; there is no one to ask")
        scope.questions += 1
        options = {k: v for k, v in params.items() if k not in ("messages", "maxTokens", "_meta")}
        messages = params.get("messages") or []
        max_tokens = int(params.get("maxTokens") or 1000)
        return await scope.ctx.sample(messages, max_tokens, key=f"gateway-{name}-{scope.questions}", **options)

    async def show(self, message: str) -> None:
        log.warning("%s", message)
