"""The soak run's steady traffic: ``Client`` workers of both eras over stdio and HTTP.

Each worker holds one ``Client`` and, beside it, one open listen (a
``subscriptions/listen`` stream on 2026-07-28; on a handshake session,
``resources/subscribe`` and the session's GET stream over HTTP), and calls the server's
handlers one after another in a seeded random order, checking every answer. Each
outcome goes to the ``Tally``: a right answer is ``ok``, an error no fault provoked is
``unexpected``. Every call has a deadline (``CALL_TIMEOUT``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelctx import Client, ClientHandlers, ClientOptions, ProtocolError
from modelctx.client import ResourceUpdated
from modelctx.transports.stdio_client import StdioClientTransport

from .procs import child_env, stdio_command
from .server import CRASH_MARKER
from .tally import Tally

CALL_TIMEOUT = 30.0
#: How long a ``touch`` waits for its update before touching again, and how many times.
UPDATE_WAIT, UPDATE_TRIES = 2.0, 5
#: HTTP workers open a new Client after this many calls (sessions come and go).
HTTP_RECONNECT_EVERY = 150


@dataclass
class Worker:
    """One Client's loop: ``transport`` is "http" or "stdio", ``mode`` a Client mode."""

    name: str
    transport: str
    mode: str
    url: str
    tally: Tally
    stderr_file: Path
    seed: int
    client: Client | None = None
    logs: int = 0
    elicitations: int = 0
    updates: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    server_pids: list[int] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return f"soak://items/{self.name}"

    def _client(self) -> Client:
        async def answer(elicitation: Any) -> dict[str, Any]:
            self.elicitations += 1
            if "name" in elicitation.message:
                return {"action": "accept", "content": {"name": self.name}}
            return {"action": "accept", "content": {"age": 42}}

        def notified(note: Any) -> None:
            # Only the logs of ``op_work`` (3 steps): a cancelled call's late logs are not.
            if note.method == "notifications/message" and str(note.params.get("data", "")).endswith(" of 3"):
                self.logs += 1

        handlers = ClientHandlers(elicitation=answer, notification=notified)
        options = ClientOptions(
            log_level="info", cache=False, client_info={"name": f"soak-{self.name}", "version": "0"}
        )
        target: Any = self.url
        if self.transport == "stdio":
            target = StdioClientTransport(stdio_command(), env=child_env(self.stderr_file))
        return Client(target, mode=self.mode, timeout=CALL_TIMEOUT, handlers=handlers, options=options)

    async def run(self, stop: asyncio.Event) -> None:
        rng = random.Random(self.seed)
        while not stop.is_set():
            self.client = self._client()
            try:
                await asyncio.wait_for(self.client.connect(), CALL_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - whatever it is, it is counted unexpected
                self.tally.bad(f"{self.label}:connect", repr(exc))
                await asyncio.sleep(1)
                continue
            if isinstance(self.client.transport, StdioClientTransport) and self.client.transport.pid:
                self.server_pids.append(self.client.transport.pid)
            listener = asyncio.create_task(self._listen(self.client))
            try:
                await self._calls(rng, stop)
            finally:
                listener.cancel()
                await asyncio.gather(listener, return_exceptions=True)
                await asyncio.wait_for(self.client.close(), CALL_TIMEOUT)
            self.tally.good(f"{self.label}:session")

    @property
    def label(self) -> str:
        return f"{self.transport}-{'handshake' if self.mode == 'handshake' else 'modern'}"

    async def _calls(self, rng: random.Random, stop: asyncio.Event) -> None:
        calls = 0
        while not stop.is_set():
            if self.transport == "http" and calls >= HTTP_RECONNECT_EVERY:
                return
            calls += 1
            kind, op = rng.choice(OPS)
            try:
                await asyncio.wait_for(op(self), CALL_TIMEOUT)
            except TimeoutError:
                self.tally.bad(f"{self.label}:{kind}:timeout", f"{kind} took over {CALL_TIMEOUT} s")
            except Exception as exc:  # noqa: BLE001 - whatever it is, it is counted unexpected
                self.tally.bad(f"{self.label}:{kind}", f"{type(exc).__name__}: {exc}")
            else:
                self.tally.good(f"{self.label}:{kind}")

    async def _listen(self, client: Client) -> None:
        try:
            async for event in client.listen(tools=True, resource_uris=[self.uri]):
                if isinstance(event, ResourceUpdated):
                    self.updates.put_nowait(event.uri)
                else:
                    self.tally.note(f"{self.label}:list_changed_heard")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever it is, it is counted unexpected
            self.tally.bad(f"{self.label}:listen", f"{type(exc).__name__}: {exc}")

    def need(self) -> Client:
        assert self.client is not None
        return self.client


def _text(result: Any) -> str:
    return str(result.content[0].text)


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(what)


async def op_echo(w: Worker) -> None:
    text = f"hello {w.name} {random.random()}"
    result = await w.need().call_tool("echo", {"text": text})
    _expect(not result.is_error and _text(result) == text, f"echo gave {result}")


async def op_work(w: Worker) -> None:
    seen: list[float] = []

    def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    logs_before = w.logs
    result = await w.need().call_tool("work", {"steps": 3}, progress=progress)
    _expect(_text(result) == "worked 3 steps", f"work gave {result}")
    _expect(seen == [1, 2, 3], f"progress {seen}, expected [1, 2, 3]")
    _expect(w.logs - logs_before == 3, f"{w.logs - logs_before} log messages, expected 3")


async def op_refuse(w: Worker) -> None:
    result = await w.need().call_tool("refuse", {"reason": w.name})
    _expect(bool(result.is_error) and _text(result) == f"refused: {w.name}", f"refuse gave {result}")


async def op_crash(w: Worker) -> None:
    result = await w.need().call_tool("crash", {})
    _expect(bool(result.is_error), f"crash gave {result}")
    _expect(CRASH_MARKER not in _text(result), "the crash's text reached the client")


async def op_register(w: Worker) -> None:
    before = w.elicitations
    result = await w.need().call_tool("register", {})
    _expect(_text(result) == f"registered {w.name}, aged 42", f"register gave {result}")
    _expect(w.elicitations - before == 2, f"{w.elicitations - before} elicitations, expected 2")


async def op_toggle(w: Worker) -> None:
    result = await w.need().call_tool("toggle", {})
    _expect(_text(result) in ("added", "removed"), f"toggle gave {result}")
    names = [tool.name for tool in await w.need().tools()]
    _expect("echo" in names, f"tools/list gave {names}")


async def op_touch(w: Worker) -> None:
    """Mark our resource updated; our listen must hear it. The first touch may come
    before the subscription is in place, so touch again a few times."""
    while not w.updates.empty():
        w.updates.get_nowait()
    for _ in range(UPDATE_TRIES):
        await w.need().call_tool("touch", {"uri": w.uri})
        try:
            uri = await asyncio.wait_for(w.updates.get(), UPDATE_WAIT)
        except TimeoutError:
            w.tally.note(f"{w.label}:touch_again")
            continue
        _expect(uri == w.uri, f"an update for {uri}, expected {w.uri}")
        return
    raise AssertionError(f"no resources/updated for {w.uri} after {UPDATE_TRIES} touches")


async def op_read(w: Worker) -> None:
    result = await w.need().read_resource(w.uri)
    content = result.contents[0]
    text = content.get("text") if isinstance(content, dict) else getattr(content, "text", None)
    _expect(text == f"item {w.name}", f"read gave {result}")


async def op_prompt(w: Worker) -> None:
    result = await w.need().get_prompt("review", {"code": "x = 1", "language": "rust"})
    _expect("Review this rust code" in result.messages[0].content.text, f"prompt gave {result}")  # type: ignore[union-attr]


async def op_complete(w: Worker) -> None:
    result = await w.need().complete({"type": "ref/resource", "uri": "soak://items/{id}"}, "id", "al")
    _expect(list(result.completion.values) == ["alpha", "alder"], f"complete gave {result}")


async def op_cancel(w: Worker) -> None:
    """Cancel a running call: the awaiting task is cancelled, the request on the wire too."""
    call = asyncio.create_task(w.need().call_tool("work", {"steps": 200, "delay": 0.05}))
    await asyncio.sleep(0.2)
    call.cancel()
    try:
        await call
    except asyncio.CancelledError:
        return
    raise AssertionError("a cancelled call completed")


async def op_unknown_tool(w: Worker) -> None:
    try:
        await w.need().call_tool("no-such-tool", {})
    except ProtocolError as exc:
        _expect(exc.code == -32602, f"an unknown tool gave code {exc.code}")
        return
    raise AssertionError("an unknown tool was called")


OPS: list[tuple[str, Callable[[Worker], Awaitable[None]]]] = [
    ("echo", op_echo),
    ("echo", op_echo),
    ("work", op_work),
    ("refuse", op_refuse),
    ("crash", op_crash),
    ("register", op_register),
    ("toggle", op_toggle),
    ("touch", op_touch),
    ("read", op_read),
    ("prompt", op_prompt),
    ("complete", op_complete),
    ("cancel", op_cancel),
    ("unknown_tool", op_unknown_tool),
]
