"""Answering what a server asks (elicitation, sampling, roots) with the client's handlers.

The same answers serve both eras: a handshake-era server's own requests, and the
``inputRequests`` of a 2026-07-28 ``input_required`` result or of a task
(``answer_all``). Each returns the JSON object the protocol carries; a question with no
handler is ``MethodNotFound``.

A call may bring handlers of its own (``Client.call_tool(..., handlers=)``): what the
server asks about that call is answered by them (``for_call``), each handler the call
leaves unset by the client's; the server's log messages about the call reach its
``notification``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import msgspec

from ..errors import LocalError, MalformedResponse, MethodNotFound
from ._options import ClientHandlers, Elicitation

__all__ = ["MAX_INPUT_REQUESTS", "answer_all", "answer_input", "for_call"]

#: Input requests (elicitation, sampling, roots) one input_required round may hold.
MAX_INPUT_REQUESTS = 64


def for_call(call: ClientHandlers | None, client: ClientHandlers) -> ClientHandlers | None:
    """The handlers that answer what the server asks about one call: ``call``'s, each
    one it leaves unset taken from ``client``'s; None when the call brings none. What the
    client declares stays what its own handlers declare (a server that keeps to it never
    asks a call for more; the call's ``elicitation_modes`` are not used). The call's
    ``notification`` (only its own) hears the log messages about the call; the client's
    still hears every notification."""
    if call is None:
        return None
    return dataclasses.replace(
        client,
        elicitation=call.elicitation or client.elicitation,
        sampling=call.sampling or client.sampling,
        roots=call.roots or client.roots,
        notification=call.notification,
    )


async def answer_input(handlers: ClientHandlers, method: str, params: dict[str, Any], server: str) -> dict[str, Any]:
    """The answer of ``handlers`` to ``method`` asked by ``server`` (its name, for the user)."""
    if method == "elicitation/create" and handlers.elicitation is not None:
        mode = params.get("mode", "form")
        schema = params.get("requestedSchema")
        answer = await handlers.elicitation(
            Elicitation(mode, params.get("message", ""), schema, params.get("url"), server)
        )
        return _elicit_answer(answer, schema)
    if method == "sampling/createMessage" and handlers.sampling is not None:
        return _plain(await handlers.sampling(params), "sampling")
    if method == "roots/list" and handlers.roots is not None:
        roots = await handlers.roots()
        return {"roots": [_root(r) for r in roots]}
    raise MethodNotFound(f"Method not found: {method} (this client has no handler for it)")


async def answer_all(handlers: ClientHandlers, requests: dict[str, Any], server: str) -> dict[str, Any]:
    """The answers to one round of ``inputRequests``, by key, asked at once; raises
    ``MalformedResponse`` for more than ``MAX_INPUT_REQUESTS`` or one that is no request."""
    if len(requests) > MAX_INPUT_REQUESTS:
        # Each input request may be a dialog for the user: a server asking for
        # thousands at once is broken or hostile, and none of them is shown.
        raise MalformedResponse(
            f"{server} asked for {len(requests)} inputs in one round; this "
            f"client answers at most {MAX_INPUT_REQUESTS} a round"
        )
    keys = list(requests)

    async def one(key: str) -> dict[str, Any]:
        request = requests[key]
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise MalformedResponse(f"{server}: inputRequests[{key!r}] is not a request object")
        return await answer_input(handlers, request["method"], request.get("params") or {}, server)

    answers = await asyncio.gather(*(one(key) for key in keys))
    return dict(zip(keys, answers, strict=True))


def _elicit_answer(answer: object, schema: object) -> dict[str, Any]:
    """An ElicitResult dict; accepted forms get the schema's defaults for omitted fields
    (client/elicitation.mdx: clients SHOULD pre-fill defaults)."""
    plain = _plain(answer, "elicitation")
    if plain.get("action") not in ("accept", "decline", "cancel"):
        raise LocalError(
            'an elicitation handler must return {"action": "accept"|"decline"|"cancel", ...}, '
            f"not {answer!r}"
        )
    if plain["action"] == "accept" and isinstance(schema, dict):
        content = dict(plain.get("content") or {})
        for name, prop in (schema.get("properties") or {}).items():
            if name not in content and isinstance(prop, dict) and "default" in prop:
                content[name] = prop["default"]
        plain = {**plain, "content": content}
    return plain


def _plain(value: object, handler: str) -> dict[str, Any]:
    """What a handler returned, as the JSON object the protocol carries."""
    if isinstance(value, dict):
        return value
    if hasattr(value, "action") and hasattr(value, "content"):  # the server package's ElicitResult
        out: dict[str, Any] = {"action": value.action}
        if value.content is not None:
            out["content"] = value.content
        return out
    try:
        plain = msgspec.to_builtins(value)
    except TypeError:
        plain = None
    if not isinstance(plain, dict):
        raise LocalError(
            f"the {handler} handler returned {value!r:.80} ({type(value).__name__}); it must return "
            "a JSON object (a dict) for the result the server asked for"
        )
    return plain


def _root(root: object) -> dict[str, Any]:
    if isinstance(root, str):
        return {"uri": root}
    return _plain(root, "roots")
