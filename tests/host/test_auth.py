"""A host's HTTP server protected with OAuth: the ``"auth"`` block of the configuration.

Real processes on loopback: ``modelctx auth-server --auto-approve`` and a protected
``modelctx serve``. The test plays the person's browser through the host's
``authorization_handler`` (a GET of the authorization URL, following the redirect to
the host's loopback receiver). Tokens go to the configured ``tokenStore`` (0600), and a
second host run signs in with none of it: the stored token is used.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelctx.host import AllowAll, Host, HostConfig, HostConfigError
from tests.support.auth_processes import dev_auth_server, protected_notes
from tests.support.wire import DEADLINE, async_test, free_port

BACKEND = ("backend", "backend-secret")


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with dev_auth_server("--auto-approve", "--client", ":".join(BACKEND)) as url:
        yield url


@pytest.fixture(scope="module")
def notes(issuer: str) -> Iterator[str]:
    with protected_notes("--auth-issuer", issuer, "--auth-scopes", "notes:read,notes:write") as url:
        yield url


@pytest.fixture(scope="module")
def unscoped_notes(issuer: str) -> Iterator[str]:
    """A protected server that names no scopes: the client asks for its configured ones."""
    with protected_notes("--auth-issuer", issuer) as url:
        yield url


class Browser:
    """The person's browser: opens each authorization URL it is sent to."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, str]] = []

    async def __call__(self, server: str, url: str) -> None:
        self.opened.append((server, url))
        async with httpx.AsyncClient(follow_redirects=True, timeout=DEADLINE) as browser:
            landed = await browser.get(url)  # the dev AS approves and redirects to the host
        assert landed.status_code == 200, landed.text


def config(url: str, auth: dict[str, Any], tokens: Path, **environ: str) -> HostConfig:
    data = {"tokenStore": str(tokens), "mcpServers": {"notes": {"url": url, "auth": auth}}}
    return HostConfig.from_dict(data, environ=environ)


async def whoami(host: Host) -> str:
    assert host.failures == {}
    assert "notes_whoami" in {tool.name for tool in await host.tools()}
    result = await host.call_tool("notes_whoami", {})
    assert not result.is_error
    return str(result.content[0].text)  # type: ignore[union-attr]


@async_test(90)
async def test_the_person_signs_in_once_and_the_next_run_uses_the_stored_token(notes: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    settings = config(notes, {"type": "oauth", "scopes": ["notes:read"], "redirectPort": free_port()}, tokens)

    first_browser = Browser()
    async with Host(settings, approvals=AllowAll(), authorization_handler=first_browser) as host:
        first = await whoami(host)
    second_browser = Browser()
    async with Host(settings, approvals=AllowAll(), authorization_handler=second_browser) as host:
        second = await whoami(host)

    assert first == second == "dev-user notes:read notes:write"  # the server's challenge named both
    assert [server for server, _ in first_browser.opened] == ["notes"]
    assert second_browser.opened == []  # no second authorization
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    [entry] = json.loads(tokens.read_text())["entries"].values()
    assert entry["resource"] == notes and entry["access_token"]


@async_test(60)
async def test_client_credentials_with_the_secret_from_the_environment(unscoped_notes: str, tmp_path: Path) -> None:
    auth = {"type": "client_credentials", "clientId": BACKEND[0], "clientSecret": "${NOTES_SECRET}",
            "scopes": ["notes:write"]}
    settings = config(unscoped_notes, auth, tmp_path / "tokens.json", NOTES_SECRET=BACKEND[1])
    async with Host(settings, approvals=AllowAll()) as host:
        assert await whoami(host) == "backend notes:write"
        written = await host.call_tool("notes_write_note", {"text": "hi"})
    assert not written.is_error and written.content[0].text == "saved: hi"  # type: ignore[union-attr]


@async_test(60)
async def test_without_auth_a_protected_server_fails_saying_it_was_refused(notes: str) -> None:
    async with Host(HostConfig.from_dict({"mcpServers": {"notes": {"url": notes}}}), approvals=AllowAll()) as host:
        assert "401" in host.failures["notes"]


@pytest.mark.parametrize(
    ("auth", "says"),
    [
        ("oauth", "'auth' must be an object such as {\"type\": \"oauth\"}"),
        ({"type": "password"}, "'auth.type' must be 'oauth' or 'client_credentials', not 'password'"),
        ({"type": "oauth", "privateKeyFile": "k.pem"}, "unknown key 'auth.privateKeyFile' for 'oauth'"),
        ({"type": "oauth", "clientSecret": "s"}, "'auth.clientSecret' needs the 'auth.clientId'"),
        ({"type": "oauth", "clientMetadataUrl": "http://app.example/client.json"}, "must be an https:// URL"),
        ({"type": "oauth", "redirectPort": 0}, "'auth.redirectPort' must be a port number (1-65535), not 0"),
        ({"type": "oauth", "scopes": "notes:read"}, "'auth.scopes' must be a list of strings"),
        ({"type": "oauth", "scopes": ["notes read"]}, "scope names without spaces"),
        ({"type": "oauth", "clientId": 7}, "'auth.clientId' must be a non-empty string, not 7"),
        ({"type": "client_credentials", "clientSecret": "s"}, "'auth.clientSecret' needs the 'auth.clientId'"),
        ({"type": "client_credentials", "clientId": "c"}, "needs 'auth.clientSecret'"),
        ({"type": "client_credentials", "clientId": "c", "clientSecret": "${UNSET_SECRET}"},
         "auth.clientSecret uses ${UNSET_SECRET}, which is not set"),
    ],
)
def test_a_bad_auth_block_is_a_config_error_naming_the_server_and_key(auth: object, says: str) -> None:
    with pytest.raises(HostConfigError) as raised:
        HostConfig.from_dict({"mcpServers": {"notes": {"url": "http://127.0.0.1:1/mcp", "auth": auth}}}, environ={})
    assert "server 'notes'" in str(raised.value) and says in str(raised.value)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"command": "python", "auth": {"type": "oauth"}}, "'auth' does not apply to a stdio server"),
        (
            {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x"}, "auth": {"type": "oauth"}},
            "remove 'headers.Authorization'",
        ),
    ],
)
def test_auth_where_it_cannot_apply_is_a_config_error(entry: dict[str, Any], says: str) -> None:
    with pytest.raises(HostConfigError, match="server 'notes'") as raised:
        HostConfig.from_dict({"mcpServers": {"notes": entry}})
    assert says in str(raised.value)


def test_the_token_store_is_a_file_path_defaulting_to_the_users_config() -> None:
    assert HostConfig.from_dict({"tokenStore": "~/tokens.json"}).token_store == os.path.expanduser("~/tokens.json")
    assert HostConfig.from_dict({}).token_store is None
    with pytest.raises(HostConfigError, match="'tokenStore' must be the path of a JSON file"):
        HostConfig.from_dict({"tokenStore": 3})


def test_the_gateway_says_on_stderr_where_to_sign_in(notes: str, tmp_path: Path) -> None:
    settings = {"tokenStore": str(tmp_path / "tokens.json"),
                "mcpServers": {"notes": {"url": notes, "auth": {"type": "oauth", "redirectPort": free_port()},
                                         "approval": "allow"}}}
    (tmp_path / "mcp.json").write_text(json.dumps(settings))
    port = free_port()
    gateway = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "gateway", "--config", str(tmp_path / "mcp.json"), "--http",
         "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert gateway.stderr is not None
        told = gateway.stderr.readline()
        url = gateway.stderr.readline().strip()
        landed = httpx.get(url, follow_redirects=True, timeout=DEADLINE)  # the person opens it
        ready = gateway.stderr.readline()
    finally:
        gateway.terminate()
        gateway.wait(timeout=DEADLINE)
    assert told.strip() == "modelctx: server 'notes' needs you to sign in: open this URL in a browser:"
    assert url.split("?")[0].endswith("/authorize")
    assert landed.status_code == 200
    assert "gateway for 1 servers on Streamable HTTP" in ready
    assert stat.S_IMODE((tmp_path / "tokens.json").stat().st_mode) == 0o600


@async_test(60)
async def test_the_configured_scopes_are_asked_for_when_the_server_names_none(unscoped_notes: str, tmp_path: Path) -> None:
    auth = {"type": "oauth", "scopes": ["notes:write"], "redirectPort": free_port()}
    settings = config(unscoped_notes, auth, tmp_path / "tokens.json")
    async with Host(settings, approvals=AllowAll(), authorization_handler=Browser()) as host:
        assert await whoami(host) == "dev-user notes:write"
