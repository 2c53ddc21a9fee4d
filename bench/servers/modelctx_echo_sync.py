"""The modelctx echo server with a plain (sync) tool: the same ``echo`` as
``modelctx_echo.py``, written ``def`` instead of ``async def``.

A sync tool runs on a worker thread by default (it may block), so this measures the
cost of that hop against the async echo. Served by the CLI like the async one.
"""

from modelctx import Server

server = Server("bench-echo-sync", "1.0")


@server.tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text
