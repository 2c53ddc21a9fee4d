"""The server the soak run drives: every kind of handler, built on modelctx's public API.

Served as a real subprocess, over stdio (``python soak/server.py``) and over Streamable
HTTP (``modelctx serve soak/server.py --http``). Each handler exists for one kind of
traffic in ``soak/run.py``: a plain result, progress and logs, a failure on purpose
(``ToolError``) and by accident (a ``RuntimeError`` whose text carries ``CRASH_MARKER``,
so the run can tell its traceback in stderr from any other), elicitation in two rounds,
a tool that adds or removes a tool (``list_changed``), a resource a tool marks updated,
a prompt and completions.

``SOAK_STDERR``: when set, this process's stderr goes to that file (appended), so the
run can read the tracebacks of stdio servers that a ``Client`` started.
"""

from __future__ import annotations

import asyncio
import os

from modelctx import Context, Server, ToolError

#: The text of the deliberate crash: its traceback in a server's stderr is expected.
CRASH_MARKER = "soak: deliberate crash"
#: The tool that ``toggle`` adds and removes.
EPHEMERAL = "ephemeral"
ITEM_IDS = ("alpha", "alder", "beta", "birch", "gamma")
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
AGE_FORM = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}, "required": ["age"]}

if stderr_path := os.environ.get("SOAK_STDERR"):
    _fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(_fd, 2)
    os.close(_fd)

server = Server("soak", version="1.0.0", instructions="The soak run's server.")


@server.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool
async def work(steps: int, ctx: Context, delay: float = 0.0) -> str:
    """Report ``steps`` progress notifications and one log message per step, then finish.

    Args:
        steps: how many steps
        delay: seconds to sleep between steps (a call to cancel or cut)
    """
    for step in range(1, steps + 1):
        await ctx.info(f"step {step} of {steps}")
        await ctx.report_progress(step, steps, f"step {step}")
        if delay:
            await asyncio.sleep(delay)
    return f"worked {steps} steps"


@server.tool
def refuse(reason: str) -> str:
    """Fail on purpose, with a message for the model."""
    raise ToolError(f"refused: {reason}")


@server.tool
def crash() -> str:
    """Fail by accident: an exception the server must log and never send."""
    raise RuntimeError(CRASH_MARKER)


@server.tool
async def register(ctx: Context) -> str:
    """Ask two questions in turn (two elicitation rounds), then answer with both."""
    who = await ctx.elicit("What is your name?", NAME_FORM)
    if not who.accepted or who.content is None:
        return f"declined: {who.action}"
    age = await ctx.elicit(f"How old are you, {who.content['name']}?", AGE_FORM)
    if not age.accepted or age.content is None:
        return f"declined: {age.action}"
    return f"registered {who.content['name']}, aged {age.content['age']}"


def ephemeral() -> str:
    """A tool that comes and goes."""
    return "here"


@server.tool
async def toggle() -> str:
    """Add the ephemeral tool when absent, remove it when present (tools list_changed).

    ``async`` so it runs on the event loop: the check and the change are one step.
    """
    if any(tool["name"] == EPHEMERAL for tool in server.tools):
        server.remove_tool(EPHEMERAL)
        return "removed"
    server.add_tool(ephemeral, name=EPHEMERAL)
    return "added"


@server.tool
async def touch(uri: str) -> str:
    """Tell subscribers that the resource at ``uri`` changed."""
    server.resource_updated(uri)
    return f"touched {uri}"


@server.resource("soak://items/{id}", mime_type="text/plain", description="One item by id.")
def item(id: str) -> str:
    return f"item {id}"


@server.resource("soak://status", mime_type="text/plain", description="A fixed status line.")
def status() -> str:
    return "soaking"


@server.prompt
def review(code: str, language: str = "python") -> str:
    """Ask for a code review.

    Args:
        code: the code to review
        language: its language
    """
    return f"Review this {language} code:\n{code}"


@server.completion("soak://items/{id}", "id")
def complete_item(value: str, context: dict[str, str]) -> list[str]:
    return [i for i in ITEM_IDS if i.startswith(value)]


@server.completion("review", "language")
def complete_language(value: str, context: dict[str, str]) -> list[str]:
    return [lang for lang in ("python", "perl", "rust") if lang.startswith(value)]


if __name__ == "__main__":
    server.run()
