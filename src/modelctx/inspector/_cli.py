"""The ``inspect`` and ``dev`` commands, as Click command objects the CLI loads lazily."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import click

from ._session import InspectorSession
from ._targets import transport_factory

__all__ = ["dev_command", "inspect_command"]

_port = click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="port on 127.0.0.1 (0: any free port)"
)
_no_browser = click.option("--no-browser", is_flag=True, help="print the URL only; do not open a browser")
_timeout = click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True, help="seconds per request"
)


def _announce(url: str) -> None:
    click.echo(f"Inspector: {url}", err=False)
    click.echo("(the URL carries the access token; press Ctrl+C to stop)", err=True)


def _run(session: InspectorSession, port: int, no_browser: bool, watch: Path | None = None) -> None:
    try:
        # The web stack loads only when a page is served, so listing commands stays cheap.
        from ._run import serve_inspector, watch_and_restart
    except ImportError as exc:
        raise click.ClickException(f"the inspector needs {exc.name}: pip install \"modelctx[inspector]\"") from exc
    background = partial(watch_and_restart, watch) if watch is not None else None
    try:
        asyncio.run(
            serve_inspector(session, port=port, open_browser=not no_browser, announce=_announce, background=background)
        )
    except OSError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:
        pass


@click.command("inspect")
@click.argument("target", required=False)
@click.option("--stdio", "stdio", metavar="'COMMAND LINE'", help="run this command and speak MCP on its stdio")
@_port
@_no_browser
@_timeout
def inspect_command(target: str | None, stdio: str | None, port: int, no_browser: bool, timeout: float) -> None:
    """Open a web inspector on an MCP server.

    TARGET is an http(s):// URL, a server file (server.py[:OBJECT]) or module:OBJECT
    (served with `modelctx serve TARGET` on stdio); or give --stdio 'COMMAND LINE'.
    """
    if (target is None) == (stdio is None):
        raise click.UsageError("give exactly one of TARGET or --stdio 'COMMAND LINE'")
    try:
        make_transport = transport_factory(target, stdio)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    session = InspectorSession(make_transport, target=target or stdio or "", timeout=timeout)
    _run(session, port, no_browser)


@click.command("dev")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_port
@_no_browser
@_timeout
def dev_command(file: Path, port: int, no_browser: bool, timeout: float) -> None:
    """Serve a server file and open the inspector on it; restart when the file changes."""
    target = str(file)
    session = InspectorSession(transport_factory(target, None), target=target, timeout=timeout)
    _run(session, port, no_browser, watch=file.resolve())
