"""``modelctx chat``, ``modelctx gateway`` and ``modelctx auth-server``: the commands that
run a host over a configuration file, or the development authorization server."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ._load import fail
from ._params import PORT, served_url

__all__ = ["auth_server_command", "chat_command", "gateway_command"]


_CHAT_EXITS = """\b
Exit status with -p (the table of `modelctx --help`, read for one question):
    0  answered
    1  stopped after the model's most turns without an answer (the notice is printed)
    2  usage error: a bad option, no model API key, a config or --resume file that cannot be read
    4  the model's API answered an error (the message on stderr)
  130  interrupted (Ctrl-C)"""


@click.command("chat", epilog=_CHAT_EXITS)
@click.option("--config", required=True, metavar="FILE", help='a JSON file with "mcpServers"')
@click.option("--provider", type=click.Choice(["anthropic", "openai"]),
              help="default: the one whose API key is set")
@click.option("--model", help="the model name (default: MODELCTX_MODEL, else the provider's default)")
@click.option("-p", "--prompt", "question", metavar="TEXT",
              help="ask this one question, print the answer and exit (no one is asked to approve)")
@click.option("--allow", multiple=True, metavar="GLOB",
              help="with -p: let tools that ask for approval run when GLOB matches SERVER/TOOL or SERVER_TOOL "
                   "(repeatable); any other is denied")
@click.option("--json", "as_json", is_flag=True, help="with -p: print the answer and the tool calls as JSON")
@click.option("--resume", metavar="FILE", help="go on with a conversation saved by /save FILE")
def chat_command(
    config: str,
    provider: str | None,
    model: str | None,
    question: str | None,
    allow: tuple[str, ...],
    as_json: bool,
    resume: str | None,
) -> int:
    """Chat with a model that uses the servers of a configuration file; or, with -p,
    answer one question and exit.

    \b
    Environment:
      ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL   Anthropic (BASE_URL: another endpoint)
      OPENAI_API_KEY, OPENAI_BASE_URL         an OpenAI-compatible API (e.g. a local server)
      MODELCTX_MODEL                          the model name (--model wins)
    With both keys set, Anthropic is used unless the model name is OpenAI's.
    """
    if question is None and (allow or as_json):
        fail("--allow and --json go with -p TEXT (one question, no one asked); the chat asks you instead")
    if question is not None and not question.strip():
        fail("-p needs a question: -p 'what is the weather in Oslo?'")
    try:
        from ..host.chat import ChatOptions, run_chat
    except ImportError as exc:
        fail(f"the chat needs {exc.name or 'rich'}: pip install 'modelctx[host]'")
    options = ChatOptions(provider, model, question, allow, as_json, resume)
    return run_chat(config, options=options)


@click.command("gateway")
@click.option("--config", required=True, type=click.Path(path_type=Path), help="the mcpServers JSON file")
@click.option("--http", is_flag=True, help="serve Streamable HTTP instead of stdio")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP host")
@click.option("--port", type=PORT, default=8000, show_default=True, help="HTTP port")
@click.option("--path", default="/mcp", show_default=True, help="HTTP endpoint path")
@click.option("--name", default="modelctx-gateway", show_default=True, help="the name the gateway gives itself")
@click.option("--no-sse", is_flag=True,
              help="do not serve the deprecated HTTP+SSE transport (GET /sse, POST /messages) beside the endpoint")
@click.option("--bare-names", is_flag=True,
              help="offer a tool under its server's own name when no other server has one of that name")
def gateway_command(
    config: Path, http: bool, host: str, port: int, path: str, name: str, no_sse: bool, bare_names: bool
) -> None:
    """Serve the servers of an mcpServers file as one MCP server (a gateway)."""
    from ..host import ApprovalConfigError, Gateway, Host, HostConfigError

    if no_sse and not http:  # before any upstream starts, as `modelctx serve` says it
        fail("--no-sse turns off an HTTP transport; add --http (stdio serves no HTTP)")
    try:
        gateway = Gateway(
            Host.from_file(config, authorization_handler=_sign_in_on_stderr), name=name, bare_names=bare_names
        )
    except (HostConfigError, ApprovalConfigError) as exc:
        fail(str(exc))
    if not http:
        gateway.run("stdio")
        return
    servers = len(gateway.host.config.servers)
    gateway.run(
        "http",
        host=host,
        port=port,
        path=path,
        legacy_sse=not no_sse,
        ready_message=f"modelctx: gateway for {servers} servers on Streamable HTTP at {served_url(host, port, path)}",
    )


async def _sign_in_on_stderr(server: str, url: str) -> None:
    """The gateway has no window of its own (and stdout may be its MCP stream): it tells
    the person on stderr where to sign in for a server that asks for it."""
    print(
        f"modelctx: server {server!r} needs you to sign in: open this URL in a browser:\n{url}",
        file=sys.stderr,
        flush=True,
    )


@click.command("auth-server")
@click.option("--host", default="127.0.0.1", show_default=True, help="host to listen on")
@click.option("--port", type=PORT, default=9000, show_default=True, help="port to listen on")
@click.option("--issuer", help="the issuer URL, exactly (default http://HOST:PORT)")
@click.option("--auto-approve", is_flag=True,
              help="grant requests whose redirect URI is on loopback without a consent page")
@click.option("--client", "clients", multiple=True, metavar="ID[:SECRET]",
              help="pre-register a client (repeatable): public without SECRET; any loopback redirect URI")
@click.option("--scope", "scopes", multiple=True, help="a scope it grants (repeatable; default any)")
@click.option("--resource", "resources", multiple=True, metavar="URL",
              help="an MCP server URL it issues tokens for (repeatable; default any)")
@click.option("--key-file", type=click.Path(path_type=Path),
              help="keep the signing key here (created 0600) so tokens survive restarts")
@click.option("--algorithm", type=click.Choice(["ES256", "RS256"]), default="ES256", show_default=True,
              help="token signature")
@click.option("--token-ttl", type=click.IntRange(1, 86400), default=3600, show_default=True,
              help="seconds an access token lives")
@click.option("--no-registration", is_flag=True,
              help="refuse dynamic registration and metadata documents: only --client clients exist "
                   "(an identity provider such as GitHub's, for trying an OAuth proxy)")
def auth_server_command(
    host: str,
    port: int,
    issuer: str | None,
    auto_approve: bool,
    clients: tuple[str, ...],
    scopes: tuple[str, ...],
    resources: tuple[str, ...],
    key_file: Path | None,
    algorithm: str,
    token_ttl: int,
    no_registration: bool,
) -> None:
    """Run a development OAuth 2.1 authorization server (in memory; not for production)."""
    try:
        from ..auth import DevAuthorizationServer
    except ImportError as exc:
        fail(f"the authorization server needs {exc.name or 'authlib'}: pip install 'modelctx[auth,http]'")
    issuer = issuer or served_url(host, port, "").rstrip("/")
    try:
        server = DevAuthorizationServer(
            issuer,
            auto_approve=auto_approve,
            key_file=key_file,
            algorithm=algorithm,
            scopes=list(scopes) or None,
            resources=list(resources) or None,
            registration=not no_registration,
            access_token_ttl=token_ttl,
        )
    except ValueError as exc:
        fail(str(exc))
    for client in clients:
        client_id, _, secret = client.partition(":")
        if not client_id:
            fail(f"--client {client!r} names no client id; write --client ID or --client ID:SECRET")
        server.register_client(client_id, secret or None)
    print(f"modelctx: development authorization server, issuer {issuer} (not for production)", file=sys.stderr)
    server.run(host, port, ready_message=f"modelctx: authorization server ready at {issuer}")
