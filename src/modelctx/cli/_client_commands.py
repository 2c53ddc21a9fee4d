"""The client commands: one MCP method each, against ``--url`` or ``--stdio``.

``discover``, ``tools``, ``call``, ``resources``, ``read``, ``prompts``, ``prompt``,
``complete``, ``listen``. Each checks its own arguments before connecting (a mistake
is status 2 and nothing is started), then runs through ``run_client`` (``_target.py``),
which owns connecting, the spinner and the exit statuses.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

import click
import msgspec

from ._arguments import string_arguments, tool_arguments
from ._exit import ExitCode
from ._screen import Screen
from ._show import show_content, show_discovery, show_messages, show_prompts, show_read, show_resources, show_tools
from ._target import ClientTarget, client_options, run_client

if TYPE_CHECKING:
    from ..client import Client

__all__ = [
    "call_command",
    "complete_command",
    "discover_command",
    "listen_command",
    "prompt_command",
    "prompts_command",
    "read_command",
    "resources_command",
    "tools_command",
]


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


@click.command("discover")
@client_options
def discover_command(**options: Any) -> int:
    """Show the server's name, protocol era and versions, capabilities and instructions.

    With --json: {"era", "protocolVersion", "supportedVersions", "serverInfo",
    "capabilities", "instructions"}, the same for both eras (a handshake-era server
    tells them in its initialize result, a 2026-07-28 one in server/discover).
    """
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        if client.modern:
            await client.discover()  # a pinned --mode VERSION has not asked yet
        found = {
            "era": "2026-07-28" if client.modern else "handshake",
            "protocolVersion": client.protocol_version,
            "supportedVersions": client.supported_versions,
            "serverInfo": client.server_info,
            "capabilities": client.raw_server_capabilities,
            "instructions": client.instructions,
        }
        if screen.as_json:
            screen.json(found)
        else:
            show_discovery(screen, {**found, "target": target.shown})
        return ExitCode.OK

    return run_client(target, work)


@click.command("tools")
@client_options
def tools_command(**options: Any) -> int:
    """List the server's tools (every page). --json: {"tools": [Tool, ...]}."""
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        tools = await client.tools()
        if screen.as_json:
            screen.json({"tools": tools})
        else:
            show_tools(screen, _plain(tools))
        return ExitCode.OK

    return run_client(target, work)


@click.command("call")
@click.argument("tool")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--args", "args_json", metavar="JSON|@FILE|-",
              help="the arguments as a JSON object, a file holding one (@FILE), or - for stdin")
@client_options
def call_command(tool: str, pairs: tuple[str, ...], args_json: str | None, **options: Any) -> int:
    """Call TOOL with arguments written KEY=VALUE.

    A value is JSON when it parses as JSON (n=3, ok=true, tags='["a"]'), else a
    string (city=Oslo); write text='"3"' for the string "3". KEY=VALUE pairs are
    laid over --args. Prints the result's content (--json: the CallToolResult);
    exits 1 when the tool reports isError. A tool that runs as a task is waited for.
    A server that needs you to open a URL first (error -32042) has it shown.
    """
    arguments = tool_arguments(pairs, args_json)
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        def progress(done: float, total: float | None, message: str | None) -> None:
            of = f"{done:g}/{total:g}" if total else f"{done:g}"
            screen.progress(f"{tool}: {message or 'working'} ({of})")

        with screen.status(f"calling {tool}"):
            result = await client.call_tool(tool, arguments, progress=progress)
        plain = _plain(result)
        if screen.as_json:
            screen.json(plain)
        else:
            show_content(screen, plain.get("content") or [], plain.get("structuredContent"))
        return ExitCode.TOOL_ERROR if plain.get("isError") else ExitCode.OK

    # The tasks extension declared: a tool that must run as a task is called as one and
    # polled to its result, like any other call.
    return run_client(target, work, tasks=True)


@click.command("resources")
@client_options
def resources_command(**options: Any) -> int:
    """List the server's resources and resource templates.

    --json: {"resources": [...], "resourceTemplates": [...]}."""
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        resources = await client.resources()
        templates = await client.resource_templates()
        if screen.as_json:
            screen.json({"resources": resources, "resourceTemplates": templates})
        else:
            show_resources(screen, _plain(resources), _plain(templates))
        return ExitCode.OK

    return run_client(target, work)


@click.command("read")
@click.argument("uri")
@client_options
def read_command(uri: str, **options: Any) -> int:
    """Read the resource at URI: its text (--json: the ReadResourceResult, blobs in base64)."""
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        result = await client.read_resource(uri)
        if screen.as_json:
            screen.json(result)
        else:
            show_read(screen, _plain(result.contents))
        return ExitCode.OK

    return run_client(target, work)


@click.command("prompts")
@client_options
def prompts_command(**options: Any) -> int:
    """List the server's prompts. --json: {"prompts": [Prompt, ...]}."""
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        prompts = await client.prompts()
        if screen.as_json:
            screen.json({"prompts": prompts})
        else:
            show_prompts(screen, _plain(prompts))
        return ExitCode.OK

    return run_client(target, work)


@click.command("prompt")
@click.argument("name")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@client_options
def prompt_command(name: str, pairs: tuple[str, ...], **options: Any) -> int:
    """Get prompt NAME with arguments KEY=VALUE (strings, as prompts take them).

    Prints each message as "role: text" (--json: the GetPromptResult)."""
    arguments = string_arguments(pairs)
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        result = await client.get_prompt(name, arguments)
        if screen.as_json:
            screen.json(result)
        else:
            show_messages(screen, _plain(result.messages))
        return ExitCode.OK

    return run_client(target, work)


@click.command("complete")
@click.argument("argument")
@click.argument("value", default="")
@click.option("--prompt", "prompt_name", metavar="NAME", help="complete an argument of this prompt")
@click.option("--template", metavar="URI_TEMPLATE", help="complete a variable of this resource template")
@click.option("--context", "context_pairs", multiple=True, metavar="K=V",
              help="an argument already chosen (repeatable)")
@client_options
def complete_command(
    argument: str,
    value: str,
    prompt_name: str | None,
    template: str | None,
    context_pairs: tuple[str, ...],
    **options: Any,
) -> int:
    """Complete ARGUMENT of a prompt (--prompt NAME) or a resource template
    (--template URI_TEMPLATE) from what is typed so far (VALUE, default empty).

    Prints one candidate a line (--json: the CompleteResult)."""
    if (prompt_name is None) == (template is None):
        raise click.UsageError("name what to complete: --prompt NAME or --template URI_TEMPLATE (one of them)")
    ref = {"type": "ref/prompt", "name": prompt_name} if prompt_name else {"type": "ref/resource", "uri": template}
    context = string_arguments(context_pairs)
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        result = await client.complete(ref, argument, value, context or None)
        if screen.as_json:
            screen.json(result)
            return ExitCode.OK
        for candidate in result.completion.values:
            screen.text(candidate)
        total = result.completion.total
        if isinstance(total, int) and total > len(result.completion.values):
            screen.note(f"{total - len(result.completion.values)} more not shown")
        return ExitCode.OK

    return run_client(target, work)


@click.command("listen")
@click.option("--tools", "tools", is_flag=True, help="tools list_changed")
@click.option("--prompts", "prompts", is_flag=True, help="prompts list_changed")
@click.option("--resources", "resources", is_flag=True, help="resources list_changed")
@click.option("--uri", "uris", multiple=True, metavar="URI", help="updates of this resource (repeatable)")
@click.option("--count", type=click.IntRange(min=1), help="stop after this many events")
@client_options
def listen_command(
    tools: bool, prompts: bool, resources: bool, uris: tuple[str, ...], count: int | None, **options: Any
) -> int:
    """Print the server's change events until Ctrl-C, --count N events or --timeout SECONDS.

    Without --tools/--prompts/--resources/--uri, every list's changes. One event a
    line; with --json a JSON object a line: {"event": "list_changed", "kind": "tools"}
    or {"event": "resource_updated", "uri": ...}. Stopping at --timeout is success,
    unless --count events were asked for and fewer came (status 5). A line on stderr
    says when the server has confirmed the stream.
    """
    if not (tools or prompts or resources or uris):
        tools = prompts = resources = True
    target = ClientTarget.from_options(options)

    async def work(client: Client, screen: Screen) -> int:
        return await _listen(client, screen, target, (tools, prompts, resources), uris, count)

    return run_client(target, work)


async def _listen(
    client: Client,
    screen: Screen,
    target: ClientTarget,
    lists: tuple[bool, bool, bool],
    uris: tuple[str, ...],
    count: int | None,
) -> int:
    """``listen``: show each event of the tools, prompts and resources ``lists`` asked for
    and of ``uris`` until ``count`` of them, the timeout, or the stream's end."""
    tools, prompts, resources = lists
    heard = 0

    async def hear() -> None:
        nonlocal heard
        events = cast(
            AsyncGenerator[Any, None],
            client.listen(
                tools=tools,
                prompts=prompts,
                resources=resources,
                resource_uris=uris,
                on_open=lambda: screen.note("listening; Ctrl-C to stop"),
            ),
        )
        async with contextlib.aclosing(events):
            async for event in events:
                _show_event(screen, event)
                heard += 1
                if count is not None and heard >= count:
                    return
        if client.session.closed_error is not None:
            raise client.session.closed_error

    if not target.timeout_given:
        await hear()
        return ExitCode.OK
    try:
        async with asyncio.timeout(target.timeout):
            await hear()
    except TimeoutError:
        if count is not None and heard < count:
            screen.error(f"timed out after {target.timeout:g} s with {heard} of {count} events")
            return ExitCode.TIMEOUT
    return ExitCode.OK


def _show_event(screen: Screen, event: Any) -> None:
    from ..client import ListChanged

    if isinstance(event, ListChanged):
        if screen.as_json:
            screen.json_line({"event": "list_changed", "kind": event.kind})
        else:
            screen.text(f"{event.kind} list changed")
    elif screen.as_json:
        screen.json_line({"event": "resource_updated", "uri": event.uri})
    else:
        screen.text(f"resource updated: {event.uri}")
