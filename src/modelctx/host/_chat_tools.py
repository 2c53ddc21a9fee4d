"""The host's tools as the chat's model loop calls them: progress shown, URLs asked about.

``ChatTools`` is the ``ToolSet`` the chat hands to ``ModelLoop``: the host's own, plus two
things a person at the chat needs while a tool runs.

- **Progress.** Each ``notifications/progress`` of the running call goes to
  ``on_progress(name, progress, total, message)`` (the terminal shows it in place, on one
  line that the result replaces).
- **A URL to open (-32042).** A handshake-era server that needs the person to visit a page
  first answers the call with error -32042 and the pages in ``data.elicitations``
  (2025-11-25 client/elicitation, "URL elicitation required"). Each page is shown and
  asked about through ``ask_url(server, message, url)`` (True: the person says they opened
  it); when every one was opened the call is sent once more. Otherwise, and without a
  person to ask, the model gets an error result that names the URL, so the person reading
  the answer can still go there. Nothing here opens a URL.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..errors import HANDSHAKE_ERA_URL_ELICITATION_REQUIRED, MCPError, ProtocolError
from ._model import error_result

if TYPE_CHECKING:
    from ..protocol.types.v2026_07_28 import CallToolResult, Tool
    from ._host import Host

__all__ = ["AskURL", "ChatTools", "OnProgress", "url_elicitations"]

#: ``(tool name, progress, total, message)``, for each progress report of a running call.
OnProgress = Callable[[str, float, "float | None", "str | None"], None]
#: ``(server, message, url) -> opened?``: ask the person to open a page.
AskURL = Callable[[str, str, str], Awaitable[bool]]


def url_elicitations(exc: ProtocolError) -> list[tuple[str, str]]:
    """The ``(message, url)`` pages a -32042 error asks the person to open; [] for any
    other error, or one whose data names no URL."""
    data = exc.data if exc.code == HANDSHAKE_ERA_URL_ELICITATION_REQUIRED else None
    asked = data.get("elicitations") if isinstance(data, dict) else None
    pages = []
    for item in asked if isinstance(asked, list) else ():
        if isinstance(item, dict) and isinstance(item.get("url"), str):
            message = item.get("message")
            pages.append((message if isinstance(message, str) else "", item["url"]))
    return pages


class ChatTools:
    """``host``'s tools for the model loop (see the module docstring)."""

    def __init__(self, host: Host, on_progress: OnProgress | None = None, ask_url: AskURL | None = None) -> None:
        self.host = host
        self.on_progress = on_progress
        self.ask_url = ask_url

    def __getattr__(self, name: str) -> Any:
        # Whatever else the model loop asks of its tool set is the host's: this class
        # only adds to call_tool, so a loop that learns a new host method keeps working.
        return getattr(self.host, name)

    async def tools(self) -> list[Tool]:
        return await self.host.tools()

    def find_client_for(self, name: str) -> Any:
        return self.host.find_client_for(name)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        try:
            return await self._call(name, arguments)
        except ProtocolError as exc:
            pages = url_elicitations(exc)
            if not pages:
                raise
            server = self._server_of(name)
            opened = self.ask_url is not None
            for message, url in pages:
                if not opened:
                    break
                assert self.ask_url is not None
                opened = await self.ask_url(server, message or exc.message, url)
            if opened:
                return await self._call(name, arguments)  # once: a second -32042 is the model's to read
            urls = ", ".join(url for _, url in pages)
            return error_result(
                f"the call to {name} needs the user to open {urls} in a browser first "
                f"({exc.message}); it was not done, so the call did not run"
            )

    async def _call(self, name: str, arguments: dict[str, Any] | None) -> CallToolResult:
        if self.on_progress is None:
            return await self.host.call_tool(name, arguments)
        report = self.on_progress

        def progress(done: float, total: float | None, message: str | None) -> None:
            report(name, done, total, message)

        return await self.host.call_tool(name, arguments, progress=progress)

    def _server_of(self, name: str) -> str:
        try:
            return str(self.host.find_client_for(name)[0].name)
        except (LookupError, MCPError):
            return "a server"
