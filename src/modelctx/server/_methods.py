"""The server's methods, one coroutine each: ``async (call) -> result``.

They are written once for both eras; the few differences ask ``call.features`` (protocol/versions.py). Results
are plain dicts; the dispatcher adds the modern era's ``resultType``, ``serverInfo``
and cache hints.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import logging
from typing import Any

import msgspec

from ..errors import InternalError, InvalidParams, ProtocolError, ResourceNotFound, ToolError
from ..protocol import meta as _meta
from ..protocol.versions import Feature
from ..transports.identity import principal_key
from ..transports.session import HandshakeSession
from ._apps import tool_filter
from ._bus import Event
from ._content import (
    EmbeddedResource,
    ToolResult,
    is_content,
    to_content_blocks,
    to_jsonable,
)
from ._context import Call, Context, InputRequired
from ._registry import call_handler
from ._tasks import declared, owns, require_declared, task_methods

__all__ = ["TABLE", "caller_identity", "input_required", "load_answers"]

log = logging.getLogger("modelctx.server")


# -- pagination (server/utilities/pagination.mdx) -----------------------------------------
def _encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode().rstrip("=")


def _decode_cursor(kind: str, cursor: Any) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        got_kind, offset = text.split(":")
        value = int(offset)
        if got_kind != kind or value < 0:
            raise ValueError
        return value
    except (ValueError, TypeError, UnicodeDecodeError):
        raise InvalidParams(f"Invalid params: cursor {cursor!r} is not one this server issued") from None


def _page(call: Call, kind: str, key: str) -> dict[str, Any]:
    server = call.server
    cursor = call.params.get("cursor")
    start = 0 if cursor is None else _decode_cursor(kind, cursor)
    # Without middleware nobody reads the items before they are sent: they go as the
    # registry's cached bytes, already shaped for the caller's revision.
    items, following = server.registry.page(
        kind,
        start,
        server.config.page_size,
        call.features,
        keep=tool_filter(server, call.capabilities) if kind == "tools" else None,
        encoded=not server.middleware,
    )
    result: dict[str, Any] = {key: items}
    if following is not None:
        result["nextCursor"] = _encode_cursor(kind, following)
    if Feature.CACHE_HINTS in call.features:
        hints = server.registry.cache_hints(kind)
        if hints:
            # The shortest freshness of any item; private if any item is private. One
            # scope for every page of a list, as caching.mdx asks.
            result["ttlMs"] = min([server.config.ttl_ms, *(h.ttl_ms for h in hints)])
            result["cacheScope"] = (
                "private"
                if server.config.cache_scope == "private" or any(h.scope == "private" for h in hints)
                else "public"
            )
    return result


async def tools_list(call: Call) -> dict[str, Any]:
    return _page(call, "tools", "tools")


async def resources_list(call: Call) -> dict[str, Any]:
    return _page(call, "resources", "resources")


async def templates_list(call: Call) -> dict[str, Any]:
    return _page(call, "templates", "resourceTemplates")


async def prompts_list(call: Call) -> dict[str, Any]:
    return _page(call, "prompts", "prompts")


async def discover(call: Call) -> dict[str, Any]:
    server = call.server
    result: dict[str, Any] = {
        "supportedVersions": list(server.config.versions),
        "capabilities": server.capabilities(),
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return result


# -- multi round-trip plumbing --------------------------------------------------------
def caller_identity(call: Call) -> str | None:
    """Who sent ``call`` by the one identity rule (transports.identity): its principal's
    typed issuer, subject and client id as JSON (a token naming no one: its digest), or
    None without one. A round of ``requestState`` is sealed for it; a relay keys what
    it keeps per client by it too (the gateway's "always" answers)."""
    return principal_key(call.principal)


def load_answers(call: Call) -> None:
    """Restore a retry's round: earlier answers, new answers, notices sent, carried state.

    A retry's ``inputResponses`` count only for the questions its sealed state names
    (the round the server asked); anything else is ignored (mrtr.mdx: servers SHOULD
    ignore unexpected entries): answers sent without a ``requestState``, answers to
    keys never asked, and answers that would replace one an earlier round sealed.
    """
    params = call.params
    if Feature.MRTR not in call.features:
        return
    responses = params.get("inputResponses")
    if responses is not None and not isinstance(responses, dict):
        raise InvalidParams("Invalid params: inputResponses must be an object")
    if "requestState" not in params:
        return
    # A round is bound to who asked: the one identity rule (transports.identity), so a
    # token without sub and one with sub "None" cannot open each other's state.
    sealed = call.server.sealer.open_round(
        params["requestState"], call.method, params, caller_identity(call)
    )
    answers = dict(sealed.answers)
    for key in sealed.asked:
        if responses is not None and key in responses and key not in answers:
            answers[key] = responses[key]
    call.answers = answers
    call.notices_sent = sealed.notices
    call.carried = sealed.carried


def input_required(call: Call, asked: InputRequired) -> dict[str, Any]:
    """The ``input_required`` result for the questions ``asked`` (none: "retry later"),
    with the round sealed into ``requestState`` (bound to the caller's principal)."""
    state = call.server.sealer.seal(
        call.method,
        call.params,
        call.answers,
        caller_identity(call),
        asked=tuple(asked.requests),
        notices=call.notices_so_far(),
        carried=call.carried,
    )
    result: dict[str, Any] = {"resultType": "input_required", "requestState": state}
    if asked.requests:  # none: "retry later", requestState alone (mrtr.mdx)
        result["inputRequests"] = asked.requests
    return result


# The handshake era has no input_required result: when a handler asks to be retried
# (Context.retry_later) the server replays it, with the pauses our Client uses, at most
# this many times; then the request fails.
_HANDSHAKE_RETRIES = 10


async def _run_handler(
    call: Call, fn: Any, is_async: bool, kwargs: dict[str, Any], inline: bool = False
) -> Any:
    """Run a handler; raises ``InputRequired`` in the 2026-07-28 era when it needs input
    (outside tasks: a task's questions wait on the task, and its retries are replayed)."""
    if Feature.MRTR in call.features and call.task is None:
        return await call_handler(fn, is_async, kwargs, inline)
    delay = 0.05
    for _ in range(_HANDSHAKE_RETRIES):
        try:
            return await call_handler(fn, is_async, kwargs, inline)
        except InputRequired:  # retry_later: ask() never raises it in this era
            call.notices_sent, call.notices, call.replaying = call.notices_so_far(), [], True
            call.asked = 0
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
    raise RuntimeError(
        f"the {call.method} handler asked to be retried {_HANDSHAKE_RETRIES} times; giving up"
    )


def _kwargs(signature: Any, arguments: Any, call: Call) -> dict[str, Any]:
    kwargs: dict[str, Any] = signature.bind(arguments)
    if signature.context_param is not None:
        kwargs[signature.context_param] = Context(call)
    return kwargs


# -- tools (server/tools.mdx) --------------------------------------------------------
async def tools_call(call: Call) -> dict[str, Any]:
    params = call.params
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams("Invalid params: tools/call needs name (a string)")
    tool = call.server.registry.tools.get(name)
    if tool is None:
        raise InvalidParams(f"Unknown tool: {name}")
    try:
        kwargs = _kwargs(tool.signature, params.get("arguments"), call)
    except InvalidParams as exc:
        # Input validation failures are tool execution errors, so the model can correct
        # itself (server/tools.mdx, Error Handling; see DIGEST §15.3 for the ambiguity).
        return {"content": [{"type": "text", "text": exc.message}], "isError": True}
    tasks = call.server.tasks if tool.task != "forbidden" else None
    if tasks is not None and not declared(call) and tool.task == "required":
        require_declared(call, f"the tool {name!r}")
    load_answers(call)
    try:
        if tasks is not None and declared(call):
            # At a limit an "optional" tool is answered in place, a plain call (the server
            # decides per request whether to answer with a task; tasks.md, Capability
            # Negotiation), and a "required" one is refused (TaskManager.call_as_task).
            return await tasks.call_as_task(
                call, tool.task, tool.task_start, lambda: _call_tool(call, tool, kwargs)
            )
        return await _call_tool(call, tool, kwargs)
    except InputRequired as asked:
        return input_required(call, asked)


async def _call_tool(call: Call, tool: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Run a tool's handler; its result, or a tool error result. ``ProtocolError`` and
    ``InputRequired`` pass through."""
    name = tool.name
    try:
        value = await _run_handler(call, tool.fn, tool.is_async, kwargs, tool.inline)
    except ToolError as exc:
        return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
    except ProtocolError:
        raise
    except Exception:
        log.exception("tool %r raised", name)
        return {
            "content": [{"type": "text", "text": f"Error executing tool {name}: internal error"}],
            "isError": True,
        }
    if type(value) is str and not tool.structured:  # the common case, first
        return {"content": [{"type": "text", "text": value}]}
    try:
        return _tool_result(tool, value)
    except Exception:
        # A value that has no content form is the tool's bug, not the client's: the
        # model reads which tool failed; the server log says what it returned.
        log.exception("tool %r returned a %s, which cannot be sent", name, type(value).__name__)
        text = f"Error executing tool {name}: it returned a {type(value).__name__}, which cannot be sent"
        return {"content": [{"type": "text", "text": text}], "isError": True}


def _tool_result(tool: Any, value: Any) -> dict[str, Any]:
    if isinstance(value, ToolResult):
        result: dict[str, Any] = {"content": to_content_blocks(value.content)}
        if value.structured is not msgspec.UNSET:
            result["structuredContent"] = to_jsonable(value.structured)
        if value.is_error:
            result["isError"] = True
        if value.meta:
            result["_meta"] = dict(value.meta)
        return result
    if tool.structured and _is_data(value):
        data = to_jsonable(value)
        if tool.wrap_result:
            data = {"result": data}
        return {"content": to_content_blocks(data), "structuredContent": data}
    return {"content": to_content_blocks(value)}


def _is_data(value: Any) -> bool:
    """Is ``value`` data for a tool that declared an outputSchema?

    Strings are data there (``-> list[str]`` promised ``structuredContent`` with a list
    of strings, and the spec says a tool with an outputSchema MUST send it); only
    content objects (``Image``, ``Text``, ...) make a value content."""
    if isinstance(value, str):
        return True
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return True
    return not is_content(value)


# -- resources (server/resources.mdx) --------------------------------------------------
async def resources_read(call: Call) -> dict[str, Any]:
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams("Invalid params: resources/read needs uri (a string)")
    registry = call.server.registry
    resource = registry.resources.get(uri)
    variables: dict[str, str | list[str]] = {}
    target: Any = resource
    if resource is None:
        for template in registry.templates.values():
            found = template.template.match(uri)
            if found is not None:
                target, variables = template, found
                break
        else:
            raise ResourceNotFound(uri)
    load_answers(call)
    kwargs = _kwargs(target.signature, variables, call) if variables or target.signature.param_names else {}
    if not kwargs and target.signature.context_param is not None:
        kwargs[target.signature.context_param] = Context(call)
    try:
        value = await _run_handler(call, target.fn, target.is_async, kwargs)
    except InputRequired as asked:
        return input_required(call, asked)
    except ToolError as exc:
        raise _handler_failed(exc) from None
    contents = _resource_contents(uri, value, target.mime_type)
    result: dict[str, Any] = {"contents": contents}
    if Feature.CACHE_HINTS in call.features and target.cache is not None:
        result["ttlMs"] = target.cache.ttl_ms
        result["cacheScope"] = target.cache.scope
    return result


def _handler_failed(exc: ToolError) -> InternalError:
    """A ``ToolError`` raised by a resource or prompt handler, as the client reads it.

    resources/read and prompts/get have no ``isError`` result, so it is a JSON-RPC
    error. Its code is -32603: the handler failed while the request itself was fine
    (resources.mdx: -32602 is for a resource that does not exist, which
    ``ResourceNotFound`` says; -32603 for errors inside the server). Unlike other
    exceptions its text is kept: the author raised it for the client to read.
    """
    return InternalError(str(exc) or "the handler failed")


def _resource_contents(uri: str, value: Any, mime: str | None) -> list[dict[str, Any]]:
    if isinstance(value, (list, tuple)):
        out: list[dict[str, Any]] = []
        for item in value:
            out.extend(_resource_contents(uri, item, mime))
        return out
    if isinstance(value, EmbeddedResource):
        return [value.contents()]
    if isinstance(value, dict) and ("text" in value or "blob" in value):
        return [{"uri": uri, **({"mimeType": mime} if mime else {}), **value}]
    entry: dict[str, Any] = {"uri": uri}
    if isinstance(value, (bytes, bytearray, memoryview)):
        entry["mimeType"] = mime or "application/octet-stream"
        entry["blob"] = base64.b64encode(bytes(value)).decode()
        return [entry]
    if mime:
        entry["mimeType"] = mime
    if isinstance(value, str):
        entry["text"] = value
    else:
        entry["text"] = to_content_blocks(value)[0]["text"] if value is not None else ""
        entry.setdefault("mimeType", "application/json")
    return [entry]


def _session_uri(call: Call) -> str:
    """The ``uri`` of a handshake-era resources/(un)subscribe request."""
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams(f"Invalid params: {call.method} needs uri (a string)")
    return uri


def _session_of(call: Call) -> HandshakeSession:
    assert call.session is not None  # the dispatcher routes these to sessions only
    return call.session


# What one session may subscribe to: a peer that subscribes to endless distinct (or
# endlessly long) URIs must not grow the server's memory without bound.
MAX_SUBSCRIPTIONS = 1000
MAX_SUBSCRIBED_URI = 8192


async def resources_subscribe(call: Call) -> dict[str, Any]:
    uri = _session_uri(call)
    subscriptions = _session_of(call).subscriptions
    if len(uri) > MAX_SUBSCRIBED_URI:
        raise InvalidParams(
            f"Invalid params: a subscribed uri may be at most {MAX_SUBSCRIBED_URI} characters"
        )
    if uri not in subscriptions and len(subscriptions) >= MAX_SUBSCRIPTIONS:
        raise InvalidParams(
            f"Invalid params: this session already has {MAX_SUBSCRIPTIONS} subscriptions; "
            "unsubscribe from some first"
        )
    subscriptions.add(uri)
    return {}


async def resources_unsubscribe(call: Call) -> dict[str, Any]:
    _session_of(call).subscriptions.discard(_session_uri(call))
    return {}


# -- prompts (server/prompts.mdx) --------------------------------------------------------
async def prompts_get(call: Call) -> dict[str, Any]:
    params = call.params
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams("Invalid params: prompts/get needs name (a string)")
    prompt = call.server.registry.prompts.get(name)
    if prompt is None:
        raise InvalidParams(f"Unknown prompt: {name}")
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise InvalidParams("Invalid params: prompt arguments must be an object of strings")
    kwargs = _kwargs(prompt.signature, arguments, call)
    load_answers(call)
    try:
        value = await _run_handler(call, prompt.fn, prompt.is_async, kwargs)
    except InputRequired as asked:
        return input_required(call, asked)
    except ToolError as exc:
        raise _handler_failed(exc) from None
    result: dict[str, Any] = {}
    description = prompt.definition.get("description")
    if description:
        result["description"] = description
    result["messages"] = _prompt_messages(value)
    return result


def _prompt_messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict) and "messages" in value:
        value = value["messages"]
    items = value if isinstance(value, (list, tuple)) else [value]
    messages = []
    for item in items:
        if isinstance(item, dict) and "role" in item:
            content = item.get("content")
            if not isinstance(content, dict):
                content = to_content_blocks(content)[0]
            messages.append({"role": item["role"], "content": content})
        elif isinstance(item, tuple) and len(item) == 2:
            role, content = item
            messages.append({"role": role, "content": to_content_blocks(content)[0]})
        else:
            for block in to_content_blocks(item):
                messages.append({"role": "user", "content": block})
    return messages


# -- completion (server/utilities/completion.mdx) -----------------------------------------
async def completion_complete(call: Call) -> dict[str, Any]:
    params = call.params
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise InvalidParams("Invalid params: completion/complete needs ref and argument objects")
    arg_name, value = argument.get("name"), argument.get("value")
    if not isinstance(arg_name, str) or not isinstance(value, str):
        raise InvalidParams("Invalid params: argument needs name and value (strings)")
    context = params.get("context") or {}
    context_args = context.get("arguments") if isinstance(context, dict) else None
    registry = call.server.registry
    completers: dict[str, Any] | None = None
    if ref.get("type") == "ref/prompt":
        name = ref.get("name")
        prompt = registry.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {ref.get('name')}")
        completers = prompt.complete
    elif ref.get("type") == "ref/resource":
        uri = ref.get("uri")
        template = registry.templates.get(uri) if isinstance(uri, str) else None
        if template is None and not (isinstance(uri, str) and uri in registry.resources):
            raise InvalidParams(f"Unknown resource or template: {uri}")
        completers = template.complete if template is not None else {}
    else:
        raise InvalidParams(f"Invalid params: unknown ref type {ref.get('type')!r}")
    completer = completers.get(arg_name)
    values: Any = []
    if completer is not None:
        values = await call_handler(
            completer, inspect.iscoroutinefunction(completer), {"value": value, "context": context_args or {}}
        )
    values = [str(v) for v in (values or [])]
    completion: dict[str, Any] = {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}
    return {"completion": completion}


# -- subscriptions (basic/patterns/subscriptions.mdx) -------------------------------------
async def subscriptions_listen(call: Call) -> dict[str, Any]:
    """A listen stream: acknowledged, then the events its filter asks for, until the
    client cancels it or the server ends it with this request's result.

    Streams open at once are bounded (``ServerConfig.max_listens_per_principal``, 64,
    and ``max_listens``, 10,000, see ``_bus.ListenSlots``): past either, an
    ``InternalError`` naming the limit, before anything is subscribed or sent.
    """
    agreed = _agreed_notifications(call)
    server = call.server
    sub_meta = {_meta.SUBSCRIPTION_ID: call.id}
    owner = principal_key(call.principal)
    reached = server.listens.take(owner)
    if reached is not None:  # refused before any work: nothing subscribed, nothing sent
        raise InternalError(
            f"Too many listen streams: {reached}; close one (cancel its subscriptions/listen "
            "request) before opening another"
        )
    try:
        subscription = server.bus.subscribe()  # registered before the ack: nothing is missed
    except BaseException:
        server.listens.give_back(owner)
        raise
    try:
        await call.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": agreed, "_meta": sub_meta},
            }
        )
        watched = set(agreed.get("resourceSubscriptions", ()))
        tasks = (set(agreed.get("taskIds", ())), call.principal)
        async for event in subscription:
            message = _listen_notification(event, agreed, watched, sub_meta, tasks)
            if message is not None:
                await call.send(message)
            elif event.kind == "closing":
                break
    finally:
        subscription.close()
        server.listens.give_back(owner)
    # A graceful end: the listen request's own result (subscriptions.mdx, Ending).
    return {"_meta": dict(sub_meta)}


def _agreed_notifications(call: Call) -> dict[str, Any]:
    """The part of a listen request's ``notifications`` filter this server can honour: the
    list changes of what it declares, resource subscriptions if it has resources, task ids
    (at most ``MAX_LISTENED_TASKS``) if it runs tasks. Raises ``InvalidParams`` for a
    filter that is not an object or ``taskIds`` that is not a list, and the missing
    capability error when the client did not declare tasks but listens to some."""
    wanted = call.params.get("notifications")
    if not isinstance(wanted, dict):
        raise InvalidParams("Invalid params: subscriptions/listen needs notifications (an object)")
    server = call.server
    caps = server.capabilities()
    agreed: dict[str, Any] = {}
    for flag, kind in (
        ("toolsListChanged", "tools"),
        ("promptsListChanged", "prompts"),
        ("resourcesListChanged", "resources"),
    ):
        if wanted.get(flag) is True and kind in caps:
            agreed[flag] = True
    uris = wanted.get("resourceSubscriptions")
    if isinstance(uris, list) and "resources" in caps:
        agreed["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
    task_ids = wanted.get("taskIds")
    if task_ids is not None:
        if not isinstance(task_ids, list):
            raise InvalidParams("Invalid params: notifications.taskIds must be a list of task ids")
        require_declared(call, "notifications.taskIds")
        if server.tasks is not None:
            agreed["taskIds"] = [t for t in task_ids if isinstance(t, str)][:MAX_LISTENED_TASKS]
    return agreed


_LIST_FLAGS = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}


def _listen_notification(
    event: Event,
    agreed: dict[str, Any],
    watched: set[str],
    sub_meta: dict[str, Any],
    tasks: tuple[set[str], Any] = (set(), None),
) -> dict[str, Any] | None:
    if event.kind == "task":
        task_ids, principal = tasks
        # Only the task's own principal hears of it (tasks.md, Auth binding).
        if event.uri in task_ids and owns(event.data["owner"], principal):
            return {
                "jsonrpc": "2.0",
                "method": "notifications/tasks",
                "params": {**event.data["task"], "_meta": sub_meta},
            }
        return None
    flag = _LIST_FLAGS.get(event.kind)
    if flag is not None and agreed.get(flag):
        return {
            "jsonrpc": "2.0",
            "method": f"notifications/{event.kind}/list_changed",
            "params": {"_meta": sub_meta},
        }
    if event.kind == "resource" and event.uri in watched:
        return {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": event.uri, "_meta": sub_meta},
        }
    return None


# Task ids one listen stream may follow.
MAX_LISTENED_TASKS = 1000


# -- handshake-era housekeeping ------------------------------------------------------------
async def ping(call: Call) -> dict[str, Any]:
    return {}


async def set_level(call: Call) -> dict[str, Any]:
    level = call.params.get("level")
    rank = _meta.LOG_LEVELS.get(level) if isinstance(level, str) else None
    if rank is None:
        raise InvalidParams(f"Invalid params: unknown log level {level!r}")
    assert call.session is not None
    call.session.log_rank = rank
    return {}


TABLE = {
    "server/discover": discover,
    "tools/list": tools_list,
    "tools/call": tools_call,
    "resources/list": resources_list,
    "resources/templates/list": templates_list,
    "resources/read": resources_read,
    "resources/subscribe": resources_subscribe,
    "resources/unsubscribe": resources_unsubscribe,
    "prompts/list": prompts_list,
    "prompts/get": prompts_get,
    "completion/complete": completion_complete,
    "subscriptions/listen": subscriptions_listen,
    "ping": ping,
    "logging/setLevel": set_level,
    **task_methods(),
}
