"""A scripted model API on 127.0.0.1: enough of Anthropic's Messages API and of OpenAI's
Chat Completions for the official SDKs to talk to it, as the real services answer.

    with ScriptedModelServer([Turn(calls=[("weather_lookup", {"key": "a"})]), Turn("done")]) as api:
        ...  # ANTHROPIC_BASE_URL=api.url, or OPENAI_BASE_URL=api.url + "/v1"

Each request (``POST /v1/messages`` or ``POST /v1/chat/completions``) takes the next
``Turn`` of the script, whatever the provider, and answers it streamed (server-sent events,
as the APIs send them, when the body asks ``"stream": true``) or as one JSON response.
Every request is recorded (path, headers, JSON body) so that tests can assert what the
model was sent. A request past the end of the script gets a 400 that says so (a 4xx,
so the SDKs do not retry it).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One scripted model turn: text, then tool calls ``(name, arguments)``.
    ``raw_arguments`` replaces the JSON text of the calls' arguments (to send bad JSON)."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    raw_arguments: str | None = None

    def arguments_json(self, arguments: dict[str, Any]) -> str:
        return self.raw_arguments if self.raw_arguments is not None else json.dumps(arguments)


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


def _pieces(text: str, size: int = 7) -> list[str]:
    """Text cut into small deltas, as a model streams it."""
    return [text[i : i + size] for i in range(0, len(text), size)]


class ScriptedModelServer:
    def __init__(self, turns: list[Turn], model: str = "scripted-model", models: list[str] | None = None) -> None:
        self.turns = list(turns)
        self.model = model
        self.models = models  # GET /v1/models lists these (None: a 404, as some endpoints answer)
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="model-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def next_turn(self, recorded: Recorded) -> Turn | None:
        with self._lock:
            self.requests.append(recorded)
            return self.turns.pop(0) if self.turns else None


def _handler_for(api: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/v1/models" or api.models is None:
                return self._json(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})
            # One shape both SDKs read: Anthropic's page fields and OpenAI's list fields.
            data = [{"id": m, "type": "model", "object": "model", "display_name": m, "owned_by": "scripted",
                     "created": 0, "created_at": "2026-01-01T00:00:00Z"} for m in api.models]
            first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
            return self._json(200, {"object": "list", "data": data, "has_more": False,
                                    "first_id": first, "last_id": last})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            if self.path not in ("/v1/messages", "/v1/chat/completions"):
                return self._json(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})
            turn = api.next_turn(Recorded(self.path, headers, body, time.time()))
            if turn is None:
                return self._json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                   "message": "the model script is exhausted"}})
            anthropic = self.path == "/v1/messages"
            if body.get("stream"):
                events = _anthropic_events(turn, api.model) if anthropic else _openai_chunks(turn, api.model)
                return self._sse(events)
            return self._json(200, _anthropic_message(turn, api.model) if anthropic else _openai_completion(turn, api.model))

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: Iterator[tuple[str | None, str]]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for name, data in events:
                frame = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
                raw = frame.encode()
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    return Handler


# -- Anthropic Messages API ---------------------------------------------------------------------

_USAGE = {"input_tokens": 10, "output_tokens": 5}


def _anthropic_blocks(turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    for i, (name, arguments) in enumerate(turn.calls):
        blocks.append({"type": "tool_use", "id": f"toolu_{i:02d}", "name": name, "input": arguments})
    return blocks


def _anthropic_message(turn: Turn, model: str) -> dict[str, Any]:
    return {
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": _anthropic_blocks(turn),
        "stop_reason": "tool_use" if turn.calls else "end_turn", "stop_sequence": None, "usage": _USAGE,
    }


def _anthropic_events(turn: Turn, model: str) -> Iterator[tuple[str | None, str]]:
    def event(payload: dict[str, Any]) -> tuple[str, str]:
        return payload["type"], json.dumps(payload)

    start = {**_anthropic_message(turn, model), "content": [], "stop_reason": None}
    yield event({"type": "message_start", "message": start})
    yield event({"type": "ping"})
    for index, block in enumerate(_anthropic_blocks(turn)):
        if block["type"] == "text":
            yield event({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            for piece in _pieces(block["text"]):
                yield event({"type": "content_block_delta", "index": index,
                             "delta": {"type": "text_delta", "text": piece}})
        else:
            yield event({"type": "content_block_start", "index": index,
                         "content_block": {**block, "input": {}}})
            for piece in ["", *_pieces(turn.arguments_json(block["input"]))]:
                yield event({"type": "content_block_delta", "index": index,
                             "delta": {"type": "input_json_delta", "partial_json": piece}})
        yield event({"type": "content_block_stop", "index": index})
    stop = "tool_use" if turn.calls else "end_turn"
    yield event({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                 "usage": {"output_tokens": 5}})
    yield event({"type": "message_stop"})


# -- OpenAI Chat Completions --------------------------------------------------------------------


def _openai_completion(turn: Turn, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": f"call_{i:02d}", "type": "function",
             "function": {"name": name, "arguments": turn.arguments_json(arguments)}}
            for i, (name, arguments) in enumerate(turn.calls)
        ]
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.calls else "stop",
                     "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _openai_chunks(turn: Turn, model: str) -> Iterator[tuple[str | None, str]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, str]:
        payload = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()),
                   "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return None, json.dumps(payload)

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(turn.text):
        yield chunk({"content": piece})
    for i, (name, arguments) in enumerate(turn.calls):
        yield chunk({"tool_calls": [{"index": i, "id": f"call_{i:02d}", "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        for piece in _pieces(turn.arguments_json(arguments)):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if turn.calls else "stop")
    yield None, "[DONE]"
