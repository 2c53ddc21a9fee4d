"""``modelctx chat -p "question"``: one question answered, then exit, with no person to ask.

Theory of operation. The host starts as in the chat, but its UI is ``OneShotUI``: a tool
that the configuration sets to "ask" runs only when an ``--allow GLOB`` matches it (as
``SERVER/TOOL`` or as the name the model sees, ``SERVER_TOOL``); any other is denied, the
model reads that it was, and stderr says which ``--allow`` would have let it run. Servers'
questions (elicitation) are declined and their sampling requests refused, each with a
line on stderr. The answer goes to stdout (text), or with ``--json`` one object::

    {"answer": "...", "stopped": "answered" | "max_steps",
     "tool_calls": [{"name", "server", "tool", "arguments", "is_error", "result"}]}

Progress of a running tool and each call go to stderr, so stdout holds the answer only.

Exit statuses (cli/_exit.py): 0 answered; 1 the model stopped after its most turns
without an answer (the notice is the answer); 2 usage (no key, a bad config, a file that
cannot be resumed); 4 the model API failed; 130 Ctrl-C.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ProtocolError
from ._approval import ApprovalPolicy, ApprovalRequest, Approvals, Decision
from ._chat_tools import ChatTools
from ._config import load_config
from ._host import Host
from ._model import Conversation, Final, ModelError, ModelLoop, ToolCallRequested, ToolResultEvent, result_parts

if TYPE_CHECKING:
    from ..client import Elicitation
    from ._chat import ChatOptions
    from ._model import Model, ModelEvent

__all__ = ["OneShotRecord", "OneShotUI", "ask_once", "run_once"]

ANSWERED, NO_ANSWER, MODEL_FAILED = 0, 1, 4


class OneShotUI:
    """A ``HostUI`` for a run with no person: ``--allow`` globs approve, all else is
    refused, with a line on ``err`` for each refusal."""

    def __init__(self, allow: Sequence[str], err: TextIO | None = None) -> None:
        self.allow = tuple(allow)
        self.err = err if err is not None else sys.stderr

    def allows(self, server: str, tool: str) -> bool:
        from ._names import namespaced

        names = (f"{server}/{tool}", namespaced(server, tool))
        return any(fnmatch.fnmatchcase(name, glob) for glob in self.allow for name in names)

    async def approve(self, request: ApprovalRequest) -> Decision:
        from ._names import namespaced

        if self.allows(request.server, request.tool.name):
            self.say(f"allowed by --allow: {request.server}/{request.tool.name}")
            return Decision.ALLOW_ONCE
        self.say(
            f"denied {request.server}/{request.tool.name}: it needs approval and no one is asked in -p mode; "
            f"to let it run, add --allow '{namespaced(request.server, request.tool.name)}'"
        )
        return Decision.DENY

    async def elicit(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        asked = f"to open {elicitation.url}" if elicitation.mode == "url" else "to fill in a form"
        self.say(f"declined: server {server!r} asked {asked} ({elicitation.message}); run the chat without -p to answer")
        return {"action": "decline"}

    async def show(self, message: str) -> None:
        self.say(f"notice: {message}")

    def say(self, line: str) -> None:
        print(f"modelctx chat: {line}", file=self.err, flush=True)


class OneShotRecord:
    """The calls of one run and its final answer, as ``--json`` prints them."""

    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}
        self.final: Final | None = None

    def add(self, event: ModelEvent) -> None:
        if isinstance(event, ToolCallRequested):
            self.calls[event.id] = {
                "name": event.name,
                "server": event.server,
                "tool": event.original,
                "arguments": event.arguments,
            }
        elif isinstance(event, ToolResultEvent):
            texts = [getattr(part, "text", "") for part in result_parts(event.result)]
            self.calls.setdefault(event.id, {"name": event.name})
            self.calls[event.id].update(is_error=event.is_error, result="\n".join(t for t in texts if t))
        elif isinstance(event, Final):
            self.final = event

    def as_json(self) -> dict[str, Any]:
        final = self.final
        return {
            "answer": final.text if final is not None else "",
            "stopped": final.reason if final is not None else None,
            "tool_calls": list(self.calls.values()),
        }

    @property
    def status(self) -> int:
        return ANSWERED if self.final is not None and self.final.reason == "answered" else NO_ANSWER


async def run_once(events: Any, *, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Drain the loop's ``events`` (an async iterator), narrate calls on ``err`` and print
    the answer on ``out``; returns the exit status. A model failure is one line on
    ``err`` and status 4."""
    record = OneShotRecord()
    try:
        async for event in events:
            record.add(event)
            if isinstance(event, ToolCallRequested):
                print(f"modelctx chat: → {event.name} {json.dumps(event.arguments, default=str)}", file=err, flush=True)
    except ModelError as exc:
        print(f"modelctx chat: model error: {exc}", file=err)
        return MODEL_FAILED
    if as_json:
        print(json.dumps(record.as_json(), ensure_ascii=False, default=str), file=out)
    else:
        print(record.final.text if record.final is not None else "", file=out)
    return record.status


async def ask_once(config_path: str, model: Model, options: ChatOptions, conversation: Conversation | None) -> int:
    """``modelctx chat -p``: the host with a ``OneShotUI``, one run of the model loop, the
    answer on stdout (see ``_chat_once``)."""
    assert options.question is not None
    ui = OneShotUI(options.allow)
    config = load_config(config_path)
    approvals = Approvals(ApprovalPolicy.from_config(config), ui, store=getattr(config, "approval_store", None))

    async def refuse_sampling(server: str, params: dict[str, Any]) -> dict[str, Any]:
        ui.say(f"refused: server {server!r} asked the model to answer for it (sampling); no one is asked in -p mode")
        refused = ProtocolError("the user refused the sampling request")
        refused.code = -1
        raise refused

    quiet = logging.getLogger("modelctx")
    quiet.setLevel(logging.ERROR)  # a server that fails to start is the answer's problem, said once below
    host = Host(config, approvals=approvals, ui=ui, sample=refuse_sampling)
    async with host:
        for name, server in sorted(host.servers.items()):
            if server.status == "failed":
                ui.say(f"server {name} failed to start: {server.error}")
        events = ModelLoop(ChatTools(host), model).run(conversation or Conversation(), options.question)
        return await run_once(events, as_json=options.as_json, out=sys.stdout, err=sys.stderr)
