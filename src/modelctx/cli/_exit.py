"""The exit statuses of ``modelctx``, in one table that the code, ``--help`` and the docs share.

Scripts rely on them: a status names what happened, never how it was printed.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["EXIT_TABLE", "ExitCode", "exit_codes_help", "quiet_stdout", "stdout_reader_gone"]


class ExitCode(IntEnum):
    OK = 0
    TOOL_ERROR = 1
    USAGE = 2
    UNREACHABLE = 3
    SERVER_ERROR = 4
    TIMEOUT = 5
    INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
    READER_GONE = 141  # 128 + SIGPIPE, as shells report a writer whose reader left (`| head`)


#: Each status with what it means to a script.
EXIT_TABLE: tuple[tuple[ExitCode, str], ...] = (
    (ExitCode.OK, "success"),
    (ExitCode.TOOL_ERROR, "the tool returned isError: true (its result is still printed)"),
    (ExitCode.USAGE, "usage error: a bad option, argument or target (one line on stderr)"),
    (ExitCode.UNREACHABLE, "could not connect, or the server process died"),
    (ExitCode.SERVER_ERROR, "the server answered a JSON-RPC error (code and message on stderr) or a reply "
     "that breaks the spec"),
    (ExitCode.TIMEOUT, "timed out (--timeout)"),
    (ExitCode.INTERRUPTED, "interrupted (Ctrl-C)"),
    (ExitCode.READER_GONE, "stdout's reader stopped reading (e.g. `| head`); nothing more is printed"),
)


def quiet_stdout() -> None:
    """Point stdout at /dev/null: its reader left, and nothing more (not even the
    interpreter's flush at exit) should be written into the closed pipe."""
    import os
    import sys

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reading end is closed (``modelctx ... | head`` once
    head has its lines): a broken pipe there is the reader's choice, not a failure of the
    server, whose own pipes also raise BrokenPipeError when it dies."""
    import select
    import sys

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def exit_codes_help() -> str:
    """The table as the epilog of ``--help`` (Click keeps lines after a ``\\b`` line as written)."""
    lines = ["\b", "Exit status:"]
    lines += [f"  {int(code):>3}  {meaning}" for code, meaning in EXIT_TABLE]
    return "\n".join(lines)
