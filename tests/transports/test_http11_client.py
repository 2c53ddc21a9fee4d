"""What the HTTP client's one path (``transports/_http11.py``) does beyond plain POSTs:
HTTPS, redirects as httpx follows them, and proxies named in the environment.

Every server here is real, on 127.0.0.1: raw HTTP/1.1 over asyncio (with TLS where it
says so) that records what it received."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from modelctx.client import Client
from modelctx.errors import ConnectionClosed
from modelctx.transports.http_client import HttpClientTransport

DEADLINE = 30.0


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


def ok(request: dict[str, Any], text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()


class Recorder:
    """Answers a POST with an echo result; with ``location``, a POST to ``/mcp`` with
    a redirect there instead. Keeps each request's line and headers (lower-case names)."""

    def __init__(self, location: str | None = None, status: int = 307) -> None:
        self.location = location
        self.status = status
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                fields = {k.lower(): v for k, v in (line.split(": ", 1) for line in head[1:] if line)}
                self.seen.append((head[0], fields))
                body = await reader.readexactly(int(fields.get("content-length", "0")))
                if self.location is not None and head[0].split(" ")[1].endswith("/mcp"):
                    writer.write(
                        b"HTTP/1.1 %d Moved\r\nlocation: %s\r\ncontent-length: 0\r\n\r\n"
                        % (self.status, self.location.encode())
                    )
                else:
                    reply = ok(json.loads(body), "echoed")
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                        % (len(reply), reply)
                    )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(recorder: Recorder, tls: ssl.SSLContext | None = None) -> AsyncIterator[Recorder]:
    server = await asyncio.start_server(recorder.handle, "127.0.0.1", 0, ssl=tls)
    scheme = "https" if tls is not None else "http"
    recorder.url = f"{scheme}://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    try:
        yield recorder
    finally:
        server.close()


async def echo_through(url: str, **options: Any) -> str:
    async with Client(HttpClientTransport(url, **options), mode="2026-07-28", timeout=DEADLINE) as client:
        result = await client.call_tool("echo", {"text": "hi"})
        return str(result.content[0].text)


@pytest.fixture
def no_proxy_env(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


# -- redirects ---------------------------------------------------------------------------------


def test_a_redirect_to_another_origin_does_not_carry_the_authorization_header_or_the_session(no_proxy_env):
    async def main() -> None:
        async with serving(Recorder()) as target, serving(Recorder(location="")) as first:
            first.location = target.url
            sent = {"Authorization": "Bearer secret", "Mcp-Session-Id": "s-123", "X-Trace": "t"}
            assert await echo_through(first.url, headers=sent) == "echoed"
            assert first.seen[0][1]["authorization"] == "Bearer secret"
            assert first.seen[0][1]["mcp-session-id"] == "s-123"
            line, fields = target.seen[0]
            assert line == "POST /mcp HTTP/1.1"  # 307: the same method and body
            assert "authorization" not in fields and "mcp-session-id" not in fields
            assert fields["x-trace"] == "t"

    run(main())


def test_a_redirect_within_the_origin_keeps_the_authorization_header(no_proxy_env):
    async def main() -> None:
        async with serving(Recorder(location="/moved", status=308)) as server:
            assert await echo_through(server.url, headers={"Authorization": "Bearer secret"}) == "echoed"
            assert [line for line, _ in server.seen] == ["POST /mcp HTTP/1.1", "POST /moved HTTP/1.1"]
            assert server.seen[1][1]["authorization"] == "Bearer secret"

    run(main())


def test_credentials_in_the_url_are_sent_as_basic_auth_and_the_path_is_percent_encoded(no_proxy_env):
    async def main() -> None:
        async with serving(Recorder()) as server:
            address = server.url.split("/")[2]
            assert await echo_through(f"http://al%40ce:s3cret@{address}/mcp space/é?q=a b") == "echoed"
            line, fields = server.seen[0]
            assert line == "POST /mcp%20space/%C3%A9?q=a%20b HTTP/1.1"
            assert fields["authorization"] == "Basic YWxAY2U6czNjcmV0"  # al@ce:s3cret
            assert fields["host"] == address

    run(main())


# -- proxies -----------------------------------------------------------------------------------


def test_an_http_url_goes_through_the_http_proxy_the_environment_names(no_proxy_env):
    async def main() -> None:
        async with serving(Recorder()) as proxy:
            address = proxy.url.split("/")[2]
            no_proxy_env.setenv("HTTP_PROXY", f"http://user:p%40ss@{address}")
            assert await echo_through("http://mcp.example.test:8123/mcp") == "echoed"
            line, fields = proxy.seen[0]
            assert line == "POST http://mcp.example.test:8123/mcp HTTP/1.1"  # the absolute form
            assert fields["host"] == "mcp.example.test:8123"
            assert fields["proxy-authorization"] == "Basic dXNlcjpwQHNz"  # user:p@ss

    run(main())


def test_no_proxy_leaves_a_host_out(no_proxy_env):
    async def main() -> None:
        async with serving(Recorder()) as server:
            no_proxy_env.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
            no_proxy_env.setenv("NO_PROXY", "127.0.0.1")
            assert await echo_through(server.url) == "echoed"

    run(main())


def test_an_https_url_the_environment_sends_through_a_proxy_fails_saying_so(no_proxy_env):
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy.example.test:3128")

    async def main() -> None:
        with pytest.raises(ConnectionClosed, match="cannot tunnel HTTPS through a proxy: add the host to NO_PROXY"):
            await echo_through("https://mcp.example.test/mcp")

    run(main())


# -- HTTPS -------------------------------------------------------------------------------------


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=DEADLINE,
    )
    return cert, key


def server_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


def test_https_to_a_server_the_system_trusts(no_proxy_env, certificate):
    no_proxy_env.setenv("SSL_CERT_FILE", str(certificate[0]))  # what the system trusts, here

    async def main() -> None:
        async with serving(Recorder(), tls=server_tls(certificate)) as server:
            assert await echo_through(server.url) == "echoed"

    run(main())


def test_https_to_a_certificate_nobody_trusts_fails_naming_tls(no_proxy_env, certificate):
    async def main() -> None:
        async with serving(Recorder(), tls=server_tls(certificate)) as server:
            with pytest.raises(ConnectionClosed, match="ConnectError: TLS with 127.0.0.1"):
                await echo_through(server.url)

    run(main())
