"""Middleware that most servers want: a log line per request, timings, rate limits.

Each is an ``async (call, call_next) -> result`` for ``ServerConfig(middleware=[...])``;
the first in the list is the outermost. A middleware runs around every request that
reaches a method (``initialize`` and ``subscriptions/listen`` included; see
``_dispatch.py``) and may read of the call:

- ``call.method``, ``call.params`` (the request's params, ``_meta`` included) and
  ``call.id`` (the JSON-RPC request id);
- ``call.principal``: what the transport's ``authenticate`` hook returned (None without
  authentication);
- ``call.client_info`` (the client's ``Implementation``, as it declares itself) and
  ``call.version`` (the protocol revision);
- ``call.session``: the handshake-era session (``.id``), None for a 2026-07-28 request.

``call_next(call)`` returns the result (a dict: an ``isError`` tool result and an
``input_required`` result are results) or raises (``ProtocolError`` becomes the
JSON-RPC error; anything else a generic internal error). ``Tracing`` (OpenTelemetry
spans; ``_telemetry.py``) imports OpenTelemetry only when one is made.

::

    server = Server("notes", config=ServerConfig(middleware=[
        RequestLog(),                       # outermost: sees refusals of those below
        RateLimit(rate=20, burst=40),
    ]))
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import RATE_LIMITED, ProtocolError, RateLimited
from ..transports.identity import principal_key
from ._telemetry import Tracing, target_of

if TYPE_CHECKING:
    from ._redis_limits import SharedBuckets

__all__ = ["RATE_LIMITED", "Outcome", "RateLimit", "RateLimited", "RequestLog", "Timing", "Tracing"]

Next = Callable[[Any], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class Outcome:
    """How one request ended, as ``Timing`` reports it and ``RequestLog`` writes it.

    ``status``: "ok"; "tool_error" (a result with ``isError``); "input_required" (the
    2026-07-28 multi round-trip asked the client for input); "error" (a JSON-RPC error,
    ``code`` its code; -32603 for an exception the server turns into one); "cancelled".
    ``seconds``: from the middleware's start to its end (for a listen stream, its life).
    """

    method: str
    target: str | None
    status: str
    code: int | None
    seconds: float


class _Observer:
    """The shared part of ``RequestLog`` and ``Timing``: run the rest of the chain, time
    it, classify the result or exception, call ``report`` with the ``Outcome``."""

    async def __call__(self, call: Any, call_next: Next) -> dict[str, Any] | None:
        started = time.perf_counter()
        status, code = "ok", None
        try:
            result = await call_next(call)
        except ProtocolError as exc:
            status, code = "error", exc.code
            raise
        except BaseException as exc:
            # CancelledError: the client cancelled or the server is stopping; anything
            # else the dispatcher answers as a generic internal error.
            status, code = ("error", -32603) if isinstance(exc, Exception) else ("cancelled", None)
            raise
        else:
            if isinstance(result, dict):
                if result.get("isError") is True:
                    status = "tool_error"
                elif result.get("resultType") == "input_required":
                    status = "input_required"
            return result
        finally:
            seconds = time.perf_counter() - started
            self.report(call, Outcome(call.method, target_of(call.method, call.params), status, code, seconds))

    def report(self, call: Any, outcome: Outcome) -> None:
        raise NotImplementedError


class Timing(_Observer):
    """Reports how long each request took: ``record(outcome)`` after every request,
    with its method, target, status and ``seconds`` (an ``Outcome``).

    Feed a histogram per method from it (Prometheus, StatsD, OpenTelemetry metrics);
    ``record`` runs on the event loop after the request, so it must return at once. An
    exception it raises is logged and the request's answer is unchanged."""

    def __init__(self, record: Callable[[Outcome], object]) -> None:
        self._record = record

    def report(self, call: Any, outcome: Outcome) -> None:
        try:
            self._record(outcome)
        except Exception:
            logging.getLogger("modelctx.server").exception("Timing: record() raised")


class RequestLog(_Observer):
    """One log line per request: method, target (tool, prompt, resource), request id,
    client name, outcome and duration, e.g. ``tools/call add id=3 client=cli -> ok in
    1.2 ms``; the same fields as structured ``extra`` on the record (``mcp_method``,
    ``mcp_target``, ``mcp_request_id``, ``mcp_client``, ``mcp_status``, ``mcp_code``,
    ``duration_ms``), for JSON log formatters.

    ``logger``: a ``logging.Logger`` or its name (default ``modelctx.requests``);
    ``level``: the level of successful requests (errors are logged at WARNING, a
    ``tool_error`` at ``level``). Argument values are never logged unless
    ``arguments=True``: they can hold secrets (tokens, personal data) and logs are kept
    and shipped where the request's data would not be. For the same reason a resource
    URI is logged without its query (a template's ``{?q}`` variables) unless asked."""

    def __init__(
        self,
        logger: logging.Logger | str = "modelctx.requests",
        *,
        level: int = logging.INFO,
        arguments: bool = False,
    ) -> None:
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.level = level
        self.arguments = arguments

    def report(self, call: Any, outcome: Outcome) -> None:
        level = logging.WARNING if outcome.status == "error" else self.level
        if not self.logger.isEnabledFor(level):
            return
        info = call.client_info
        client = info.get("name") if isinstance(info, dict) else None
        ms = outcome.seconds * 1000
        target = outcome.target
        if target is not None and not self.arguments and outcome.method.startswith("resources/"):
            # A template's query carries the reader's arguments (search://{?q}).
            target = target.split("?", 1)[0] + ("?..." if "?" in target else "")
        parts = [outcome.method]
        if target is not None:
            parts.append(target)
        parts.append(f"id={call.id!r}")
        if client is not None:
            parts.append(f"client={client}")
        extra: dict[str, Any] = {
            "mcp_method": outcome.method,
            "mcp_target": target,
            "mcp_request_id": call.id,
            "mcp_client": client,
            "mcp_status": outcome.status,
            "mcp_code": outcome.code,
            "duration_ms": round(ms, 3),
        }
        if self.arguments:
            shown = call.params.get("arguments")
            if shown is not None:
                text = json.dumps(shown, default=repr, ensure_ascii=False)
                parts.append(f"arguments={text}")
                extra["mcp_arguments"] = text
        status = outcome.status if outcome.code is None else f"{outcome.status} {outcome.code}"
        self.logger.log(level, "%s -> %s in %.1f ms", " ".join(parts), status, ms, extra=extra)


def _default_key(call: Any) -> Any:
    """Who a request counts against: the authenticated principal, by the one identity
    rule (``transports.identity.principal_key``: issuer, subject and client id, so two
    clients without a subject of one issuer are two buckets; a token naming neither is
    its own); else the handshake session; else the client's declared name (anyone can
    claim one: rate limit unauthenticated HTTP traffic by address in front of the
    server, e.g. nginx's ``limit_req``)."""
    principal = call.principal
    if principal is not None:
        return ("principal", principal_key(principal))
    if call.session is not None:
        return ("session", call.session.id)
    info = call.client_info
    name = info.get("name") if isinstance(info, dict) else None
    return ("client", name if isinstance(name, str) else None)


class RateLimit:
    """A token bucket per principal: ``rate`` requests a second on average, up to
    ``burst`` at once (default: ``rate`` rounded up, at least 1).

    Requests are counted against the authenticated principal, else the handshake-era
    session, else the client's declared name (``key``: a function of the call returning
    any hashable, to count otherwise). ``methods``: the methods counted (default: all);
    a listen stream counts once, when it opens. Past the burst a request is refused
    before the handler runs, with ``RateLimited`` (code ``RATE_LIMITED``, -31429), a
    message naming the limit and ``data.retryAfterMs``.

    Memory is bounded: at most ``max_keys`` buckets, the least recently used dropped
    first (a dropped key starts again with a full bucket, as an idle one would have).

    Scope: when the server has a ``redis_url`` (``--redis``), the buckets live in that
    Redis (``_redis_limits``: one atomic script, one round trip, at most ``timeout``
    seconds), so every worker and replica together allow ``rate``, not each of them;
    ``shared=False`` keeps them per process. ``name`` tells limits apart that share one
    Redis (default: from ``rate``, ``burst`` and ``methods``, the same in every replica);
    a ``key`` function must then return values whose ``repr`` is the same in every
    process (strings, numbers, tuples of them). When Redis does not answer, each process
    counts in its own buckets until it does (fail open to the per-process limit: a rate
    limit guards capacity, and an outage of Redis should not refuse every request), and
    logs it once; without Redis the buckets are per process.
    """

    def __init__(
        self,
        rate: float,
        burst: int | None = None,
        *,
        key: Callable[[Any], Any] | None = None,
        methods: Collection[str] | None = None,
        max_keys: int = 10_000,
        shared: bool = True,
        name: str | None = None,
        timeout: float = 0.25,
    ) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be a positive number of requests per second, not {rate!r}")
        self.rate = float(rate)
        self.burst = max(1, math.ceil(rate)) if burst is None else burst
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst!r}")
        if max_keys < 1:
            raise ValueError(f"max_keys must be at least 1, not {max_keys!r}")
        self._key = key or _default_key
        self._methods = frozenset(methods) if methods is not None else None
        self._max_keys = max_keys
        # key -> (tokens left, when they were counted); oldest use first.
        self._buckets: OrderedDict[Any, tuple[float, float]] = OrderedDict()
        self.shared = shared
        self.name = name or f"{self.rate:g}/{self.burst}/{','.join(sorted(self._methods or ()))}"
        self.timeout = timeout
        self._shared: dict[tuple[str, str], SharedBuckets] = {}  # by (redis_url, prefix)

    async def __call__(self, call: Any, call_next: Next) -> dict[str, Any] | None:
        if self._methods is None or call.method in self._methods:
            wait = await self._take(call)
            if wait is not None:
                retry_ms = max(1, math.ceil(wait * 1000))
                raise RateLimited(
                    f"Rate limit exceeded: at most {self.rate:g} requests per second "
                    f"(bursts of {self.burst}) for this client; retry after {retry_ms} ms",
                    {"retryAfterMs": retry_ms},
                )
        return await call_next(call)

    async def _take(self, call: Any) -> float | None:
        key = self._key(call)
        buckets = self._shared_buckets(call.server) if self.shared else None
        if buckets is not None:
            from ._redis_limits import BucketsUnavailable

            try:
                return await buckets.take(key)
            except BucketsUnavailable:
                pass  # counted here instead (class docstring)
        return self.take(key)

    def _shared_buckets(self, server: Any) -> SharedBuckets | None:
        """The Redis buckets of ``server``'s ``redis_url``, None without one."""
        url = getattr(getattr(server, "config", None), "redis_url", None)
        if url is None:
            return None
        prefix = f"{getattr(server, 'redis_prefix', 'modelctx:')}ratelimit:{self.name}:"
        buckets = self._shared.get((url, prefix))
        if buckets is None:
            from ._redis_limits import SharedBuckets

            buckets = self._shared[(url, prefix)] = SharedBuckets(url, prefix, self.rate, self.burst, timeout=self.timeout)
        return buckets

    def take(self, key: Any, now: float | None = None) -> float | None:
        """Take one token from ``key``'s bucket in this process: None when admitted,
        else the seconds until a token is there."""
        now = time.monotonic() if now is None else now
        buckets = self._buckets
        tokens, then = buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            tokens -= 1.0
            wait = None
        else:
            wait = (1.0 - tokens) / self.rate
        buckets[key] = (tokens, now)  # most recently used last
        while len(buckets) > self._max_keys:
            buckets.popitem(last=False)
        return wait
