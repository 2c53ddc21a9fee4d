"""The ``modelctx`` command.

``modelctx serve PATH[:OBJECT]`` loads a Python file (or an importable module) and
serves the ``Server`` in it: on stdio by default, on Streamable HTTP with ``--http``
(the URL goes to stderr; stdout stays free). ``modelctx chat --config FILE`` chats with
a model that uses the configured servers (``host/_chat.py``). ``modelctx auth-server``
runs a development OAuth authorization server (``auth/_dev_server.py``). ``modelctx
--version`` prints the version.

Mistakes in the command line (a directory, a file or module that is not there, no
``Server`` in it) end with one line on stderr saying what to do and status 2, not a
traceback. An exception raised by the user's own module while it loads keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, NoReturn

__all__ = ["load_server", "main"]

_USAGE_ERROR = 2  # as argparse exits on a bad command line


class _TargetError(Exception):
    """``PATH[:OBJECT]`` names nothing servable; the message says why and what to do."""


def _fail(message: str) -> NoReturn:
    print(f"modelctx: {message}", file=sys.stderr)
    raise SystemExit(_USAGE_ERROR)


def _load_file(file: Path) -> ModuleType:
    sys.path.insert(0, str(file.parent))  # its sibling modules import as they would under `python FILE`
    spec = importlib.util.spec_from_file_location(file.stem, file)
    if spec is None or spec.loader is None:
        raise _TargetError(f"cannot load {file} as Python; serve a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    return module


def _load_module(name: str) -> ModuleType:
    # The console script does not put the current directory on sys.path (``python -m``
    # does); a module beside the user should import either way.
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
            raise  # the module exists; something it imports does not: show the traceback
        raise _TargetError(
            f"no file or module named {name!r}: give the path of a .py file "
            "(modelctx serve weather.py) or the dotted name of a module importable from here"
        ) from None


def _directory_hint(directory: Path) -> str:
    candidates = sorted(p.name for p in directory.glob("*.py") if not p.name.startswith("_"))[:5]
    hint = f"{directory} is a directory; name the file that holds the Server"
    if candidates:
        hint += f", e.g. modelctx serve {directory / candidates[0]} (files here: {', '.join(candidates)})"
    return hint


def _find_server(module: ModuleType, where: str, attr: str) -> Any:
    from .server import Server

    if attr:
        if not hasattr(module, attr):
            raise _TargetError(f"{where} has no attribute {attr!r}")
        found = getattr(module, attr)
    else:
        named = [getattr(module, n) for n in ("server", "app", "mcp") if isinstance(getattr(module, n, None), Server)]
        servers = named[:1] or [v for v in vars(module).values() if isinstance(v, Server)]
        if not servers:
            raise _TargetError(
                f"{where} has no modelctx Server; create one at module level "
                '(server = Server("name")) or name a factory as ' + f"{where}:FUNCTION"
            )
        if len(servers) != 1:
            raise _TargetError(
                f"found {len(servers)} Server objects in {where}; name one as {where}:NAME"
            )
        found = servers[0]
    if callable(found) and not isinstance(found, Server):
        found = found()  # a factory
    if not isinstance(found, Server):
        raise _TargetError(f"{where}:{attr} is {type(found).__name__}, not a modelctx Server")
    return found


_PACKAGE_DIR = str(Path(__file__).resolve().parent)


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the first frame of the user's code (this module and importlib's
    machinery say nothing the user can act on)."""
    while tb is not None and (
        tb.tb_frame.f_code.co_filename == __file__ or tb.tb_frame.f_code.co_filename.startswith("<frozen ")
    ):
        tb = tb.tb_next
    return tb


def _report_load_error(exc: BaseException) -> NoReturn:
    """The user's module failed while it loaded: say where, in the user's terms.

    A syntax error shows the line and the caret; a ``RegistrationError`` (its message
    names the tool and what to do) one line with the place that registered it; any
    other exception its traceback from the user's first frame. Status 1.
    """
    from .errors import RegistrationError

    if isinstance(exc, SyntaxError):
        print("modelctx: the server file has a syntax error:", file=sys.stderr)
        print("".join(traceback.format_exception_only(exc)), end="", file=sys.stderr)
    elif isinstance(exc, RegistrationError):
        place = ""
        for frame, line in traceback.walk_tb(exc.__traceback__):
            filename = frame.f_code.co_filename
            if filename != __file__ and not filename.startswith(("<frozen ", _PACKAGE_DIR)):
                place = f"{filename}:{line}: "  # the last user frame: the decorator's line
        print(f"modelctx: {place}{exc}", file=sys.stderr)
    else:
        traceback.print_exception(type(exc), exc, _user_frames(exc.__traceback__))
    raise SystemExit(1)


def load_server(target: str) -> Any:
    """The ``Server`` named by ``PATH[:OBJECT]`` or ``module[:OBJECT]``.

    Without ``:OBJECT`` the module's ``server``, ``app`` or ``mcp`` attribute is used,
    else its only ``Server`` instance. Raises ``SystemExit`` (status 2, one line on
    stderr) when the target names nothing servable.
    """
    where, _, attr = target.partition(":")
    path = Path(where)
    try:
        if path.is_dir():
            raise _TargetError(_directory_hint(path))
        if where.endswith(".py") or path.is_file():
            if not path.is_file():
                raise _TargetError(f"no such file: {where}")
            module = _load_file(path.resolve())
        elif "/" in where or "\\" in where:
            raise _TargetError(f"no such file or directory: {where}")
        else:
            module = _load_module(where)
    except _TargetError as exc:
        _fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - the user's module failed: report it, no internals
        _report_load_error(exc)
    try:
        return _find_server(module, where, attr)
    except _TargetError as exc:
        _fail(str(exc))


def _chat(args: argparse.Namespace) -> int:
    try:
        from .host._chat import run_chat
    except ImportError as exc:
        _fail(f"the chat needs {exc.name or 'rich'}: pip install 'modelctx[host]'")
    return run_chat(args.config, provider=args.provider, model=args.model)


def _version() -> str:
    from . import __version__

    return f"modelctx {__version__} (Python {sys.version.split()[0]})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modelctx", description="Model Context Protocol tools")
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="chat with a model that uses the servers of a configuration file")
    chat.add_argument("--config", required=True, metavar="FILE", help='a JSON file with "mcpServers"')
    chat.add_argument("--provider", choices=["anthropic", "openai"], help="default: the one whose API key is set")
    chat.add_argument("--model", help="the model name (default: MODELCTX_MODEL, else the provider's default)")
    serve = commands.add_parser("serve", help="serve a Server from a file or module")
    serve.add_argument("target", help="PATH[:OBJECT] or module[:OBJECT]")
    serve.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    serve.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        help="an Origin allowed besides loopback ones (repeatable)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="a Host header value allowed besides loopback ones (repeatable; for proxies)",
    )
    # The limits an operator may have to tune (SECURITY.md lists them all).
    limits = serve.add_argument_group("HTTP limits")
    limits.add_argument(
        "--max-sessions",
        type=_positive(int),
        default=10_000,
        help="handshake-era sessions held at once; idle ones are evicted first (default 10000)",
    )
    limits.add_argument(
        "--max-body",
        type=_positive(int),
        default=4 * 1024 * 1024,
        help="bytes of a POST body, else 413 (default 4194304, 4 MiB)",
    )
    limits.add_argument(
        "--body-timeout",
        type=_positive(float),
        default=30.0,
        help="seconds for a whole POST body to arrive, else 408 (default 30)",
    )
    limits.add_argument(
        "--header-timeout",
        type=_positive(float),
        default=10.0,
        help="seconds for a request's headers to arrive, else 408 (default 10)",
    )
    _serve_auth_options(serve)
    gateway = commands.add_parser(
        "gateway", help="serve the servers of an mcpServers file as one MCP server (a gateway)"
    )
    gateway.add_argument("--config", required=True, type=Path, help="the mcpServers JSON file")
    gateway.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    gateway.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    gateway.add_argument("--port", type=_port, default=8000, help="HTTP port (default 8000)")
    gateway.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    gateway.add_argument("--name", default="modelctx-gateway", help="the name the gateway gives itself")
    gateway.add_argument(
        "--bare-names",
        action="store_true",
        help="offer a tool under its server's own name when no other server has one of that name",
    )
    _auth_server_parser(commands)
    return parser


#: Where ``serve --auth-introspect`` finds the credentials it introspects with (never on
#: the command line, where other users of the machine could read them).
INTROSPECTION_CLIENT_ID = "MODELCTX_INTROSPECTION_CLIENT_ID"
INTROSPECTION_CLIENT_SECRET = "MODELCTX_INTROSPECTION_CLIENT_SECRET"


def _serve_auth_options(serve: argparse.ArgumentParser) -> None:
    auth = serve.add_argument_group(
        "OAuth (with --http)",
        "Protect the endpoint as an OAuth 2.1 resource server: tokens must come from an --auth-issuer "
        "and name this server (the resource) as their audience.",
    )
    auth.add_argument(
        "--auth-issuer",
        action="append",
        default=[],
        metavar="URL",
        help="an authorization server whose tokens are accepted (repeatable; turns OAuth on)",
    )
    auth.add_argument(
        "--auth-resource",
        metavar="URL",
        help="this server's URL as clients reach it, the tokens' audience (default: the served URL)",
    )
    auth.add_argument(
        "--auth-scopes", type=_scope_list, default=(), metavar="A,B", help="the scopes this server advertises"
    )
    auth.add_argument(
        "--auth-required-scopes",
        type=_scope_list,
        default=(),
        metavar="A,B",
        help="scopes every request's token must hold, else 403 insufficient_scope",
    )
    auth.add_argument(
        "--auth-dpop",
        choices=["off", "allowed", "required"],
        default="off",
        help="DPoP (RFC 9449) sender-constrained tokens: off (bearer only, the default), allowed "
        "(bearer or DPoP), required (DPoP only)",
    )
    keys = auth.add_mutually_exclusive_group()
    keys.add_argument(
        "--auth-jwks-uri",
        metavar="URL",
        help="where the issuer's signing keys are (default: the jwks_uri of its metadata)",
    )
    keys.add_argument(
        "--auth-introspect",
        metavar="URL",
        help="check tokens at this RFC 7662 introspection endpoint instead of as JWTs; the resource "
        f"authenticates there with the client id and secret in ${INTROSPECTION_CLIENT_ID} and "
        f"${INTROSPECTION_CLIENT_SECRET}",
    )


def _scope_list(text: str) -> tuple[str, ...]:
    scopes = tuple(s.strip() for s in text.split(",") if s.strip())
    if not scopes or any(" " in s for s in scopes):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of scope names (a,b)")
    return scopes


def _protected_resource(args: argparse.Namespace, served_url: str) -> Any:
    """The ``ProtectedResource`` the ``--auth-*`` options describe, None without them;
    ``_fail`` for a combination that cannot work."""
    given = [
        name
        for name, value in (
            ("--auth-resource", args.auth_resource),
            ("--auth-scopes", args.auth_scopes),
            ("--auth-required-scopes", args.auth_required_scopes),
            ("--auth-jwks-uri", args.auth_jwks_uri),
            ("--auth-introspect", args.auth_introspect),
            ("--auth-dpop", args.auth_dpop != "off"),
        )
        if value
    ]
    issuers: list[str] = args.auth_issuer
    if not issuers:
        if given:
            _fail(f"{given[0]} needs --auth-issuer URL (the authorization server whose tokens are accepted)")
        return None
    if not args.http:
        _fail("--auth-issuer protects an HTTP endpoint; add --http (a stdio server is not reached over HTTP)")
    if len(set(issuers)) != len(issuers):
        _fail("--auth-issuer names the same issuer twice")
    for issuer in issuers:
        _check_url("--auth-issuer", issuer)
    for option, value in (("--auth-jwks-uri", args.auth_jwks_uri), ("--auth-introspect", args.auth_introspect)):
        if value:
            _check_url(option, value)
    unknown = sorted(set(args.auth_required_scopes) - set(args.auth_scopes)) if args.auth_scopes else []
    if unknown:
        _fail(
            f"--auth-required-scopes names {', '.join(unknown)}, which --auth-scopes does not advertise; "
            "add it there (or leave --auth-scopes out)"
        )
    resource = args.auth_resource or served_url
    if args.auth_resource is None and args.host in ("0.0.0.0", "::", ""):
        _fail(
            f"--host {args.host} serves every address, so {served_url} is not a URL clients use; "
            "give --auth-resource with the URL they reach this server at (the tokens' audience)"
        )
    try:
        from .auth import IntrospectionVerifier, JwtVerifier, ProtectedResource
    except ImportError as exc:
        _fail(f"OAuth needs {exc.name or 'joserfc'}: pip install 'modelctx[auth,http]'")
    try:
        verifier: Any
        if args.auth_introspect:
            verifier = _introspection(args.auth_introspect, resource, issuers, IntrospectionVerifier)
        else:
            if args.auth_jwks_uri and len(issuers) > 1:
                _fail("--auth-jwks-uri names one issuer's keys; with several --auth-issuer leave it out "
                      "(each issuer's keys come from its metadata)")
            verifier = JwtVerifier(issuers, resource, jwks_uri=args.auth_jwks_uri)
        return ProtectedResource(
            resource,
            authorization_servers=issuers,
            verifier=verifier,
            scopes_supported=args.auth_scopes,
            required_scopes=args.auth_required_scopes,
            dpop=args.auth_dpop,
        )
    except ValueError as exc:
        _fail(str(exc))


def _check_url(option: str, url: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        _fail(f"{option} {url!r} is not an absolute http(s) URL (e.g. https://auth.example.com)")


def _introspection(endpoint: str, resource: str, issuers: list[str], kind: Any) -> Any:
    import os

    if len(issuers) > 1:
        _fail("--auth-introspect asks one issuer about its tokens; give a single --auth-issuer with it")
    missing = [name for name in (INTROSPECTION_CLIENT_ID, INTROSPECTION_CLIENT_SECRET) if not os.environ.get(name)]
    if missing:
        _fail(
            f"--auth-introspect needs the resource's client credentials at the introspection endpoint: "
            f"set {' and '.join(missing)}"
        )
    return kind(
        endpoint,
        resource,
        client_id=os.environ[INTROSPECTION_CLIENT_ID],
        client_secret=os.environ[INTROSPECTION_CLIENT_SECRET],
        issuer=issuers[0],
    )


def _auth_server_parser(commands: Any) -> None:
    auth = commands.add_parser(
        "auth-server", help="run a development OAuth 2.1 authorization server (in memory; not for production)"
    )
    auth.add_argument("--host", default="127.0.0.1", help="host to listen on (default 127.0.0.1)")
    auth.add_argument("--port", type=_port, default=9000, help="port to listen on (default 9000)")
    auth.add_argument("--issuer", help="the issuer URL, exactly (default http://HOST:PORT)")
    auth.add_argument(
        "--auto-approve",
        action="store_true",
        help="grant requests whose redirect URI is on loopback without a consent page",
    )
    auth.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="ID[:SECRET]",
        help="pre-register a client (repeatable): public without SECRET; any loopback redirect URI",
    )
    auth.add_argument("--scope", action="append", default=[], help="a scope it grants (repeatable; default any)")
    auth.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="URL",
        help="an MCP server URL it issues tokens for (repeatable; default any)",
    )
    auth.add_argument(
        "--key-file", type=Path, help="keep the signing key here (created 0600) so tokens survive restarts"
    )
    auth.add_argument(
        "--algorithm", choices=["ES256", "RS256"], default="ES256", help="token signature (default ES256)"
    )


def _auth_server(args: argparse.Namespace) -> None:
    try:
        from .auth import DevAuthorizationServer
    except ImportError as exc:
        _fail(f"the authorization server needs {exc.name or 'authlib'}: pip install 'modelctx[auth,http]'")
    issuer = args.issuer or _url(args.host, args.port, "").rstrip("/")
    try:
        server = DevAuthorizationServer(
            issuer,
            auto_approve=args.auto_approve,
            key_file=args.key_file,
            algorithm=args.algorithm,
            scopes=args.scope or None,
            resources=args.resource or None,
        )
    except ValueError as exc:
        _fail(str(exc))
    for client in args.client:
        client_id, _, secret = client.partition(":")
        if not client_id:
            _fail(f"--client {client!r} names no client id; write --client ID or --client ID:SECRET")
        server.register_client(client_id, secret or None)
    print(f"modelctx: development authorization server, issuer {issuer} (not for production)", file=sys.stderr)
    server.run(args.host, args.port, ready_message=f"modelctx: authorization server ready at {issuer}")


def _gateway(args: argparse.Namespace) -> None:
    from .host import Gateway, Host, HostConfigError
    from .host._approval import ApprovalConfigError

    try:
        host = Host.from_file(args.config, authorization_handler=_sign_in_on_stderr)
        gateway = Gateway(host, name=args.name, bare_names=args.bare_names)
    except (HostConfigError, ApprovalConfigError) as exc:
        _fail(str(exc))
    host = gateway.host
    if args.http:
        url = _url(args.host, args.port, args.path)
        gateway.run(
            "http",
            host=args.host,
            port=args.port,
            path=args.path,
            ready_message=f"modelctx: gateway for {len(host.config.servers)} servers on Streamable HTTP at {url}",
        )
    else:
        gateway.run("stdio")


async def _sign_in_on_stderr(server: str, url: str) -> None:
    """The gateway has no window of its own (and stdout may be its MCP stream): it tells
    the person on stderr where to sign in for a server that asks for it."""
    print(
        f"modelctx: server {server!r} needs you to sign in: open this URL in a browser:\n{url}",
        file=sys.stderr,
        flush=True,
    )


def _positive(kind: type[int] | type[float]) -> Any:
    """An argparse type: a number of ``kind`` above zero."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be above zero")
        return value

    return parse


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1-65535)")
    return port


def _url(host: str, port: int, path: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/{path.strip('/')}"


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "chat":
        raise SystemExit(_chat(args))
    if args.command == "serve":
        url = _url(args.host, args.port, args.path)
        protected = _protected_resource(args, url)  # mistakes first, before the user's code runs
        server = load_server(args.target)
        if args.http:
            extra = {"auth": protected} if protected is not None else {}
            server.run(
                "http",
                host=args.host,
                port=args.port,
                ready_message=f"modelctx: serving {server.name!r} on Streamable HTTP at {url}"
                + (f" (OAuth: tokens from {', '.join(protected.authorization_servers)})" if protected else ""),
                path=args.path,
                allowed_origins=args.allow_origin,
                allowed_hosts=args.allow_host,
                max_sessions=args.max_sessions,
                max_body=args.max_body,
                body_timeout=args.body_timeout,
                header_timeout=args.header_timeout,
                **extra,
            )
        else:
            server.run("stdio")
    elif args.command == "gateway":
        _gateway(args)
    elif args.command == "auth-server":
        _auth_server(args)


if __name__ == "__main__":
    main()
