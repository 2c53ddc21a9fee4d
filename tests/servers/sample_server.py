"""A realistic server for the transport and interoperability tests.

Served as a real subprocess by ``modelctx serve tests/servers/sample_server.py``
(stdio, or ``--http``). Every tool, resource and prompt here exists for a test; the
docstrings say which behaviour each one exercises.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from modelctx import Context, Server, ToolError

log = logging.getLogger("sample_server")

server = Server("sample-server", version="1.2.3", instructions="A server for tests.")

# 1x1 transparent PNG: a binary resource whose bytes the tests compare exactly.
LOGO_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
SECRET = "kaboom: secret detail 7f3a"
ITEM_IDS = ("apple", "apricot", "banana", "blueberry", "cherry")


@server.tool
async def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: what to echo
    """
    return text


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool
def boom() -> str:
    """Fail with an unexpected exception whose text must not reach the client."""
    log.warning("boom is about to raise")
    raise RuntimeError(SECRET)


@server.tool
def refuse(reason: str = "not today") -> str:
    """Fail on purpose with a message meant for the model."""
    raise ToolError(f"refused: {reason}")


@server.tool
async def sleepy(seconds: float = 60.0, marker: str | None = None) -> str:
    """Sleep; if cancelled first, write 'cancelled' to the file ``marker``."""
    if marker:
        Path(marker + ".started").write_text("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        if marker:
            Path(marker).write_text("cancelled")
        raise
    return f"slept {seconds}"


@server.tool
async def stubborn(marker: str) -> str:
    """Catch its own cancellation and return anyway (a handler cleaning up)."""
    Path(marker + ".started").write_text("started")
    try:
        await asyncio.sleep(600)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        return "a result nobody asked for any more"
    return "slept"


@server.tool
async def progress(steps: int, ctx: Context) -> str:
    """Report ``steps`` progress notifications, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done after {steps} steps"


@server.tool
async def register(ctx: Context) -> str:
    """Ask the user two questions in turn (form elicitation), then greet them."""
    who = await ctx.elicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    if not who.accepted:
        return f"registration: {who.action}"
    name = who.content["name"]
    age = await ctx.elicit(
        f"How old are you, {name}?",
        {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]},
    )
    if not age.accepted:
        return f"registration of {name}: {age.action}"
    return f"registered {name}, aged {age.content['age']}"


@server.resource("sample://greeting", mime_type="text/plain", description="A fixed greeting.")
def greeting() -> str:
    return "Hello from the sample server"


@server.resource("sample://items/{id}", mime_type="text/plain", description="One item by id.")
def item(id: str) -> str:
    if id == "boom":  # a handler bug: tests/test_bad_input.py checks its text stays in the log
        raise RuntimeError(SECRET)
    return f"item {id}"


@server.resource("sample://logo.png", mime_type="image/png", description="A tiny PNG.")
def logo() -> bytes:
    return LOGO_PNG


@server.prompt
def review(code: str, language: str = "python") -> str:
    """Ask for a code review.

    Args:
        code: the code to review
        language: the language it is written in
    """
    return f"Please review this {language} code:\n{code}"


@server.completion("sample://items/{id}", "id")
def complete_item_id(value: str, context: dict) -> list[str]:
    return [i for i in ITEM_IDS if i.startswith(value)]


@server.completion("review", "language")
def complete_language(value: str, context: dict) -> list[str]:
    return [lang for lang in ("python", "perl", "php", "rust") if lang.startswith(value)]
