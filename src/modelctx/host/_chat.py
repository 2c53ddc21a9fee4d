"""``modelctx chat --config FILE``: a terminal chat with a model and the configured servers.

Theory of operation. ``run_chat`` picks the model from the environment (before any
server starts, so a missing key costs nothing and says what to set), connects the host
(``Host`` with ``Approvals`` over the configuration's policy and a ``TerminalUI``), shows
which servers are up and which failed, then reads lines: a slash command is run here, any
other line is a user turn of the ``ModelLoop``, whose events are printed as they come
(text streamed, each tool call with its server and arguments, each result summarized).

The person answers the host's questions in the same terminal: approvals (allow once,
always, deny), elicitation (form fields one by one; a URL is shown, never opened) and
servers' sampling requests (shown, then answered by the same model, or refused).

Input is read by one daemon thread (``LineReader``), so the event loop never blocks on
the keyboard and Ctrl-C can stop a turn: the turn is cancelled and its partial messages
dropped, so the conversation stays one the model API accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from ..errors import MCPError, ProtocolError
from ..protocol.apps import tool_ui
from ..protocol.types.v2026_07_28 import EmbeddedResource, TextContent
from ._approval import ApprovalConfigError, ApprovalPolicy, ApprovalRequest, Approvals, Decision
from ._chat_file import ConversationFileError
from ._chat_file import load as load_conversation
from ._chat_file import save as save_conversation
from ._chat_forms import CANCELLED, SKIPPED, field_hint, parse_field
from ._chat_input import MULTILINE_HELP, LineReader, Reader, open_reader
from ._chat_tools import ChatTools
from ._config import HostConfigError, load_config
from ._host import Host
from ._model import (
    Conversation,
    Final,
    Model,
    ModelError,
    ModelLoop,
    ModelSetupError,
    TextDelta,
    ToolCallRequested,
    ToolResultEvent,
    UserMessage,
    result_parts,
    sample,
    sampling_conversation,
)
from ._providers import NO_KEY_MESSAGE, choose_model, describe_model

if TYPE_CHECKING:
    from ..client import Elicitation
    from ..protocol.types.v2026_07_28 import CallToolResult, Tool

__all__ = [
    "NO_KEY_MESSAGE",
    "ChatOptions",
    "LineReader",
    "TerminalUI",
    "make_model",
    "parse_prompt_arguments",
    "run_chat",
]

USAGE_ERROR = 2

log = logging.getLogger("modelctx.host.chat")


HELP = """\
[bold]/tools[/]                 the tools the model may call
[bold]/servers[/]               the configured servers and their state
[bold]/approve[/]               the tools you allowed "always"
[bold]/approve forget N[/]      ask about tool N of that list again ([bold]forget all[/]: every one)
[bold]/resources[/]             the servers' resources
[bold]/attach URI[/] [SERVER]   attach a resource's text to your next message
[bold]/prompts[/]               the servers' prompts; run one as [bold]/NAME arg=value ...[/]
[bold]/save FILE[/]             save the conversation (go on later: modelctx chat --resume FILE)
[bold]/help[/]                  this list
[bold]/quit[/]                  leave (or Ctrl-D); Ctrl-C stops a running turn, or clears the line
A message of several lines: """ + MULTILINE_HELP + "."

# How much of a tool result or a sampling request is shown in one line.
SUMMARY_CHARS = 240


async def _choose(reader: Reader, prompt: str, choices: dict[str, str], default: str) -> str:
    """Ask until the answer is one of ``choices`` (answer text -> meaning); an empty line
    is ``default``, end of input too."""
    while True:
        line = await reader.read(prompt)
        if line is None:
            return default
        answer = line.strip().lower()
        if not answer:
            return default
        if answer in choices:
            return choices[answer]
        reader.console.print(f"[red]please answer one of: {', '.join(sorted(set(choices)))}[/]")


# -- the person's side of the host ----------------------------------------------------------------
_APPROVAL_CHOICES = {
    "a": "once", "allow": "once", "y": "once", "yes": "once",
    "w": "always", "always": "always",
    "d": "deny", "deny": "deny", "n": "deny", "no": "deny",
}  # fmt: skip
_DECISIONS = {"once": Decision.ALLOW_ONCE, "always": Decision.ALWAYS, "deny": Decision.DENY}


@dataclass
class TerminalUI:
    """A ``HostUI`` that asks the person at the terminal."""

    console: Console
    reader: Reader
    #: Held while a question is on the screen: questions come one at a time.
    asking: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Set when the person stopped the turn (Ctrl-C): a question withdrawn then needs no notice.
    interrupted: bool = False
    #: Whether a progress line is on the screen, to be replaced by what is printed next.
    progress_shown: bool = False

    def progress(self, tool: str, done: float, total: float | None, message: str | None) -> None:
        """Show a running tool's progress in place: one line, rewritten by each report
        (at a terminal; elsewhere one line per report)."""
        line = f"… {tool}: {progress_text(done, total)}" + (f" {message}" if message else "")
        if not self.console.is_terminal:
            self.console.print(f"[dim]{escape(line)}[/]")
            return
        width = max(10, self.console.width - 1)
        self.console.file.write("\r\x1b[K" + _clip(" ".join(line.split()), width))
        self.console.file.flush()
        self.progress_shown = True

    def clear_progress(self) -> None:
        if self.progress_shown:
            self.console.file.write("\r\x1b[K")
            self.console.file.flush()
            self.progress_shown = False

    async def open_url(self, server: str, message: str, url: str) -> bool:
        """A tool that needs the person to open a page first (error -32042): show the page
        and ask; True when they say they opened it (the call is then sent again)."""
        async with self.asking:
            self.clear_progress()
            with self._withdrawn_notice("the call was stopped"):
                action = await self._ask_to_open(server, message, url, "the call is sent again once you have")
        return action == "accept"

    async def approve(self, request: ApprovalRequest) -> Decision:
        async with self.asking:  # parallel calls are asked about one at a time
            self.clear_progress()
            self.console.print(approval_panel(request))
            with self._withdrawn_notice("no answer in time: denied"):
                answer = await _choose(
                    self.reader,
                    "[bold]\\[a]llow once / al\\[w]ays / \\[d]eny (default)?[/] ",
                    _APPROVAL_CHOICES,
                    "deny",
                )
        decision = _DECISIONS[answer]
        shown = {"once": "[green]allowed once[/]", "always": "[green]allowed always[/]", "deny": "[red]denied[/]"}
        self.console.print(shown[answer])
        return decision

    async def elicit(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        server = _server_name(server)  # a host before handlers_for passed its HostServer
        async with self.asking:
            self.clear_progress()
            with self._withdrawn_notice("no answer in time: the question was withdrawn"):
                if elicitation.mode == "url":
                    return await self._elicit_url(server, elicitation)
                return await self._elicit_form(server, elicitation)

    @contextlib.contextmanager
    def _withdrawn_notice(self, notice: str) -> Iterator[None]:
        """Say so when a question on the screen is withdrawn (its deadline passed, or the
        turn was stopped), so the next line typed is not taken as its answer."""
        try:
            yield
        except asyncio.CancelledError:
            if not self.interrupted:
                self.console.print(f"\n[yellow]({escape(notice)})[/]")
            raise

    async def _elicit_url(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        return {"action": await self._ask_to_open(server, elicitation.message, elicitation.url or "(none)")}

    async def _ask_to_open(self, server: str, message: str, url: str, then: str = "") -> str:
        body = Table.grid(padding=(0, 2))
        body.add_row("server", escape(server))
        body.add_row("asks", escape(message))
        body.add_row("URL", escape(url))
        self.console.print(Panel(body, title="a server asks you to open a page", border_style="yellow"))
        self.console.print("modelctx does not open it; open it yourself if you trust it" + (f"; {then}." if then else "."))
        choices = {"o": "accept", "opened": "accept", "a": "accept", "d": "decline", "c": "cancel"}
        return await _choose(self.reader, "\\[o]pened it / \\[d]ecline / \\[c]ancel (default)? ", choices, "cancel")

    async def _elicit_form(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        self.console.print(
            Panel(escape(elicitation.message), title=f"{escape(server)} asks you", border_style="yellow")
        )
        choices = {"y": "accept", "yes": "accept", "n": "decline", "no": "decline", "c": "cancel"}
        action = await _choose(self.reader, "answer? \\[y]es / \\[n]o / \\[c]ancel (default): ", choices, "cancel")
        if action != "accept":
            return {"action": action}
        schema = elicitation.requested_schema or {}
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, prop in (schema.get("properties") or {}).items():
            value = await self._field(name, prop if isinstance(prop, dict) else {}, name in required)
            if value is CANCELLED:
                return {"action": "cancel"}
            if value is not SKIPPED:
                content[name] = value
        return {"action": "accept", "content": content}

    async def _field(self, name: str, prop: dict[str, Any], required: bool) -> Any:
        label = str(prop.get("title") or name)
        hint = field_hint(prop, required)
        if isinstance(prop.get("description"), str):
            self.console.print(f"[dim]{escape(prop['description'])}[/]")
        while True:
            line = await self.reader.read(f"{escape(label)} [dim]{escape(hint)}[/]: ")
            if line is None:
                return CANCELLED
            try:
                return parse_field(line.strip(), prop, required)
            except ValueError as exc:
                self.console.print(f"[red]{escape(str(exc))}[/]")

    async def show(self, message: str) -> None:
        self.console.print(f"[yellow]notice:[/] {escape(message)}")


def approval_panel(request: ApprovalRequest) -> Panel:
    """What a person reads before answering an approval: server, tool, annotations and
    the full arguments (and what changed, when a pinned definition changed)."""
    body = Table.grid(padding=(0, 2))
    body.add_row("server", f"{escape(request.server)} [dim]({escape(request.identity)})[/]")
    body.add_row("tool", f"[bold]{escape(request.tool.name)}[/]")
    if isinstance(request.tool.description, str):
        body.add_row("description", escape(request.tool.description))
    annotations = request.annotations
    if annotations is not None:
        import msgspec

        body.add_row("annotations", escape(json.dumps(msgspec.to_builtins(annotations), sort_keys=True)))
    body.add_row("arguments", escape(json.dumps(request.arguments, indent=2, ensure_ascii=False, default=str)))
    if request.why == "definition changed":
        body.add_row("[red]definition changed[/]", escape(", ".join(request.changed) or "yes"))
    title = "approve this tool call?" if request.why == "new" else "approve again: the tool changed"
    return Panel(body, title=title, border_style="yellow" if request.why == "new" else "red")


# -- the model -------------------------------------------------------------------------------------
def make_model(provider: str | None, model: str | None, environ: Mapping[str, str]) -> Model:
    """The model the flags and environment configure (``_providers.choose_model``: its
    rules); raises ``ModelSetupError`` saying what to set."""
    return choose_model(provider, model, environ)


def _model_name(model: Model) -> str:
    return str(getattr(model, "model", "unknown"))


# -- the chat --------------------------------------------------------------------------------------
class Chat:
    """One chat session: the host, the model loop, the conversation and the terminal.

    ``reader``: where lines come from (default: ``open_reader``, a line editor at a
    terminal); ``conversation``: one to go on with (``--resume``)."""

    def __init__(
        self,
        config_path: str,
        model: Model,
        console: Console,
        reader: Reader | None = None,
        *,
        conversation: Conversation | None = None,
    ) -> None:
        self.config_path = config_path
        self.model = model
        self.console = console
        self.reader = reader if reader is not None else open_reader(console, os.environ, self._interrupt)
        self.ui = TerminalUI(console, self.reader)
        self.conversation = conversation if conversation is not None else Conversation()
        self.attachments: list[str] = []
        self.turn: asyncio.Task[None] | None = None
        self.host: Host | None = None
        self.ui_told: set[str] = set()  # tools whose view the chat said it cannot show
        self.tools: ChatTools | None = None

    async def run(self) -> int:
        config = load_config(self.config_path)
        approvals = Approvals(
            ApprovalPolicy.from_config(config), self.ui, store=getattr(config, "approval_store", None)
        )
        host = Host(config, approvals=approvals, ui=self.ui, sample=self._sample)
        self.host = host
        self.tools = ChatTools(host, on_progress=self.ui.progress, ask_url=self.ui.open_url)
        quiet = logging.getLogger("modelctx")
        level = quiet.level
        quiet.setLevel(logging.ERROR)  # failures to start are shown below, once
        self.console.print(f"connecting {len(config.servers)} server(s) from {escape(self.config_path)} ...")
        try:
            async with host:
                quiet.setLevel(level)
                await self.show_servers()
                self.console.print(
                    f"model: [bold]{escape(describe_model(self.model))}[/]. Type a message, or /help for commands."
                )
                if self.conversation.messages:
                    self.console.print(f"[dim](going on with {len(self.conversation.messages)} earlier messages)[/]")
                await self.prompt_loop()
        finally:
            quiet.setLevel(level)
        return 0

    async def prompt_loop(self) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, self._interrupt)
        try:
            while True:
                line = await self.reader.read_message("\n[bold cyan]you>[/] ")
                if line is None or line.strip() in ("/quit", "/exit"):
                    self.console.print("bye")
                    return
                line = line.strip()
                if not line:
                    continue
                self.ui.interrupted = False
                self.turn = asyncio.ensure_future(self.command(line) if line.startswith("/") else self.say(line))
                try:
                    await self.turn
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # the chat itself is being stopped, not only this turn
                    self.ui.clear_progress()
                    self.console.print("\n[yellow]interrupted[/]")
                finally:
                    self.turn = None
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)

    def _interrupt(self) -> None:
        if self.turn is not None and not self.turn.done():
            self.ui.interrupted = True
            self.turn.cancel()
        else:
            self.console.print("\n(type /quit or press Ctrl-D to leave)")

    # -- a user turn ----------------------------------------------------------------------------
    async def say(self, text: str, *, shown: str | None = None) -> None:
        if self.attachments:
            text = "\n\n".join([*self.attachments, text])
            self.console.print(f"[dim]({len(self.attachments)} attachment(s) sent with this message)[/]")
            self.attachments = []
        if shown is not None:
            self.console.print(shown)
        assert self.tools is not None
        kept = len(self.conversation.messages)
        streaming = False
        try:
            async for event in ModelLoop(self.tools, self.model).run(self.conversation, text):
                streaming = self._show_event(event, streaming)
        except ModelError as exc:
            del self.conversation.messages[kept:]
            self.console.print(f"\n[red]model error:[/] {escape(str(exc))}")
        except Exception as exc:  # noqa: BLE001 - a bug in one turn must not end the chat: show it, go on
            del self.conversation.messages[kept:]
            log.debug("the turn failed", exc_info=True)
            self.console.print(f"\n[red]this turn failed ({type(exc).__name__}: {escape(str(exc))}); it was dropped[/]")
        except BaseException:
            # A turn cut short (Ctrl-C) may end between a tool call and its result:
            # drop it, so the next request is one the API accepts.
            del self.conversation.messages[kept:]
            raise

    def _show_event(self, event: object, streaming: bool) -> bool:
        """Print one loop event; returns whether model text is being streamed."""
        self.ui.clear_progress()
        if isinstance(event, TextDelta):
            if not streaming:
                self.console.print("[bold magenta]model>[/] ", end="")
            self.console.print(event.text, end="", markup=False, highlight=False)
            return True
        if streaming:
            self.console.print()
        if isinstance(event, ToolCallRequested):
            where = f"{event.server} · {event.original}" if event.server else f"{event.name} (no such tool)"
            arguments = json.dumps(event.arguments, ensure_ascii=False, default=str)
            self.console.print(f"[cyan]→ tool call[/] [bold]{escape(where)}[/] {escape(_clip(arguments))}")
            self._say_ui_once(event.name)
        elif isinstance(event, ToolResultEvent):
            mark = "[red]✗ error[/]" if event.is_error else "[green]✓ result[/]"
            self.console.print(f"{mark} {escape(event.name)}: {escape(summarize(event.result))}")
        elif isinstance(event, Final) and event.reason == "max_steps":
            self.console.print(f"[yellow]{escape(event.text)}[/]")
        return False

    def _say_ui_once(self, name: str) -> None:
        """An MCP Apps tool's view (``_meta.ui.resourceUri``) cannot be shown in a
        terminal: say so the first time the tool is called, and go on with its text."""
        tool = self.host.listed_tool(name) if self.host is not None else None
        if tool is not None and name not in self.ui_told and tool_ui(tool.meta)[0] is not None:
            self.ui_told.add(name)
            self.console.print("[dim](this tool has a UI the terminal cannot show; its text result follows)[/]")

    # -- servers' sampling requests ----------------------------------------------------------------
    async def _sample(self, server: Any, params: dict[str, Any]) -> dict[str, Any]:
        """A server's ``sampling/createMessage``, shown to the person, then answered by
        the chat's model (no tools) or refused."""
        name = _server_name(server)
        conversation = sampling_conversation(params)
        last = next((m.text for m in reversed(conversation.messages) if isinstance(m, UserMessage)), "")
        # What the server asks for, all of it that changes the answer: its system prompt and
        # parameters are shown beside the message (they were not, so a server's instructions
        # to the model went by unseen).
        shown = escape(_clip(last))
        system = params.get("systemPrompt")
        if isinstance(system, str) and system.strip():
            shown = f"[dim]system:[/] {escape(_clip(system))}\n{shown}"
        settings = [f"{key} {params[key]}" for key in ("maxTokens", "temperature") if key in params]
        stops = params.get("stopSequences")
        if isinstance(stops, list) and stops:
            settings.append("stop at " + ", ".join(json.dumps(stop, ensure_ascii=False) for stop in stops[:5]))
        if settings:
            shown += f"\n[dim]{escape(' · '.join(settings))}[/]"
        async with self.ui.asking:
            self.console.print(Panel(shown, title=f"{escape(name)} asks the model (sampling)", border_style="yellow"))
            allow = await _choose(
                self.reader, "let the model answer? \\[y]es / \\[n]o (default): ",
                {"y": "yes", "yes": "yes", "n": "no", "no": "no"}, "no",
            )  # fmt: skip
        if allow != "yes":
            refused = ProtocolError("the user refused the sampling request")
            refused.code = -1
            raise refused
        answer = await sample(self.model, params)  # its maxTokens, temperature, stops, model hints
        self.console.print(f"[dim]sampling answer for {escape(name)}: {escape(_clip(answer['content']['text']))}[/]")
        return answer

    # -- slash commands ---------------------------------------------------------------------------
    async def command(self, line: str) -> None:
        name, _, rest = line[1:].partition(" ")
        commands = {
            "help": self.show_help,
            "tools": self.show_tools,
            "servers": self.show_servers,
            "resources": self.show_resources,
            "prompts": self.show_prompts,
        }
        try:
            if name in commands:
                await commands[name]()
            elif name == "approve":
                await self.approvals_command(rest.split())
            elif name == "attach":
                await self.attach(rest.split())
            elif name == "save":
                self.save(rest.strip())
            else:
                await self.run_prompt(name, rest)
        except (MCPError, ValueError) as exc:
            self.console.print(f"[red]{escape(str(exc))}[/]")

    def save(self, path: str) -> None:
        if not path:
            raise ValueError("usage: /save FILE (then go on later with modelctx chat --resume FILE)")
        try:
            written = save_conversation(self.conversation, path)
        except OSError as exc:
            raise ValueError(f"cannot save to {path}: {exc.strerror or exc}") from None
        self.console.print(
            f"saved {len(self.conversation.messages)} messages to {escape(str(written))}; "
            f"go on later with: modelctx chat --config {escape(self.config_path)} --resume {escape(str(written))}"
        )

    async def show_help(self) -> None:
        self.console.print(HELP)

    async def show_servers(self) -> None:
        assert self.host is not None
        table = Table(title="servers", title_justify="left")
        for column in ("server", "state", "command or URL", "problem"):
            table.add_column(column, overflow="fold")
        for name, server in sorted(self.host.servers.items()):
            state = {"ready": "[green]up[/]", "failed": "[red]failed[/]"}.get(server.status, server.status)
            identity = server.spec.identity if server.spec is not None else ""
            table.add_row(escape(name), state, escape(identity), escape(server.error or ""))
        self.console.print(table)

    async def show_tools(self) -> None:
        assert self.host is not None
        tools = await self.host.tools()
        if not tools:
            self.console.print("no tools: no server that is up offers any")
            return
        table = Table(title="tools", title_justify="left")
        for column in ("name", "server", "hints", "description"):
            table.add_column(column, overflow="fold")
        for tool in tools:
            try:
                server = self.host.find_client_for(tool.name)[0].name
            except (LookupError, MCPError):
                server = "?"
            table.add_row(escape(tool.name), escape(server), tool_hints(tool), escape(_first_line(tool.description)))
        self.console.print(table)

    async def approvals_command(self, words: list[str]) -> None:
        """``/approve``: list the "always" answers; ``/approve forget N|all``: withdraw them."""
        approvals = self.host.approvals if self.host is not None else None
        if not isinstance(approvals, Approvals):
            self.console.print("this chat does not ask for approvals")
            return
        rows = await approvals.remembered()
        if not words:
            self.show_approvals(approvals, rows)
            return
        if words[0] != "forget" or len(words) != 2:
            raise ValueError("usage: /approve, or /approve forget N (a number /approve shows), or /approve forget all")
        if words[1] == "all":
            chosen = rows
        elif words[1].isdigit() and 1 <= int(words[1]) <= len(rows):
            chosen = [rows[int(words[1]) - 1]]
        else:
            raise ValueError(f"no approval numbered {words[1]!r}: /approve lists them, numbered from 1")
        for identity, tool in chosen:
            await approvals.forget(identity, tool)
            self.console.print(f"forgot: {escape(tool)} of {escape(self._server_named(identity))}; it is asked about again")
        if not chosen:
            self.console.print('no tool is allowed "always"')

    def show_approvals(self, approvals: Approvals, rows: list[tuple[str, str]]) -> None:
        if not rows:
            self.console.print('no tool is allowed "always" yet (answer w to an approval to add one)')
            return
        table = Table(title='allowed "always"', title_justify="left")
        for column in ("#", "server", "command or URL", "tool"):
            table.add_column(column, overflow="fold")
        for number, (identity, tool) in enumerate(rows, 1):
            table.add_row(str(number), escape(self._server_named(identity)), escape(identity), escape(tool))
        self.console.print(table)
        store = approvals.store
        where = f"they are kept in {store.path}" if store is not None else "they last until you leave this chat"
        self.console.print(
            f"[dim]{escape(where)}; a changed tool definition is asked about again; "
            "/approve forget N withdraws one.[/]"
        )

    def _server_named(self, identity: str) -> str:
        """The configured name of the server whose identity (command or URL) this is."""
        servers = self.host.servers if self.host is not None else {}
        for name, server in sorted(servers.items()):
            if server.spec is not None and server.spec.identity == identity:
                return name
        return identity.removeprefix("unidentified:") if identity.startswith("unidentified:") else "(not configured now)"

    async def show_resources(self) -> None:
        assert self.host is not None
        resources = await self.host.resources()
        if not resources:
            self.console.print("no resources")
            return
        table = Table(title="resources (attach one with /attach URI)", title_justify="left")
        for column in ("server", "URI", "name", "type"):
            table.add_column(column, overflow="fold")
        for server, resource in resources:
            mime = resource.mime_type if isinstance(resource.mime_type, str) else ""
            table.add_row(escape(server), escape(resource.uri), escape(resource.name), escape(mime))
        self.console.print(table)

    async def attach(self, words: Sequence[str]) -> None:
        if not words or len(words) > 2:
            raise ValueError("usage: /attach URI [SERVER]")
        assert self.host is not None
        uri = words[0]
        server = words[1] if len(words) == 2 else await self._owner_of(uri)
        result = await self.host.read_resource(uri, server=server)
        texts = [str(c["text"]) for c in result.contents if isinstance(c.get("text"), str)]
        if not texts:
            raise ValueError(f"{uri} has no text to attach (binary contents are not attached)")
        self.attachments.append(f"Attached resource {uri}:\n" + "\n".join(texts))
        self.console.print(f"attached {escape(uri)} ({sum(map(len, texts))} characters) to your next message")

    async def _owner_of(self, uri: str) -> str:
        """The one server that lists ``uri``; raises ``ValueError`` saying how to name one."""
        assert self.host is not None
        owners = sorted({server for server, resource in await self.host.resources() if resource.uri == uri})
        if len(owners) == 1:
            return owners[0]
        if owners:
            raise ValueError(f"servers {', '.join(owners)} all list {uri}: name one, as /attach {uri} {owners[0]}")
        raise ValueError(
            f"no server lists {uri} (/resources shows what does); to read it from a server anyway "
            f"(a URI of one of its templates), name the server: /attach {uri} SERVER"
        )

    async def show_prompts(self) -> None:
        assert self.host is not None
        prompts = await self.host.prompts()
        if not prompts:
            self.console.print("no prompts")
            return
        for prompt in prompts:
            arguments = prompt.arguments if isinstance(prompt.arguments, list) else []
            usage = " ".join(f"{a.name}=..." if a.required is True else f"[{a.name}=...]" for a in arguments)
            self.console.print(
                f"[bold]/{escape(prompt.name)}[/] {escape(usage)}  [dim]{escape(_first_line(prompt.description))}[/]"
            )

    async def run_prompt(self, name: str, rest: str) -> None:
        assert self.host is not None
        if name not in {prompt.name for prompt in await self.host.prompts()}:
            raise ValueError(f"unknown command /{name}; /help lists the commands, /prompts the prompts")
        result = await self.host.get_prompt(name, parse_prompt_arguments(rest))
        texts: list[str] = []
        for message in result.messages:
            content = message.content
            if isinstance(content, TextContent):
                texts.append(content.text)
            elif isinstance(content, EmbeddedResource) and isinstance(content.resource.get("text"), str):
                texts.append(f"resource {content.resource.get('uri', '?')}:\n{content.resource['text']}")
        if not texts:
            raise ValueError(f"the prompt {name} gave no text to send")
        await self.say("\n\n".join(texts), shown=f"[dim](prompt /{escape(name)}:)[/] {escape(_clip(texts[-1]))}")


def parse_prompt_arguments(text: str) -> dict[str, str]:
    """``name=value`` words (shell quoting allowed) as a prompt's arguments; raises
    ``ValueError`` for a word without ``=``."""
    import shlex

    arguments: dict[str, str] = {}
    for word in shlex.split(text):
        key, equals, value = word.partition("=")
        if not equals or not key:
            raise ValueError(f"prompt arguments are name=value; {word!r} is not")
        arguments[key] = value
    return arguments


def summarize(result: CallToolResult) -> str:
    """A tool result in one line: its text, clipped."""
    texts = [getattr(part, "text", "") or f"[{type(part).__name__}]" for part in result_parts(result)]
    return _clip(" ".join(" ".join(texts).split()))


def tool_hints(tool: Tool) -> str:
    annotations = tool.annotations
    hints = []
    for attribute, word in (("read_only_hint", "read-only"), ("destructive_hint", "destructive")):
        if getattr(annotations, attribute, None) is True:
            hints.append(word)
    return ", ".join(hints)


def _server_name(server: object) -> str:
    """The configured name, given the name or the host's ``HostServer``."""
    return server if isinstance(server, str) else str(getattr(server, "name", server))


def _first_line(text: object) -> str:
    return text.strip().splitlines()[0] if isinstance(text, str) and text.strip() else ""


def _clip(text: str, limit: int = SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def progress_text(done: float, total: float | None) -> str:
    """``3/10 (30%)``, or ``3`` when the total is unknown."""
    if total is None or total <= 0:
        return f"{done:g}"
    return f"{done:g}/{total:g} ({min(100, round(100 * done / total))}%)"


# -- the command -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChatOptions:
    """What ``modelctx chat`` was asked to do beyond chatting: one question (``question``,
    with ``allow`` globs and ``as_json``), or a saved conversation to go on with (``resume``)."""

    provider: str | None = None
    model: str | None = None
    question: str | None = None
    allow: tuple[str, ...] = ()
    as_json: bool = False
    resume: str | None = None


def run_chat(config_path: str, *, provider: str | None = None, model: str | None = None,
             options: ChatOptions | None = None) -> int:  # fmt: skip
    """Run the chat until the person leaves (or answer ``options.question`` and stop);
    returns the exit status. Setup problems (no API key, a configuration or a saved chat
    that cannot be read) are one line on stderr and status 2."""
    options = options or ChatOptions(provider=provider, model=model)
    try:
        chosen = make_model(options.provider or provider, options.model or model, os.environ)
        conversation = load_conversation(options.resume) if options.resume else None
    except (ModelSetupError, ConversationFileError) as exc:
        print(f"modelctx chat: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except OSError as exc:
        print(f"modelctx chat: cannot read {options.resume}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE_ERROR
    try:
        if options.question is not None:
            from ._chat_once import ask_once

            return asyncio.run(ask_once(config_path, chosen, options, conversation))
        console = Console(highlight=False)
        return asyncio.run(Chat(config_path, chosen, console, conversation=conversation).run())
    except (HostConfigError, ApprovalConfigError, OSError) as exc:
        print(f"modelctx chat: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        return 130
