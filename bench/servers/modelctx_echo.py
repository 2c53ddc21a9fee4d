"""The modelctx echo server the benchmark drives.

Served by the CLI, as a user would: ``modelctx serve bench/servers/modelctx_echo.py``
(stdio) or ``... --http --host 127.0.0.1 --port PORT`` (Streamable HTTP at /mcp).
"""

from modelctx import Server

server = Server("bench-echo", "1.0")


@server.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    return text
