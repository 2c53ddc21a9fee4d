"""``modelctx serve PATH[:OBJECT]``: serve the ``Server`` in a file or module.

On stdio by default; on Streamable HTTP with ``--http`` (the URL goes to stderr, stdout
stays free; the deprecated HTTP+SSE transport beside it at ``/sse`` unless ``--no-sse``), with the HTTP limits an operator may tune and, with ``--auth-issuer``, as
an OAuth 2.1 protected resource. Every option combination that cannot work is one line
on stderr and status 2, checked before the user's code runs.

``--redis URL`` (as ``MODELCTX_REDIS_URL``) shares the subscription bus and the
``requestState`` key (and whatever else Redis carries) with the server's other
processes and replicas. It is allowed without ``--http``: stdio servers started by
several hosts may share a bus too (a resource one of them updates reaches the others'
subscribers).
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import click

from ..transports.workers import check_workers
from ._load import fail, load_server
from ._params import PORT, POSITIVE_FLOAT, POSITIVE_INT, SCOPE_LIST, served_url

__all__ = ["INTROSPECTION_CLIENT_ID", "INTROSPECTION_CLIENT_SECRET", "serve_command"]

#: Where ``serve --auth-introspect`` finds the credentials it introspects with (never on
#: the command line, where other users of the machine could read them).
INTROSPECTION_CLIENT_ID = "MODELCTX_INTROSPECTION_CLIENT_ID"
INTROSPECTION_CLIENT_SECRET = "MODELCTX_INTROSPECTION_CLIENT_SECRET"


@click.command("serve")
@click.argument("target", metavar="PATH[:OBJECT]")
@click.option("--http", is_flag=True, help="serve Streamable HTTP instead of stdio")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP host")
@click.option("--port", type=PORT, default=8000, show_default=True, help="HTTP port")
@click.option("--path", default="/mcp", show_default=True, help="HTTP endpoint path")
@click.option("--workers", type=POSITIVE_INT, default=1, show_default=True,
              help="HTTP worker processes serving the one port (forked; restarted if one dies); "
              "with more than 1, give --redis so sessions and listen streams are shared")
@click.option("--no-sse", is_flag=True,
              help="do not serve the deprecated HTTP+SSE transport (GET /sse, POST /messages) beside the endpoint")
@click.option("--allow-origin", multiple=True, help="an Origin allowed besides loopback ones (repeatable)")
@click.option(
    "--allow-host", multiple=True, help="a Host header value allowed besides loopback ones (repeatable; for proxies)"
)
# The limits an operator may have to tune (SECURITY.md lists them all).
@click.option(
    "--max-sessions", type=POSITIVE_INT, default=10_000, show_default=True,
    help="handshake-era sessions held at once; idle ones are evicted first",
)
@click.option("--max-body", type=POSITIVE_INT, default=4 * 1024 * 1024, show_default=True,
              help="bytes of a POST body, else 413")
@click.option("--body-timeout", type=POSITIVE_FLOAT, default=30.0, show_default=True,
              help="seconds for a whole POST body to arrive, else 408")
@click.option("--header-timeout", type=POSITIVE_FLOAT, default=10.0, show_default=True,
              help="seconds for a request's headers to arrive, else 408")
@click.option("--auth-issuer", multiple=True, metavar="URL",
              help="OAuth: an authorization server whose tokens are accepted (repeatable; turns OAuth on; "
              "needs --http)")
@click.option("--auth-resource", metavar="URL",
              help="this server's URL as clients reach it, the tokens' audience (default: the served URL)")
@click.option("--auth-scopes", type=SCOPE_LIST, default=(), help="the scopes this server advertises")
@click.option("--auth-required-scopes", type=SCOPE_LIST, default=(),
              help="scopes every request's token must hold, else 403 insufficient_scope")
@click.option("--auth-dpop", type=click.Choice(["off", "allowed", "required"]), default="off", show_default=True,
              help="DPoP (RFC 9449) sender-constrained tokens: off (bearer only), allowed (bearer or DPoP), "
              "required (DPoP only)")
@click.option("--auth-jwks-uri", metavar="URL",
              help="where the issuer's signing keys are (default: the jwks_uri of its metadata)")
@click.option("--auth-strict-jwt", is_flag=True,
              help="accept only RFC 9068 JWT access tokens (header typ at+jwt); by default typ JWT or none "
              "is accepted too (never a DPoP proof, an ID token or another JWT type)")
@click.option("--auth-introspect", metavar="URL",
              help="check tokens at this RFC 7662 introspection endpoint instead of as JWTs; the resource "
              f"authenticates there with the client id and secret in ${INTROSPECTION_CLIENT_ID} and "
              f"${INTROSPECTION_CLIENT_SECRET}")
@click.option("--redis", metavar="URL",
              help="the Redis shared with the server's other processes and replicas: subscription bus, "
              "requestState key (redis://HOST:PORT/DB, rediss:// for TLS, unix:///path; default "
              "$MODELCTX_REDIS_URL; overrides the server's own ServerConfig.redis_url)")
def serve_command(target: str, **options: Any) -> None:
    """Serve the Server in a file or module: PATH[:OBJECT] or module[:OBJECT].

    Without :OBJECT the module's `server`, `app` or `mcp` is served, else its only
    Server. OAuth (--auth-*, with --http) protects the endpoint as an OAuth 2.1
    resource server: tokens must come from an --auth-issuer and name this server
    (the resource) as their audience.
    """
    args = SimpleNamespace(target=target, **options)
    args.auth_issuer = list(args.auth_issuer)
    url = served_url(args.host, args.port, args.path)
    protected = _protected_resource(args, url)  # mistakes first, before the user's code runs
    if args.no_sse and not args.http:
        fail("--no-sse turns off an HTTP transport; add --http (stdio serves no HTTP)")
    if args.workers > 1 and not args.http:
        fail("--workers runs HTTP worker processes; add --http (a stdio server has one client)")
    try:
        check_workers(args.workers)
    except ValueError as exc:
        fail(f"--workers: {exc}")
    if args.redis is not None:
        _check_redis_url(args.redis)
        from ..server import REDIS_URL_ENV

        os.environ[REDIS_URL_ENV] = args.redis  # for ServerConfigs the user's code makes
    server = load_server(target)
    if args.redis is not None:
        server.config.redis_url = args.redis
    if not args.http:
        server.run("stdio")
        return
    extra = {"auth": protected} if protected is not None else {}
    oauth = f" (OAuth: tokens from {', '.join(protected.authorization_servers)})" if protected else ""
    server.run(
        "http",
        host=args.host,
        port=args.port,
        ready_message=f"modelctx: serving {server.name!r} on Streamable HTTP at {url}{oauth}",
        path=args.path,
        allowed_origins=list(args.allow_origin),
        allowed_hosts=list(args.allow_host),
        max_sessions=args.max_sessions,
        max_body=args.max_body,
        body_timeout=args.body_timeout,
        header_timeout=args.header_timeout,
        workers=args.workers,
        legacy_sse=not args.no_sse,
        **extra,
    )


def _protected_resource(args: Any, url: str) -> Any:
    """The ``ProtectedResource`` the ``--auth-*`` options describe, None without them;
    ``fail`` for a combination that cannot work."""
    given = _auth_options_given(args)
    issuers: list[str] = args.auth_issuer
    if args.auth_jwks_uri and args.auth_introspect:
        fail("--auth-jwks-uri and --auth-introspect are two ways to check tokens; give one of them")
    if args.auth_strict_jwt and args.auth_introspect:
        fail("--auth-strict-jwt checks JWT access tokens; with --auth-introspect the issuer checks them instead")
    if not issuers:
        if given:
            fail(f"{given[0]} needs --auth-issuer URL (the authorization server whose tokens are accepted)")
        return None
    if not args.http:
        fail("--auth-issuer protects an HTTP endpoint; add --http (a stdio server is not reached over HTTP)")
    _check_auth_values(args, issuers)
    resource = args.auth_resource or url
    if args.auth_resource is None and args.host in ("0.0.0.0", "::", ""):
        fail(
            f"--host {args.host} serves every address, so {url} is not a URL clients use; "
            "give --auth-resource with the URL they reach this server at (the tokens' audience)"
        )
    try:
        from ..auth import IntrospectionVerifier, JwtVerifier, ProtectedResource
    except ImportError as exc:
        fail(f"OAuth needs {exc.name or 'joserfc'}: pip install 'modelctx[auth,http]'")
    try:
        verifier: Any
        if args.auth_introspect:
            verifier = _introspection(args.auth_introspect, resource, issuers, IntrospectionVerifier)
        else:
            if args.auth_jwks_uri and len(issuers) > 1:
                fail("--auth-jwks-uri names one issuer's keys; with several --auth-issuer leave it out "
                      "(each issuer's keys come from its metadata)")
            verifier = JwtVerifier(issuers, resource, jwks_uri=args.auth_jwks_uri, require_at_jwt=args.auth_strict_jwt)
        return ProtectedResource(
            resource,
            authorization_servers=issuers,
            verifier=verifier,
            scopes_supported=args.auth_scopes,
            required_scopes=args.auth_required_scopes,
            dpop=args.auth_dpop,
        )
    except ValueError as exc:
        fail(str(exc))


def _auth_options_given(args: Any) -> list[str]:
    """The ``--auth-*`` options given besides ``--auth-issuer``, as written."""
    return [
        name
        for name, value in (
            ("--auth-resource", args.auth_resource),
            ("--auth-scopes", args.auth_scopes),
            ("--auth-required-scopes", args.auth_required_scopes),
            ("--auth-jwks-uri", args.auth_jwks_uri),
            ("--auth-introspect", args.auth_introspect),
            ("--auth-dpop", args.auth_dpop != "off"),
            ("--auth-strict-jwt", args.auth_strict_jwt),
        )
        if value
    ]


def _check_auth_values(args: Any, issuers: list[str]) -> None:
    """``fail`` for a repeated issuer, a URL that is not one, or a required scope not advertised."""
    if len(set(issuers)) != len(issuers):
        fail("--auth-issuer names the same issuer twice")
    for issuer in issuers:
        _check_url("--auth-issuer", issuer)
    for option, value in (("--auth-jwks-uri", args.auth_jwks_uri), ("--auth-introspect", args.auth_introspect)):
        if value:
            _check_url(option, value)
    unknown = sorted(set(args.auth_required_scopes) - set(args.auth_scopes)) if args.auth_scopes else []
    if unknown:
        fail(
            f"--auth-required-scopes names {', '.join(unknown)}, which --auth-scopes does not advertise; "
            "add it there (or leave --auth-scopes out)"
        )


def _check_redis_url(url: str) -> None:
    """``fail`` unless ``url`` names a Redis the redis package can reach (and is installed)."""
    from urllib.parse import urlsplit

    example = "redis://127.0.0.1:6379/0 (rediss:// for TLS, unix:///path/to/redis.sock)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        fail(f"--redis {url!r} is not a Redis URL ({exc}); e.g. {example}")
    if parts.scheme in ("redis", "rediss"):
        if not parts.hostname:
            fail(f"--redis {url!r} names no host; e.g. {example}")
        if parts.path not in ("", "/") and not parts.path.lstrip("/").isdigit():
            fail(f"--redis {url!r}: the path is the database number, e.g. {example}")
    elif parts.scheme == "unix":
        if not parts.path:
            fail(f"--redis {url!r} names no socket path; e.g. unix:///run/redis/redis.sock")
    else:
        fail(f"--redis {url!r} is not a Redis URL; e.g. {example}")
    try:
        import redis  # noqa: F401
    except ImportError:
        fail("--redis needs the redis package: pip install 'modelctx[redis]'")


def _check_url(option: str, url: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
        fail(f"{option} {url!r} is not an absolute http(s) URL (e.g. https://auth.example.com)")


def _introspection(endpoint: str, resource: str, issuers: list[str], kind: Any) -> Any:
    if len(issuers) > 1:
        fail("--auth-introspect asks one issuer about its tokens; give a single --auth-issuer with it")
    missing = [name for name in (INTROSPECTION_CLIENT_ID, INTROSPECTION_CLIENT_SECRET) if not os.environ.get(name)]
    if missing:
        fail(
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
