"""The modelctx echo server with a sync tool marked ``inline=True``: it runs on the event
loop, without the hop to a worker thread (the author promises it never blocks).

Beside ``modelctx_echo.py`` (async) and ``modelctx_echo_sync.py`` (sync, on a worker
thread, the default), this shows what the thread hop itself costs.
"""

from modelctx import Server

server = Server("bench-echo-inline", "1.0")


@server.tool(inline=True)
def echo(text: str) -> str:
    """Echo the text back."""
    return text
