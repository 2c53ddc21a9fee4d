"""The ``modelctx`` command line (Click; Rich for what people read).

``main`` is the console script. Commands load lazily from the table in ``_group.py``;
exit statuses are the table in ``_exit.py``. ``load_server`` is the ``PATH[:OBJECT]``
loader that ``serve`` (and the inspector's ``dev``) use.
"""

from __future__ import annotations

import sys

from ._exit import ExitCode
from ._load import load_server

__all__ = ["ExitCode", "load_server", "main"]


def main(argv: list[str] | None = None) -> None:
    """Run ``modelctx`` with ``argv`` (default: the process's arguments); exits with a
    status from ``ExitCode``. A usage error is one line on stderr, never a traceback."""
    import click

    from ._group import cli

    try:
        status = cli.main(args=argv, prog_name="modelctx", standalone_mode=False)
    except click.ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `modelctx`: the help, as a usage error
            print(exc.format_message(), file=sys.stderr)
            raise SystemExit(ExitCode.USAGE) from None
        where = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else ""
        hint = f" (see '{where} --help')" if where else ""
        print(f"modelctx: {exc.format_message()}{hint}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except (click.Abort, KeyboardInterrupt):
        print("modelctx: interrupted", file=sys.stderr)
        raise SystemExit(ExitCode.INTERRUPTED) from None
    raise SystemExit(status if isinstance(status, int) else ExitCode.OK)
