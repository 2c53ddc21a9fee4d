"""What a client command shows: results on stdout, everything else on stderr.

With ``--json`` stdout carries the result object as JSON and nothing else. Without it,
people read Rich tables and text (plain text when Rich is not installed; the server's
text is never read as Rich markup). The spinner, with the server's progress messages,
is drawn on stderr only when stderr is a terminal: piped output has none.

What a server sends is shown on a terminal with its control characters escaped
(``\\x1b`` instead of ESC): a server must not be able to recolour, retitle or clear the
user's terminal, nor write to the clipboard through OSC 52. Piped output stays as sent.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["Screen", "for_terminal"]

# C0 controls but tab, newline and a CR ending a CRLF line (a lone CR would let text
# overwrite the line before it), DEL, C1 controls (8-bit CSI/OSC), and the bidi
# overrides and isolates that make a terminal show text in another order than it is.
_UNSAFE_FOR_TERMINAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)")


def for_terminal(text: str) -> str:
    """``text`` with every control character a terminal would act on written as an escape."""
    return _UNSAFE_FOR_TERMINAL.sub(lambda found: repr(found.group())[1:-1], text)


def _for(stream: Any, text: str) -> str:
    return for_terminal(text) if stream.isatty() else text


def _rich_available() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


class Screen:
    """The terminal of one command run."""

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json
        self._rich = _rich_available()
        self._out: Any = None  # rich Consoles, made on first use
        self._err: Any = None
        self._status: Any = None

    # -- stdout --------------------------------------------------------------------------
    def json(self, value: Any) -> None:
        """``value`` (a wire struct or plain data) as indented JSON on stdout."""
        import msgspec

        print(json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=False), flush=True)

    def json_line(self, value: Any) -> None:
        """``value`` as one line of JSON (JSON Lines: one event a line)."""
        print(json.dumps(value, ensure_ascii=False), flush=True)

    def text(self, text: str) -> None:
        """Text for people, never read as markup; on a terminal, control characters escaped."""
        print(_for(sys.stdout, text), flush=True)

    def table(
        self, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], *, header: bool = True
    ) -> None:
        """A table for people: a Rich table, or aligned plain text without Rich."""
        # Tables are for people (--json is for programs): their cells are always escaped.
        rows = [[for_terminal(str(cell)) for cell in row] for row in rows]
        title = for_terminal(title)
        # No cell is cut inside a word (a piped table is 80 columns wide): a tool's name
        # must stay one string to copy or grep. Each column is at least as wide as its
        # longest word; when those do not fit, the table is plain aligned text instead.
        longest = [
            max((len(word) for cell in (column, *(row[i] for row in rows if i < len(row))) for word in cell.split()),
                default=1)
            for i, column in enumerate(columns)
        ]
        if not self._rich or sum(longest) + 3 * len(columns) + 1 > self._stdout().width:
            print(title)
            widths = [max(len(str(cell)) for cell in column) for column in zip(columns, *rows, strict=False)]
            for row in ((columns, *rows) if header else rows):
                print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip())
            return
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left", show_header=header)
        for index, (column, width) in enumerate(zip(columns, longest, strict=True)):
            # A column of single words (names, hints) is never wrapped: Rich narrows the
            # widest wrappable column first, and would fold a name to re-widen it later.
            words = all(len(str(row[index]).split()) <= 1 for row in rows if index < len(row))
            table.add_column(column, overflow="fold", min_width=width, no_wrap=words)
        for row in rows:
            table.add_row(*(Text(str(cell)) for cell in row))
        self._stdout().print(table)

    def _stdout(self) -> Any:
        if self._out is None:
            from rich.console import Console

            class _Stdout(Console):
                # Rich exits with status 1 on a broken pipe (its documented default);
                # the command's own handling maps it to an exit status (_exit.py).
                def on_broken_pipe(self) -> None:
                    raise BrokenPipeError("stdout's reader is gone")

            self._out = _Stdout(highlight=False)
        return self._out

    # -- stderr --------------------------------------------------------------------------
    def error(self, message: str) -> None:
        """One line on stderr: what went wrong."""
        with self.paused():
            print(f"modelctx: {_for(sys.stderr, message)}", file=sys.stderr, flush=True)

    note = error  # an informational line goes to the same place, in the same form

    @property
    def interactive(self) -> bool:
        """A person is at a terminal to answer questions (stdin and stderr are TTYs)."""
        return sys.stdin.isatty() and sys.stderr.isatty()

    @contextmanager
    def status(self, message: str) -> Iterator[None]:
        """A spinner with ``message`` on stderr while the block runs (a terminal only)."""
        if not (self._rich and sys.stderr.isatty()):
            yield
            return
        from rich.text import Text

        with self._stderr().status(Text(message)) as status:
            self._status = status
            try:
                yield
            finally:
                self._status = None

    def progress(self, message: str) -> None:
        """Show ``message`` on the running spinner, if there is one."""
        if self._status is not None:
            from rich.text import Text

            self._status.update(Text(for_terminal(message)))

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the spinner while the block writes to stderr or asks a question."""
        status = self._status
        if status is None:
            yield
            return
        status.stop()
        try:
            yield
        finally:
            status.start()

    def _stderr(self) -> Any:
        if self._err is None:
            from rich.console import Console

            self._err = Console(stderr=True, highlight=False)
        return self._err

    def console_for_questions(self) -> Any:
        """The stderr Rich console prompts are drawn on (stdout may be a pipe)."""
        return self._stderr()
