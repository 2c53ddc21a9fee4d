"""``HostUI``: what the host asks the person in front of it, and the input servers ask for.

The host never talks to a terminal or a window itself. When a tool call needs a
person's approval, or a server asks the user something (elicitation), the host calls
the ``HostUI`` it was given:

- ``approve(ApprovalRequest) -> Decision``;
- ``elicit(server_name, Elicitation) -> {"action": "accept"|"decline"|"cancel", ...}``
  (form mode: fill in ``requested_schema``; URL mode: show the URL and the server's
  name and let the person choose to open it: a UI never opens or fetches it by itself,
  client/elicitation.mdx, URL mode);
- ``show(message)``: a notice (a store that could not be read, ...).

``DeclineUI`` (the default: no person to ask) denies and declines, saying how to give
the host a way to ask. ``ScriptedUI`` answers from lists, for tests.

``handlers_for(server_name, ui, sample, roots)`` builds the ``ClientHandlers`` of one
server's client: elicitation to ``ui.elicit`` with the configured name, sampling to the
host's ``sample`` callback (its model), roots from the configured folders.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import LocalError
from ._approval import ApprovalRequest, Decision

if TYPE_CHECKING:
    from ..client import ClientHandlers, Elicitation

__all__ = [
    "DeclineUI",
    "HostUI",
    "SampleCallback",
    "ScriptExhausted",
    "ScriptedUI",
    "handlers_for",
    "roots_of",
]

log = logging.getLogger("modelctx.host")

#: ``async (server_name, CreateMessageRequest params) -> CreateMessageResult dict``: how
#: the host answers a server's ``sampling/createMessage`` with its model.
SampleCallback = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

#: How long a person may take over one elicitation before it counts as cancelled.
ELICIT_TIMEOUT = 600.0


@runtime_checkable
class HostUI(Protocol):
    """The person's side of the host (see the module docstring)."""

    async def approve(self, request: ApprovalRequest) -> Decision: ...

    async def elicit(self, server: str, elicitation: Elicitation) -> dict[str, Any]: ...

    async def show(self, message: str) -> None: ...


_HOW_TO_APPROVE = (
    'give the host a UI (Host(ui=...), or use `modelctx chat`), or set "approval": "allow" '
    '(or {"tools": {"<tool>": "allow"}}) for this server in the configuration'
)


class DeclineUI:
    """The UI of a host with no person to ask: every approval is denied and every
    elicitation declined, each with a warning that says how to answer instead, so a
    server never waits for a person who is not there."""

    async def approve(self, request: ApprovalRequest) -> Decision:
        log.warning(
            "denied %r of server %r: it needs approval and this host has no one to ask; to allow it, %s",
            request.tool.name,
            request.server,
            _HOW_TO_APPROVE,
        )
        return Decision.DENY

    async def elicit(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        asked = f"to open {elicitation.url}" if elicitation.mode == "url" else "to fill in a form"
        log.warning(
            "declined: server %r asked the user %s (%r), and this host has no UI to ask (pass Host(ui=...))",
            server,
            asked,
            elicitation.message,
        )
        return {"action": "decline"}

    async def show(self, message: str) -> None:
        log.warning("%s", message)


class ScriptExhausted(LocalError):
    """A ``ScriptedUI`` was asked more than its script answers; the message says what."""


#: A scripted answer: the value itself, or a function of what was asked that returns it.
Scripted = Any


class ScriptedUI:
    """A UI that answers from lists, in order, and records what it was asked.

    ``decisions``: answers to ``approve`` (``Decision`` values, or functions, plain or
    async, of the ``ApprovalRequest``); ``answers``: answers to ``elicit``
    (``{"action": ...}`` dicts, or functions, plain or async, of ``(server, Elicitation)``). Asked once more than scripted, it raises
    ``ScriptExhausted`` naming the question. ``requests``, ``elicitations`` and
    ``notices`` hold what was asked and shown. It never opens a URL.
    """

    def __init__(self, decisions: Iterable[Scripted] = (), answers: Iterable[Scripted] = ()) -> None:
        self._decisions = list(decisions)
        self._answers = list(answers)
        self.requests: list[ApprovalRequest] = []
        self.elicitations: list[tuple[str, Elicitation]] = []
        self.notices: list[str] = []

    async def approve(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        if not self._decisions:
            raise ScriptExhausted(f"ScriptedUI has no decision left for:\n{request.describe()}")
        answer = self._decisions.pop(0)
        decision: Decision = await _resolve(answer(request) if callable(answer) else answer)
        return decision

    async def elicit(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        self.elicitations.append((server, elicitation))
        if not self._answers:
            raise ScriptExhausted(f"ScriptedUI has no answer left for server {server!r} asking {elicitation.message!r}")
        answer = self._answers.pop(0)
        result: dict[str, Any] = await _resolve(answer(server, elicitation) if callable(answer) else answer)
        return result

    async def show(self, message: str) -> None:
        self.notices.append(message)


async def _resolve(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# -- input requests from one server ---------------------------------------------------------------
def handlers_for(
    server_name: str,
    ui: HostUI,
    sample: SampleCallback | None = None,
    roots: Sequence[str | Path] = (),
    *,
    elicit_timeout: float = ELICIT_TIMEOUT,
) -> ClientHandlers:
    """The ``ClientHandlers`` of the client of the server configured as ``server_name``.

    Elicitation (form and URL mode) goes to ``ui.elicit(server_name, elicitation)`` (the
    elicitation's ``server`` is the configured name); an answer that does not come in
    ``elicit_timeout`` seconds is a cancel, and a URL-mode answer never carries content
    (client/elicitation.mdx). Sampling goes to ``sample(server_name, params)``; without
    it the client does not offer sampling. ``roots``: folders offered as ``file://``
    roots; none: the client does not offer roots.
    """
    from ..client import ClientHandlers

    async def elicitation(asked: Elicitation) -> dict[str, Any]:
        asked = dataclasses.replace(asked, server=server_name)
        try:
            answer = await asyncio.wait_for(ui.elicit(server_name, asked), elicit_timeout)
        except TimeoutError:
            log.warning(
                "server %r asked %r: no answer within %gs; cancelled", server_name, asked.message, elicit_timeout
            )
            return {"action": "cancel"}
        if asked.mode == "url" and isinstance(answer, dict) and "content" in answer:
            answer = {key: value for key, value in answer.items() if key != "content"}
        return answer

    async def sampling(params: dict[str, Any]) -> dict[str, Any]:
        assert sample is not None  # declared only with a callback
        return await sample(server_name, params)

    offered = roots_of(roots)

    async def list_roots() -> list[dict[str, Any]]:
        return [dict(root) for root in offered]

    return ClientHandlers(
        elicitation=elicitation,
        sampling=sampling if sample is not None else None,
        roots=list_roots if offered else None,
    )


def roots_of(folders: Sequence[str | Path]) -> list[dict[str, str]]:
    """Folders as roots (client/roots.mdx): an absolute ``file://`` URI and the folder's
    name, ``~`` expanded."""
    roots = []
    for folder in folders:
        path = Path(folder).expanduser().resolve()
        roots.append({"uri": path.as_uri(), "name": path.name or str(path)})
    return roots
