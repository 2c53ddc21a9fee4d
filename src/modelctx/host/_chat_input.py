"""The keyboard side of ``modelctx chat``: a line editor at a terminal, plain lines from a pipe.

Two readers with one interface: ``read(prompt)`` for a question's answer (an approval, a
form field) and ``read_message(prompt)`` for the person's next message; both return the
text typed, or None at end of input (Ctrl-D, or the pipe closed). Prompts are Rich markup.

- ``PromptReader`` (stdin and stdout are a terminal): prompt_toolkit, so the arrow keys
  edit, Up/Down recall earlier messages (kept across runs in a file of mode 0600 under
  the user's config folder, ``history_path()``), and a message may span lines (end a line
  with ``\\`` or press Esc then Enter). Ctrl-C at the message prompt clears the line and
  asks again; Ctrl-C at a question calls ``on_interrupt`` (the chat stops its turn) and
  the question is withdrawn. Answers to questions are never written to the history file.
- ``LineReader`` (input piped): one daemon thread reads lines, so the event loop never
  blocks on stdin and Ctrl-C (SIGINT) can still stop a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

__all__ = ["LineReader", "PromptReader", "Reader", "history_path", "open_reader"]

#: Shown by /help: how to write a message of several lines.
MULTILINE_HELP = "end a line with \\ (or press Esc then Enter) to go on to the next; Up/Down recall earlier messages"


class Reader(Protocol):
    console: Console

    async def read(self, prompt: str = "") -> str | None: ...

    async def read_message(self, prompt: str = "") -> str | None: ...


def history_path(environ: Mapping[str, str]) -> Path:
    """Where the chat keeps the messages typed: ``$XDG_CONFIG_HOME/modelctx/chat_history``
    (``~/.config/modelctx/chat_history`` when XDG_CONFIG_HOME is unset or not absolute)."""
    base = environ.get("XDG_CONFIG_HOME", "")
    folder = Path(base) if os.path.isabs(base) else Path(environ.get("HOME") or Path.home()) / ".config"
    return folder / "modelctx" / "chat_history"


def _private_file(path: Path) -> None:
    """Create ``path`` (and its folder, 0700) readable by its owner only; narrow a file
    that exists with a wider mode: what a person types may hold secrets."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


def open_reader(console: Console, environ: Mapping[str, str], on_interrupt: Callable[[], None]) -> Reader:
    """A ``PromptReader`` when stdin and stdout are a terminal (and prompt_toolkit is
    installed), else a ``LineReader``. A history file that cannot be made is a notice,
    and the chat goes on with a history for this run only."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return LineReader(console)
    try:
        import prompt_toolkit  # noqa: F401
    except ImportError:
        console.print("[yellow]notice:[/] no line editing: pip install 'modelctx[host]' (prompt_toolkit)")
        return LineReader(console)
    path = history_path(environ)
    try:
        _private_file(path)
    except OSError as exc:
        console.print(f"[yellow]notice:[/] messages are not remembered after this chat ({exc})")
        return PromptReader(console, None, on_interrupt)
    return PromptReader(console, path, on_interrupt)


class PromptReader:
    """Lines edited with prompt_toolkit (see the module docstring)."""

    def __init__(self, console: Console, history: Path | None, on_interrupt: Callable[[], None]) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        self.console = console
        self._on_interrupt = on_interrupt
        kept = FileHistory(str(history)) if history is not None else InMemoryHistory()
        self._messages: PromptSession[str] = PromptSession(
            history=kept, multiline=True, key_bindings=_message_keys(), prompt_continuation=_continuation
        )
        self._answers: PromptSession[str] = PromptSession(history=InMemoryHistory())

    def _formatted(self, prompt: str) -> Any:
        """Rich markup as the ANSI text prompt_toolkit shows; leading newlines printed first."""
        from prompt_toolkit.formatted_text import ANSI

        stripped = prompt.lstrip("\n")
        if len(stripped) != len(prompt):
            self.console.print("\n" * (len(prompt) - len(stripped) - 1))
        with self.console.capture() as captured:
            self.console.print(stripped, end="")
        return ANSI(captured.get())

    async def read_message(self, prompt: str = "") -> str | None:
        shown = self._formatted(prompt)
        while True:
            try:
                return await self._messages.prompt_async(shown, handle_sigint=False)
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt: the line is dropped, the prompt comes back
            except EOFError:
                return None

    async def read(self, prompt: str = "") -> str | None:
        try:
            return await self._answers.prompt_async(self._formatted(prompt), handle_sigint=False)
        except EOFError:
            return None
        except KeyboardInterrupt:
            # Raw mode turns Ctrl-C into a key here, not SIGINT: stop the turn as the
            # signal would, and let the cancellation reach the question that was asked.
            self._on_interrupt()
            await asyncio.sleep(0)
            return None


def _continuation(width: int, line_number: int, wrap_count: int) -> str:
    return "." * (width - 1) + " "


def _message_keys() -> Any:
    """Enter sends the message, unless its line ends with a backslash (the backslash
    becomes a line break); Esc then Enter (Alt-Enter) inserts a line break."""
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.key_binding.key_processor import KeyPressEvent

    keys = KeyBindings()

    @keys.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.current_line_before_cursor.endswith("\\") and not buffer.document.text_after_cursor:
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return keys


class LineReader:
    """Lines read from a stream (stdin) by one daemon thread.

    ``read(prompt)`` prints ``prompt`` and waits for a line without blocking the event
    loop; it returns the line without its newline, or None at end of input. A read that
    is cancelled leaves its line to the next read (the thread cannot be interrupted, and
    a line typed after Ctrl-C belongs to whoever asks next)."""

    def __init__(self, console: Console, stream: Any = None) -> None:
        self.console = console
        self._stream = stream if stream is not None else sys.stdin
        self._wanted: queue.Queue[tuple[asyncio.AbstractEventLoop, asyncio.Future[str | None]]] = queue.Queue()
        self._pending: asyncio.Future[str | None] | None = None
        self._thread = threading.Thread(target=self._serve, name="modelctx-chat-input", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            loop, future = self._wanted.get()
            try:
                raw = self._stream.readline()
            except (OSError, ValueError):
                raw = ""
            line = raw.rstrip("\r\n") if raw else None
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_settle, future, line)

    async def read(self, prompt: str = "") -> str | None:
        if prompt:
            self.console.print(prompt, end="")
        if self._pending is None:  # else a cancelled read left its line to this one
            self._pending = asyncio.get_running_loop().create_future()
            self._wanted.put((asyncio.get_running_loop(), self._pending))
        pending = self._pending
        line = await asyncio.shield(pending)
        self._pending = None
        return line

    async def read_message(self, prompt: str = "") -> str | None:
        return await self.read(prompt)


def _settle(future: asyncio.Future[str | None], line: str | None) -> None:
    if not future.done():
        future.set_result(line)
