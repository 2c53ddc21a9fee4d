"""The handler context: what a tool, resource or prompt handler can do while it runs.

A handler that declares a parameter of type ``Context`` receives one. Through it the
handler reports progress, logs, and asks the client for input (elicitation, sampling,
roots). Asking works the same in both eras:

* modern (2026-07-28): the first time the handler asks, the request ends with an
  ``input_required`` result whose sealed ``requestState`` carries the answers so far;
  the client retries with ``inputResponses`` and the handler runs again from the
  start, this time receiving the answer. Handlers therefore ask *before* doing work
  with side effects, or make that work idempotent (basic/patterns/mrtr.mdx).
* handshake era: the question goes to the client as a JSON-RPC request on the same
  connection and the handler waits for the answer (with a deadline).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidParams, MissingRequiredClientCapability
from ..protocol import _meta
from ..protocol._versions import Feature, has

if TYPE_CHECKING:
    from ._session import HandshakeSession

__all__ = ["Context", "Call", "InputRequired", "ElicitResult"]

Send = Callable[[dict[str, Any]], Awaitable[None]]


class InputRequired(BaseException):
    """Unwinds a modern handler that needs input; the dispatcher answers input_required.

    A ``BaseException`` so that a handler's ``except Exception`` cannot swallow it.
    """

    def __init__(self, key: str, request: dict[str, Any]) -> None:
        self.key = key
        self.request = request


@dataclass(frozen=True)
class ElicitResult:
    """The user's answer: ``action`` is "accept", "decline" or "cancel"."""

    action: str
    content: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


class Call:
    """Everything about one request that is being handled. Internal."""

    __slots__ = (
        "server",
        "id",
        "method",
        "params",
        "version",
        "modern",
        "capabilities",
        "client_info",
        "progress_token",
        "log_rank",
        "send",
        "session",
        "answers",
        "asked",
        "principal",
    )

    def __init__(
        self,
        server: Any,
        id: str | int,
        method: str,
        params: dict[str, Any],
        version: str,
        modern: bool,
        capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
        send: Send,
        session: HandshakeSession | None = None,
        principal: Any = None,
    ) -> None:
        self.server = server
        self.id = id
        self.method = method
        self.params = params
        self.version = version
        self.modern = modern
        self.capabilities = capabilities
        self.client_info = client_info
        self.send = send
        self.session = session
        self.principal = principal
        meta = params.get("_meta")
        self.progress_token = meta.get(_meta.PROGRESS_TOKEN) if isinstance(meta, dict) else None
        self.log_rank: int | None = None
        self.answers: dict[str, Any] = {}
        self.asked = 0


_FORM_ONLY = ("form",)


class Context:
    """What a handler can do while it runs. One per request; do not keep it."""

    __slots__ = ("_call",)

    def __init__(self, call: Call) -> None:
        self._call = call

    # -- about the request -------------------------------------------------------
    @property
    def request_id(self) -> str | int:
        return self._call.id

    @property
    def method(self) -> str:
        return self._call.method

    @property
    def protocol_version(self) -> str:
        return self._call.version

    @property
    def client_info(self) -> dict[str, Any] | None:
        """The client's self-reported name and version; never a security decision."""
        return self._call.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._call.capabilities

    @property
    def principal(self) -> Any:
        """Who the transport authenticated (``None`` without authentication)."""
        return self._call.principal

    @property
    def server(self) -> Any:
        return self._call.server

    # -- progress and logs -------------------------------------------------------
    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the request asked for progress."""
        token = self._call.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._call.send(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        )

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` at ``level`` if the client asked for that level.

        Modern requests opt in with ``_meta`` logLevel; without it nothing is sent
        (server/utilities/logging.mdx). Handshake sessions use ``logging/setLevel``.
        """
        rank = _meta.LOG_LEVELS.get(level)
        if rank is None:
            raise ValueError(f"unknown log level {level!r}; use one of {list(_meta.LOG_LEVELS)}")
        threshold = self._call.log_rank
        if threshold is None or rank < threshold:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._call.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    async def debug(self, data: Any, logger: str | None = None) -> None:
        await self.log("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        await self.log("info", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        await self.log("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        await self.log("error", data, logger)

    # -- asking the client -------------------------------------------------------
    async def elicit(self, message: str, schema: Any) -> ElicitResult:
        """Ask the user for structured input (form mode).

        ``schema`` is a JSON Schema object of flat primitive properties, or a type
        (dataclass, TypedDict, msgspec Struct) whose schema is derived.
        """
        if not isinstance(schema, dict):
            from ._signature import type_schema

            schema = type_schema(schema)
        schema = {k: v for k, v in schema.items() if k not in ("title", "$defs")}
        self._require_elicitation("form")
        answer = await self._ask(
            "elicitation/create",
            # 2025-06-18 has no mode field; later revisions name it.
            {"mode": "form", "message": message, "requestedSchema": schema}
            if has(self._call.version, Feature.URL_ELICITATION)
            else {"message": message, "requestedSchema": schema},
        )
        return _elicit_result(answer)

    async def elicit_url(self, message: str, url: str, elicitation_id: str | None = None) -> ElicitResult:
        """Send the user to ``url`` for an interaction the client must not see (URL mode).

        After ``accept`` the handler decides from its own state whether the out-of-band
        step is done. ``elicitation_id`` is used only by the 2025-11-25 revision.
        """
        self._require_elicitation("url")
        params: dict[str, Any] = {"mode": "url", "message": message, "url": url}
        if not self._call.modern:
            import uuid

            params["elicitationId"] = elicitation_id or uuid.uuid4().hex
        return _elicit_result(await self._ask("elicitation/create", params))

    async def sample(
        self,
        messages: list[dict[str, Any]] | str,
        max_tokens: int,
        **options: Any,
    ) -> dict[str, Any]:
        """Ask the client's model for a completion (deprecated feature: sampling).

        ``messages`` is a list of SamplingMessage objects or one user text. Other
        options (``systemPrompt``, ``temperature``, ``modelPreferences``, ``tools`` …)
        are passed as they are. Returns the CreateMessageResult object.
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        sampling = self._call.capabilities.get("sampling")
        if not isinstance(sampling, dict):
            raise MissingRequiredClientCapability(
                "This request needs the sampling capability; declare it in clientCapabilities",
                {"sampling": {}},
            )
        if ("tools" in options or "toolChoice" in options) and "tools" not in sampling:
            raise MissingRequiredClientCapability(
                "Sampling with tools needs the sampling.tools capability",
                {"sampling": {"tools": {}}},
            )
        params = {"messages": messages, "maxTokens": max_tokens, **options}
        answer = await self._ask("sampling/createMessage", params)
        if not isinstance(answer, dict):
            raise InvalidParams("The sampling answer is not a CreateMessageResult object")
        return answer

    async def list_roots(self) -> list[dict[str, Any]]:
        """Ask the client for its roots (deprecated feature: roots)."""
        if not isinstance(self._call.capabilities.get("roots"), dict):
            raise MissingRequiredClientCapability(
                "This request needs the roots capability; declare it in clientCapabilities",
                {"roots": {}},
            )
        answer = await self._ask("roots/list", {})
        roots = answer.get("roots") if isinstance(answer, dict) else None
        if not isinstance(roots, list):
            raise InvalidParams("The roots answer has no roots list")
        return roots

    def _require_elicitation(self, mode: str) -> None:
        elicitation = self._call.capabilities.get("elicitation")
        if isinstance(elicitation, dict):
            # {} means form only (client/elicitation.mdx, Capabilities).
            modes = [m for m in ("form", "url") if m in elicitation] or list(_FORM_ONLY)
            if mode in modes:
                return
        raise MissingRequiredClientCapability(
            f"This request needs elicitation in {mode} mode; declare "
            f'"elicitation": {{"{mode}": {{}}}} in clientCapabilities',
            {"elicitation": {mode: {}}},
        )

    async def _ask(self, method: str, params: dict[str, Any]) -> Any:
        call = self._call
        if call.modern:
            key = f"{method.split('/')[0]}-{call.asked}"
            call.asked += 1
            if key in call.answers:
                return call.answers[key]
            raise InputRequired(key, {"method": method, "params": params})
        if call.session is None:
            raise RuntimeError("no connection to ask the client on")
        return await call.session.request(method, params, call.send, call.server.config.client_request_timeout)

    # -- telling subscribers -------------------------------------------------------
    def resource_updated(self, uri: str) -> None:
        """Tell subscribers that the resource at ``uri`` changed."""
        self._call.server.resource_updated(uri)


def _elicit_result(answer: Any) -> ElicitResult:
    if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
        raise InvalidParams(
            'The elicitation answer must be an ElicitResult with action "accept", "decline" or "cancel"'
        )
    content = answer.get("content")
    return ElicitResult(answer["action"], content if isinstance(content, dict) else None)

