"""The server a client command talks to, from its options, and the run of one command.

Every client command takes the same options (``client_options``): the target as
``--url URL`` (``--header K:V``, ``--bearer-env VAR``, ``--oauth``) or ``--stdio
"COMMAND LINE"`` (split as a shell would; ``--env K=V``, ``--cwd``), and ``--json``,
``--timeout``, ``--mode``, ``--accept-elicitation``. ``ClientTarget.from_options``
checks them (a mistake is a ``click.UsageError``, status 2); ``run_client`` connects,
runs the command's work and turns what went wrong into one line and a status from the
table in ``_exit.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ._exit import ExitCode, quiet_stdout, stdout_reader_gone
from ._params import POSITIVE_FLOAT
from ._screen import Screen

if TYPE_CHECKING:
    from ..client import Client, ClientHandlers

__all__ = ["DEFAULT_TIMEOUT", "ClientTarget", "client_options", "exit_for", "run_client"]

#: Seconds each request (and connecting) may take when ``--timeout`` is not given.
DEFAULT_TIMEOUT = 60.0
#: Seconds a person has to sign in in the browser (``--oauth``), as the OAuth provider allows.
OAUTH_SIGN_IN = 300.0

_F = TypeVar("_F", bound=Callable[..., Any])

_OPTIONS = (
    click.option("--url", metavar="URL", help="the server's Streamable HTTP endpoint (http:// or https://)"),
    click.option("--stdio", metavar='"COMMAND LINE"', help="run the server as a subprocess (split as a shell would)"),
    click.option("--header", "headers", multiple=True, metavar="K:V", help="an HTTP header (repeatable; --url)"),
    click.option("--bearer-env", metavar="VAR", help="send the token in environment variable VAR as a bearer (--url)"),
    click.option("--oauth", is_flag=True, help="sign in with OAuth in the browser (--url); tokens kept in "
                 "~/.config/modelctx/tokens.json"),
    click.option("--env", "env", multiple=True, metavar="K=V", help="an environment variable for --stdio (repeatable)"),
    click.option("--cwd", type=click.Path(file_okay=False), help="the working directory of --stdio"),
    click.option("--json", "as_json", is_flag=True, help="print the result object as JSON on stdout, nothing else"),
    click.option("--timeout", type=POSITIVE_FLOAT, metavar="SECONDS",
                 help=f"seconds to connect and for each request (default {DEFAULT_TIMEOUT:g})"),
    click.option("--mode", default="auto", show_default=True, metavar="auto|handshake|VERSION",
                 help="the protocol era: probe (auto), the initialize handshake, or a pinned modern version"),
    click.option("--accept-elicitation", metavar="JSON",
                 help="answer every form the server asks with these values (default: ask on a terminal, "
                 "else decline)"),
)


def client_options(command: _F) -> _F:
    """Add the target, output and auth options every client command shares."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


@dataclass(frozen=True)
class ClientTarget:
    """Where the server is and how to talk to it, checked."""

    url: str | None = None
    argv: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    oauth: bool = False
    mode: str = "auto"
    timeout: float = DEFAULT_TIMEOUT
    timeout_given: bool = False
    as_json: bool = False
    elicitation_answers: Mapping[str, Any] | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ClientTarget:
        """The target the shared options describe; ``click.UsageError`` for a mistake."""
        url, stdio = options["url"], options["stdio"]
        if url is None and stdio is None:
            raise click.UsageError('give the server with --url URL or --stdio "COMMAND LINE"')
        if url is not None and stdio is not None:
            raise click.UsageError("give one server: --url or --stdio, not both")
        if url is not None:
            _refuse_stdio_options(options)
            if not url.startswith(("http://", "https://")):
                raise click.UsageError(f"--url {url!r} is not an http:// or https:// URL")
        else:
            for name, given in (("--header", options["headers"]), ("--bearer-env", options["bearer_env"]),
                                ("--oauth", options["oauth"])):
                if given:
                    raise click.UsageError(f"{name} is for an HTTP server (--url); --stdio takes --env and --cwd")
        timeout = options["timeout"]
        if timeout is not None and timeout <= 0:
            raise click.UsageError(f"--timeout {timeout:g} must be above zero")
        return cls(
            url=url,
            argv=_split(stdio) if stdio is not None else (),
            headers=_headers(options["headers"], options["bearer_env"]),
            env=_pairs(options["env"], "=", "--env", "K=V"),
            cwd=options["cwd"],
            oauth=options["oauth"],
            mode=_mode(options["mode"]),
            timeout=timeout if timeout is not None else DEFAULT_TIMEOUT,
            timeout_given=timeout is not None,
            as_json=options["as_json"],
            elicitation_answers=_answers(options["accept_elicitation"]),
        )

    @property
    def connect_deadline(self) -> float:
        """Seconds to connect: ``--timeout``, but a person signing in with ``--oauth``
        gets the sign-in's own five minutes unless ``--timeout`` says otherwise."""
        return OAUTH_SIGN_IN if self.oauth and not self.timeout_given else self.timeout

    @property
    def shown(self) -> str:
        """The target as the person gave it, for messages."""
        return self.url if self.url is not None else shlex.join(self.argv)

    def client(self, handlers: ClientHandlers, *, tasks: bool = False) -> Client:
        """A ``Client`` for this target (not connected). ``tasks``: declare the tasks
        extension, so a tool that must run as a task can be called (and is polled to its
        result)."""
        from ..client import Client, ClientOptions

        options = ClientOptions(probe_timeout=min(10.0, self.timeout), tasks=tasks)
        return Client(self._transport(), mode=self.mode, timeout=self.timeout, handlers=handlers, options=options)

    def _transport(self) -> Any:
        if self.url is not None:
            from ..transports.http_client import HttpClientTransport

            return HttpClientTransport(self.url, headers=self.headers, auth=_oauth_provider() if self.oauth else None)
        from ..transports.stdio_client import StdioClientTransport

        return StdioClientTransport(list(self.argv), env=self.env or None, cwd=self.cwd,
                                    connect_timeout=min(10.0, self.timeout))


def _refuse_stdio_options(options: Mapping[str, Any]) -> None:
    for name, given in (("--env", options["env"]), ("--cwd", options["cwd"])):
        if given:
            raise click.UsageError(f"{name} is for a server run with --stdio, not --url")


def _split(command_line: str) -> tuple[str, ...]:
    try:
        argv = tuple(shlex.split(command_line))
    except ValueError as exc:
        raise click.UsageError(f"--stdio {command_line!r} cannot be split as a shell would: {exc}") from None
    if not argv:
        raise click.UsageError('--stdio needs a command line, e.g. --stdio "python server.py"')
    return argv


def _pairs(items: tuple[str, ...], separator: str, option: str, form: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, found, value = item.partition(separator)
        if not found or not key.strip():
            raise click.UsageError(f"{option} {item!r} is not {form}")
        pairs[key.strip()] = value.strip() if separator == ":" else value
    return pairs


def _headers(items: tuple[str, ...], bearer_env: str | None) -> dict[str, str]:
    headers = _pairs(items, ":", "--header", "K:V (e.g. --header 'X-Api-Key: abc')")
    if bearer_env is not None:
        token = os.environ.get(bearer_env)
        if not token:
            raise click.UsageError(f"--bearer-env {bearer_env}: the environment variable {bearer_env} is not set")
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _mode(mode: str) -> str:
    from ..protocol import HANDSHAKE_VERSIONS, MODERN_VERSIONS

    if mode in ("auto", "handshake", *MODERN_VERSIONS):
        return mode
    if mode in HANDSHAKE_VERSIONS:
        raise click.UsageError(f"--mode {mode}: handshake-era versions are spoken with --mode handshake")
    raise click.UsageError(f"--mode {mode!r} is not auto, handshake or one of {', '.join(MODERN_VERSIONS)}")


def _answers(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        answers = json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.UsageError(f"--accept-elicitation is not JSON: {exc}") from None
    if not isinstance(answers, dict):
        raise click.UsageError('--accept-elicitation must be a JSON object, e.g. \'{"name": "Ada"}\'')
    return answers


def _oauth_provider() -> Any:
    """The host's OAuth provider (``host/oauth.py``), as for a configured ``{"type": "oauth"}``
    server: the browser sign-in, tokens kept in the host's default token file."""
    try:
        from ..host.oauth import AuthSpec, provider_for, token_store
    except ImportError as exc:
        raise click.UsageError(f"--oauth needs {exc.name or 'joserfc'}: pip install 'modelctx[auth]'") from None
    return provider_for("modelctx", AuthSpec("oauth"), token_store(), None)


def exit_for(exc: BaseException) -> tuple[ExitCode, str]:
    """The status and the one line for what went wrong while talking to the server."""
    from ..errors import (
        HttpStatusError,
        InputRoundsExceeded,
        MalformedResponse,
        MCPError,
        OutputSchemaViolation,
        ProtocolError,
        RequestTimeout,
    )

    if isinstance(exc, (RequestTimeout, TimeoutError)):
        return ExitCode.TIMEOUT, f"timed out: {exc}" if str(exc) else "timed out"
    if isinstance(exc, ProtocolError):
        urls = _elicitation_urls(exc)
        if urls:
            return ExitCode.SERVER_ERROR, (
                f"the server needs you to open {urls} in a browser first, then run the command again "
                f"(error {exc.code}: {exc.message})"
            )
        return ExitCode.SERVER_ERROR, f"the server answered error {exc.code}: {exc.message}"
    if isinstance(exc, (MalformedResponse, OutputSchemaViolation, InputRoundsExceeded)):
        return ExitCode.SERVER_ERROR, str(exc)
    if isinstance(exc, HttpStatusError) and exc.status == 401:
        return ExitCode.UNREACHABLE, f"{exc} (the server wants authorization: add --oauth, or --bearer-env VAR)"
    if isinstance(exc, BrokenPipeError) and stdout_reader_gone():
        quiet_stdout()  # `| head` has what it wanted: end without a word
        return ExitCode.READER_GONE, ""
    if isinstance(exc, (MCPError, OSError)):
        return ExitCode.UNREACHABLE, str(exc) or type(exc).__name__
    raise exc


def _elicitation_urls(exc: Any) -> str:
    """The URLs of a -32042 (URL elicitation required) error's ``data.elicitations``, each
    with its message: what the person must open before the request can succeed."""
    from ..errors import HANDSHAKE_ERA_URL_ELICITATION_REQUIRED

    data = exc.data if exc.code == HANDSHAKE_ERA_URL_ELICITATION_REQUIRED else None
    asked = data.get("elicitations") if isinstance(data, dict) else None
    shown = []
    for item in asked if isinstance(asked, list) else ():
        url = item.get("url") if isinstance(item, dict) else None
        if isinstance(url, str) and url.startswith(("https://", "http://")):
            message = item.get("message")
            shown.append(f"{url} ({message})" if isinstance(message, str) and message else url)
    return " and ".join(shown)


async def _connected(target: ClientTarget, client: Client, screen: Screen) -> None:
    with screen.status(f"connecting to {target.shown}"):
        try:
            async with asyncio.timeout(target.connect_deadline):
                await client.connect()
        except TimeoutError:
            await client.close()
            raise TimeoutError(
                f"no answer from {target.shown} within {target.connect_deadline:g} s (--timeout)"
            ) from None


def run_client(
    target: ClientTarget, work: Callable[[Client, Screen], Awaitable[int]], *, tasks: bool = False
) -> int:
    """Connect to ``target``, run ``work(client, screen)`` and close; the exit status.

    Server requests for input are answered as ``_elicit.py`` says. ``tasks``: the client
    declares the tasks extension (``ClientTarget.client``)."""
    from ._elicit import handlers_for

    screen = Screen(as_json=target.as_json)

    async def session() -> int:
        client = target.client(handlers_for(target.elicitation_answers, screen), tasks=tasks)
        await _connected(target, client, screen)
        try:
            return await work(client, screen)
        finally:
            await client.close()

    try:
        return asyncio.run(session())
    except KeyboardInterrupt:
        screen.error("interrupted")
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - exit_for re-raises what it does not know (a bug to see)
        status, message = exit_for(exc)
        if message:
            screen.error(message)
        return status
