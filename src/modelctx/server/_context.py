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

Replays (modern era) are made safe in three ways. The sealed state names the questions
of its round, and a retry's answers count only for those (``_methods.load_answers``).
It also keeps a short fingerprint of every progress and log call the handler made so
far, in order. A replay re-makes those calls before it reaches the point where it
stopped; each one whose fingerprint matches the one at the same place is not sent
again. The first call that differs (say, progress of a job that moved on) ends the
skipping, and it and everything after it are sent. Calls that sent nothing (no
progress token, a level below the client's) keep their place too, since what is
compared is the calls, not the messages. ``retry_later`` ends a round with no
question, carrying the handler's own state to the next attempt; in the handshake era
the server replays the handler itself.

A handshake-era handler on Streamable HTTP may also end its SSE response early with
``close_sse_stream`` and let the client poll for the rest (2025-11-25, SEP-1699).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, overload

import msgspec

from ..errors import InsufficientScope, InvalidParams, InvalidRequest, MissingRequiredClientCapability
from ..protocol import Request
from ..protocol import meta as _meta
from ..protocol.versions import Feature, features, first_with
from ..transports.server_seam import ResponseStream, Send
from ._elicit_form import FormSchema

if TYPE_CHECKING:
    from ..transports.session import HandshakeSession
    from ._server import Server

__all__ = [
    "Call",
    "Context",
    "Elicit",
    "ElicitResult",
    "ElicitUrl",
    "InputRequest",
    "InputRequired",
    "ListRoots",
    "Sample",
]

class InputRequired(BaseException):
    """Unwinds a modern handler that needs input; the dispatcher answers input_required.

    ``requests`` is empty when the handler asked to be retried (``Context.retry_later``).
    A ``BaseException`` so that a handler's ``except Exception`` cannot swallow it.
    """

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        self.requests = requests


T = TypeVar("T")


@dataclass(frozen=True)
class ElicitResult(Generic[T]):
    """The user's answer: ``action`` is "accept", "decline" or "cancel".

    ``content`` is set on "accept" only, already checked against the requested schema:
    a dict for a dict schema or a TypedDict, an instance for a dataclass, msgspec
    Struct or pydantic model.
    """

    action: str
    content: T | None = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


class Caller:
    """Who sent a request and under which revision: what the dispatcher reads from
    ``_meta`` (2026-07-28) or from the peer's handshake session. Internal."""

    __slots__ = ("capabilities", "client_info", "features", "log_rank", "session", "version")

    def __init__(
        self,
        version: str,
        capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
        session: HandshakeSession | None,
    ) -> None:
        self.version = version
        self.features = features(version)
        self.capabilities = capabilities
        self.client_info = client_info
        self.session = session
        # The least severe log level the client wants (None: no logs); a session's
        # logging/setLevel, or the request's own _meta in 2026-07-28.
        self.log_rank: int | None = session.log_rank if session is not None else None


class Call:
    """Everything about one request that is being handled. Internal."""

    __slots__ = (
        "answers",
        "asked",
        "begin_task",
        "capabilities",
        "carried",
        "client_info",
        "connection",
        "id",
        "features",
        "log_rank",
        "method",
        "notices",
        "notices_sent",
        "params",
        "principal",
        "progress_token",
        "replaying",
        "send",
        "server",
        "session",
        "stream",
        "task",
        "version",
    )

    def __init__(
        self,
        server: Server,
        request: Request,
        caller: Caller,
        send: Send,
        principal: Any = None,
        stream: ResponseStream | None = None,
        connection: Any = None,
    ) -> None:
        self.server = server
        self.id = request.id
        self.method = request.method
        self.params = params = request.params
        self.version = caller.version
        self.features = caller.features
        self.capabilities = caller.capabilities
        self.client_info = caller.client_info
        self.session = caller.session
        self.send = send
        self.principal = principal
        self.stream = stream
        #: The duplex transport's connection of the peer (stdio, in-process), None on HTTP:
        #: who sent it, when neither a principal nor a handshake session says.
        self.connection = connection
        meta = params.get("_meta")
        self.progress_token = meta.get(_meta.PROGRESS_TOKEN) if isinstance(meta, dict) else None
        self.log_rank = caller.log_rank
        self.answers: dict[str, Any] = {}
        self.asked = 0  # questions asked with a default key, to number the next
        self.notices: list[str] = []  # fingerprints of this run's progress and log calls
        self.notices_sent: tuple[str, ...] = ()  # those of earlier rounds, sealed
        self.replaying = True  # no call of this run has differed from the sealed ones yet
        self.carried: Any = None  # the handler's state from its previous attempt
        self.task: Any = None  # a _tasks.TaskHandle once this call runs as a task
        self.begin_task: Any = None  # makes it one (task_start="handler"), else None

    def replayed_notice(self, *fields: Any) -> bool:
        """Record one progress or log call; True when an earlier round already made the
        same call at the same place (and this run has not diverged before it)."""
        place = len(self.notices)
        fingerprint = _fingerprint(fields)
        if place < _MAX_NOTICES:
            self.notices.append(fingerprint)
        sent = self.notices_sent
        if self.replaying and place < len(sent) and sent[place] == fingerprint:
            return True
        self.replaying = False
        return False

    def notices_so_far(self) -> tuple[str, ...]:
        """The fingerprints to seal: this run's, then any later ones an earlier round made."""
        return (*self.notices, *self.notices_sent[len(self.notices) :])[:_MAX_NOTICES]


# Fingerprints kept in requestState: 8 hex characters each, so 1,000 calls add about
# 11 KB; calls past that are not recorded, and a replay sends them again.
_MAX_NOTICES = 1000


def _fingerprint(fields: tuple[Any, ...]) -> str:
    try:
        data = msgspec.json.encode(fields)
    except (TypeError, msgspec.EncodeError):
        data = repr(fields).encode()
    return hashlib.blake2b(data, digest_size=4).hexdigest()


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
        """Who the transport authenticated (``None`` without authentication): with a
        ``modelctx.auth.ProtectedResource``, the ``AccessToken`` (subject, issuer,
        scopes, claims; never the token text, which must not be passed on)."""
        return self._call.principal

    @property
    def scopes(self) -> frozenset[str]:
        """The OAuth scopes the request's token grants (empty without one)."""
        scopes = getattr(self._call.principal, "scopes", None)
        return frozenset(scopes) if isinstance(scopes, (set, frozenset, list, tuple)) else frozenset()

    def require_scopes(self, *scopes: str) -> None:
        """Raise ``InsufficientScope`` unless the token grants every one of ``scopes``.

        Call it before doing anything: over Streamable HTTP the client gets 403 with a
        ``WWW-Authenticate`` challenge naming the scopes, re-authorizes (step-up) and
        retries. Without authentication there are no scopes, so it always raises
        (fails closed): a tool that needs a scope is not served unauthenticated.
        """
        missing = [scope for scope in scopes if scope not in self.scopes]
        if missing:
            raise InsufficientScope(scopes)

    @property
    def server(self) -> Any:
        return self._call.server

    @property
    def lifespan_context(self) -> Any:
        """What the server's lifespan yielded (``Server(name, lifespan=fn)``); ``None``
        for a server without a lifespan."""
        return self._call.server.lifespan_context

    # -- progress and logs -------------------------------------------------------
    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the request asked for progress.

        On a 2026-07-28 retry, progress that an earlier round of the same request
        already reported is not reported again (see ``ask``)."""
        token = self._call.progress_token
        if self._call.replayed_notice("progress", progress, total, message) or token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and Feature.PROGRESS_MESSAGE in self._call.features:
            params["message"] = message  # 2024-11-05 progress has no message
        await self._call.send(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        )

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` at ``level`` if the client asked for that level.

        Modern requests opt in with ``_meta`` logLevel; without it nothing is sent
        (server/utilities/logging.mdx). Handshake sessions use ``logging/setLevel``.
        On a 2026-07-28 retry, a message that an earlier round of the same request
        already logged is not sent again (see ``ask``).
        """
        rank = _meta.LOG_LEVELS.get(level)
        if rank is None:
            raise ValueError(f"unknown log level {level!r}; use one of {list(_meta.LOG_LEVELS)}")
        if self._call.replayed_notice("log", level, data, logger):
            return
        threshold = self._call.log_rank
        if threshold is None or rank < threshold:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        # Which request it is about, for a client relaying for several callers (stdio carries nothing else).
        params["_meta"] = {_meta.RELATED_REQUEST: self._call.id}
        await self._call.send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    async def debug(self, data: Any, logger: str | None = None) -> None:
        await self.log("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        await self.log("info", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        await self.log("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        await self.log("error", data, logger)

    # -- the response stream -------------------------------------------------------
    async def close_sse_stream(self, retry_ms: int = 1000) -> None:
        """End this request's SSE response now; the handler runs on (SEP-1699 polling).

        On a handshake-era Streamable HTTP session the response ends with a priming
        event (an event id, empty data and ``retry: retry_ms``). Later progress, logs,
        server requests and the result are kept, with event ids, until the client
        reconnects with GET and ``Last-Event-ID`` (2025-11-25 basic/transports.mdx,
        Resumability and Redelivery). Use it to free a connection during long work.

        Everywhere else (stdio, in-process, 2025-06-18 sessions, 2026-07-28 requests,
        which have no resumption) it does nothing, as it does when the stream is already closed or
        the session keeps as many resumable streams as it may.
        """
        if isinstance(retry_ms, bool) or not isinstance(retry_ms, int) or retry_ms < 0:
            raise ValueError(f"retry_ms must be a non-negative int (milliseconds), not {retry_ms!r}")
        stream = self._call.stream
        if stream is not None and Feature.SSE_POLLING in self._call.features:
            await stream.close(retry_ms)

    # -- asking the client -------------------------------------------------------
    async def ask(self, requests: dict[str, InputRequest]) -> dict[str, Any]:
        """Ask the client several things at once; returns the answers by key.

        ``requests`` maps keys of your choosing to ``Elicit``, ``ElicitUrl``, ``Sample``
        or ``ListRoots``. In the modern era they travel together in one
        ``input_required`` result; in the handshake era they are sent as concurrent
        server-to-client requests. The keys are visible to the client.

        On 2026-07-28 the handler runs again from the start for every round of
        questions: a handler that asks twice runs three times. What it did before the
        question runs again, so ask before side effects or make them idempotent.
        Progress and log notifications that an earlier round sent are not sent again;
        answers from earlier rounds are kept and cannot be replaced by the client.

        Raises ``InvalidParams`` (-32602 to the client) when an answer is malformed or
        an accepted form does not match its schema.
        """
        call = self._call
        for request in requests.values():
            request.check(call)
        if call.task is not None:  # a task: the questions wait on it for tasks/update
            keys = [k for k in requests if k not in call.answers]
            if keys:
                call.answers.update(await call.task.ask({k: requests[k].to_wire(call) for k in keys}))
            return {k: _parse(k, r, call.answers[k], "inputResponses") for k, r in requests.items()}
        if Feature.MRTR in call.features:
            missing = {k: r for k, r in requests.items() if k not in call.answers}
            if missing:
                raise InputRequired({k: r.to_wire(call) for k, r in missing.items()})
            return {k: _parse(k, r, call.answers[k], "inputResponses") for k, r in requests.items()}
        if call.session is None:
            raise RuntimeError("no connection to ask the client on")
        timeout = call.server.config.client_request_timeout
        session = call.session
        # Answers are kept for the run's replays (retry_later): the user is asked once.
        keys = [k for k in requests if k not in call.answers]
        answers = await asyncio.gather(
            *(session.request(requests[k].method, _related(requests[k], call), call.send, timeout) for k in keys)
        )
        call.answers.update(zip(keys, answers, strict=True))
        return {k: _parse(k, r, call.answers[k], "answer") for k, r in requests.items()}

    async def _ask_one(self, request: InputRequest, key: str | None) -> Any:
        call = self._call
        if key is None:
            key = f"{request.method.split('/')[0]}-{call.asked}"
            call.asked += 1
        return (await self.ask({key: request}))[key]

    @overload
    async def elicit(
        self, message: str, schema: dict[str, Any], *, key: str | None = None
    ) -> ElicitResult[dict[str, Any]]: ...

    @overload
    async def elicit(self, message: str, schema: type[T], *, key: str | None = None) -> ElicitResult[T]: ...

    async def elicit(self, message: str, schema: Any, *, key: str | None = None) -> ElicitResult[Any]:
        """Ask the user for structured input (form mode).

        ``schema`` is a JSON Schema object of flat primitive properties, or a type
        (dataclass, TypedDict, msgspec Struct, pydantic model) whose schema is derived;
        an accepted answer is validated against it, and comes back as that type (a
        dict for a TypedDict). A schema that is not flat primitives raises
        ``TypeError`` (or ``ValueError`` for a dict) naming the field, before anything
        is sent. ``key`` names the question on the wire (default: one made from the
        order of questions).

        On 2026-07-28 each question is a round trip and the handler runs again from
        the start with the answers so far: two ``elicit`` calls, three runs (see
        ``ask``). Earlier rounds' progress and logs are not re-sent.
        """
        answer: ElicitResult[Any] = await self._ask_one(Elicit(message, schema), key)
        return answer

    async def elicit_url(
        self, message: str, url: str, *, key: str | None = None, elicitation_id: str | None = None
    ) -> ElicitResult[None]:
        """Send the user to ``url`` for an interaction the client must not see (URL mode).

        After ``accept`` the handler decides from its own state whether the out-of-band
        step is done. ``elicitation_id`` is used only by the 2025-11-25 revision.
        """
        answer: ElicitResult[None] = await self._ask_one(ElicitUrl(message, url, elicitation_id), key)
        return answer

    async def sample(
        self,
        messages: list[dict[str, Any]] | str,
        max_tokens: int,
        *,
        key: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Ask the client's model for a completion (deprecated feature: sampling).

        ``messages`` is a list of SamplingMessage objects or one user text. Other
        options (``systemPrompt``, ``temperature``, ``modelPreferences``, ``tools`` …)
        are passed as they are. Returns the CreateMessageResult object.
        """
        answer: dict[str, Any] = await self._ask_one(Sample(messages, max_tokens, **options), key)
        return answer

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """Ask the client for its roots (deprecated feature: roots)."""
        roots: list[dict[str, Any]] = await self._ask_one(ListRoots(), key)
        return roots

    # -- tasks (io.modelcontextprotocol/tasks) ----------------------------------------
    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as, or None (not a task, or not yet one)."""
        task = self._call.task
        return None if task is None else str(task.task_id)

    async def start_task(self) -> None:
        """Go on as a task: the client gets the task at once, and this handler keeps
        running; its return value becomes the task's result.

        For a tool registered with ``task_start="handler"``: what the handler asks
        before this call is asked in ``input_required`` rounds of the request itself
        (tasks.md: resolve them before creating the task); what it asks after waits on
        the task (``input_required``, answered with ``tasks/update``). When the call
        cannot be a task (the client did not declare the extension, or the tool was not
        registered that way) this does nothing and the handler simply goes on.
        """
        call = self._call
        if call.task is None and call.begin_task is not None:
            await call.begin_task()

    # -- retrying ------------------------------------------------------------------------
    def retry_later(self, state: Any = None) -> NoReturn:
        """End this attempt and have the client send the request again; never returns.

        On 2026-07-28 the request ends with an ``input_required`` result that has a
        ``requestState`` and no ``inputRequests``; the client retries the same request
        (mrtr.mdx: it MAY do so at once) and the handler runs again from the start with
        ``state`` in ``ctx.retry_state``. Use it for work that is not done yet: start a
        job, carry its id, check it on the next attempt. ``state`` must be JSON-able;
        it is signed, not encrypted, so it must not hold secrets. Answers, progress and
        logs of earlier attempts are kept as for ``ask``.

        In the handshake era there is no such result: the server itself runs the
        handler again after a short pause, a limited number of times.
        """
        try:
            msgspec.json.encode(state)
        except (TypeError, msgspec.EncodeError) as exc:
            raise TypeError(f"retry_later(state=...) must be JSON-able: {exc}") from None
        self._call.carried = state
        raise InputRequired({})

    @property
    def retry_state(self) -> Any:
        """The ``state`` the previous attempt passed to ``retry_later`` (``None`` on the
        first attempt, or when it passed none)."""
        return self._call.carried

    # -- telling subscribers -------------------------------------------------------
    def resource_updated(self, uri: str) -> None:
        """Tell subscribers that the resource at ``uri`` changed."""
        self._call.server.resource_updated(uri)


class InputRequest:
    """Something a handler asks the client for: ``Elicit``, ``ElicitUrl``, ``Sample``
    or ``ListRoots``. Built by the caller, checked against the request's client
    capabilities, sent, and its answer parsed."""

    method = ""

    def check(self, call: Call) -> None:  # raise MissingRequiredClientCapability
        return None

    def to_wire(self, call: Call) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, answer: Any) -> Any:
        return answer


def _related(request: InputRequest, call: Call) -> dict[str, Any]:
    """The params of a handshake-era server-to-client request asked during ``call``, its
    ``_meta`` naming the call's request id (``_meta.RELATED_REQUEST``): over stdio nothing
    else tells the client which of its requests a question is about, so a client that
    relays for several callers (modelctx's gateway) can ask the right one."""
    params: dict[str, Any] = request.to_wire(call)["params"]
    return {**params, "_meta": {**(params.get("_meta") or {}), _meta.RELATED_REQUEST: call.id}}


def _parse(key: str, request: InputRequest, answer: Any, where: str) -> Any:
    """``request.parse(answer)``, its errors naming the question's key."""
    try:
        return request.parse(answer)
    except InvalidParams as exc:
        raise InvalidParams(f"Invalid {where} for {key!r} ({request.method}): {exc.message}") from None


def _require_elicitation(call: Call, mode: str) -> None:
    if Feature.ELICITATION not in call.features:
        raise InvalidRequest(
            f"This request needs elicitation, which protocol revision {call.version} does not have "
            f"(it came with {first_with(Feature.ELICITATION)}); the client must upgrade, or the "
            "handler must do without asking the user"
        )
    elicitation = call.capabilities.get("elicitation")
    if isinstance(elicitation, dict):
        # {} means form only (client/elicitation.mdx, Capabilities).
        modes = [m for m in ("form", "url") if m in elicitation] or ["form"]
        if mode in modes:
            return
    raise MissingRequiredClientCapability(
        f"This request needs elicitation in {mode} mode; declare "
        f'"elicitation": {{"{mode}": {{}}}} in clientCapabilities',
        {"elicitation": {mode: {}}},
    )


def _elicit_result(answer: Any, form: FormSchema | None = None) -> ElicitResult[Any]:
    if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
        raise InvalidParams(
            'an elicitation answer must be an ElicitResult with action "accept", "decline" or "cancel"'
        )
    action, content = answer["action"], answer.get("content")
    if content is not None and not isinstance(content, dict):
        raise InvalidParams("ElicitResult.content must be an object")
    if form is None or action != "accept":
        return ElicitResult(action, content)
    # An accepted form without content is checked as empty: it fails if fields are required.
    return ElicitResult(action, form.parse(content or {}))


class Elicit(InputRequest):
    """Ask the user to fill in a form (``schema``: a JSON Schema object or a type)."""

    method = "elicitation/create"

    def __init__(self, message: str, schema: Any) -> None:
        self.message = message
        self.form = FormSchema(schema)  # refuses a schema that is not flat primitives
        self.schema = self.form.wire

    def check(self, call: Call) -> None:
        _require_elicitation(call, "form")

    def to_wire(self, call: Call) -> dict[str, Any]:
        params: dict[str, Any] = {"message": self.message, "requestedSchema": self.schema}
        if Feature.URL_ELICITATION in call.features:
            params = {"mode": "form", **params}  # 2025-06-18 has no mode field
        return {"method": self.method, "params": params}

    def parse(self, answer: Any) -> ElicitResult[Any]:
        return _elicit_result(answer, self.form)


class ElicitUrl(InputRequest):
    """Send the user to a URL for an out-of-band interaction."""

    method = "elicitation/create"

    def __init__(self, message: str, url: str, elicitation_id: str | None = None) -> None:
        self.message = message
        self.url = url
        self.elicitation_id = elicitation_id

    def check(self, call: Call) -> None:
        _require_elicitation(call, "url")

    def to_wire(self, call: Call) -> dict[str, Any]:
        params: dict[str, Any] = {"mode": "url", "message": self.message, "url": self.url}
        if Feature.ELICITATION_ID in call.features:  # 2026-07-28 removed the id
            params["elicitationId"] = self.elicitation_id or uuid.uuid4().hex
        return {"method": self.method, "params": params}

    def parse(self, answer: Any) -> ElicitResult[Any]:
        return _elicit_result(answer)


class Sample(InputRequest):
    """Ask the client's model for a message (deprecated feature: sampling)."""

    method = "sampling/createMessage"

    def __init__(self, messages: list[dict[str, Any]] | str, max_tokens: int, **options: Any) -> None:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        self.params = {"messages": messages, "maxTokens": max_tokens, **options}

    def check(self, call: Call) -> None:
        sampling = call.capabilities.get("sampling")
        if not isinstance(sampling, dict):
            raise MissingRequiredClientCapability(
                "This request needs the sampling capability; declare it in clientCapabilities",
                {"sampling": {}},
            )
        if ("tools" in self.params or "toolChoice" in self.params) and "tools" not in sampling:
            raise MissingRequiredClientCapability(
                "Sampling with tools needs the sampling.tools capability",
                {"sampling": {"tools": {}}},
            )

    def to_wire(self, call: Call) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}

    def parse(self, answer: Any) -> dict[str, Any]:
        if not isinstance(answer, dict) or "content" not in answer or "role" not in answer:
            raise InvalidParams("a sampling answer must be a CreateMessageResult (role, content, model)")
        return answer


class ListRoots(InputRequest):
    """Ask the client for its roots (deprecated feature: roots)."""

    method = "roots/list"

    def check(self, call: Call) -> None:
        if not isinstance(call.capabilities.get("roots"), dict):
            raise MissingRequiredClientCapability(
                "This request needs the roots capability; declare it in clientCapabilities",
                {"roots": {}},
            )

    def to_wire(self, call: Call) -> dict[str, Any]:
        return {"method": self.method, "params": {}}

    def parse(self, answer: Any) -> list[dict[str, Any]]:
        roots = answer.get("roots") if isinstance(answer, dict) else None
        if not isinstance(roots, list):
            raise InvalidParams("a roots answer must have a roots list")
        return roots
