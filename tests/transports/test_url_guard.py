"""The SSRF guard (security_best_practices.mdx, "Server-Side Request Forgery").

A URL the client fetches on a server's word (a redirect; a metadata document through
``fetch_json``) is refused before any connection when its scheme is not https, or when
its host resolves to a loopback, private, link-local or non-routable address the
``UrlPolicy`` does not admit, however the address is spelled. The connection goes to
the address that was checked (no second lookup: DNS rebinding).

Every server is real, on loopback. What the client dials and looks up is observed with
the interpreter's audit events (``socket.connect``, ``socket.getaddrinfo``), so a test
can say that a private address was never dialled, not only that an error came back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from modelctx.client import Client, UrlPolicy, UrlRefused, fetch_json
from modelctx.errors import ConnectionClosed, HttpStatusError, MalformedResponse, RequestTimeout
from modelctx.transports.http_client import HttpClientTransport

DEADLINE = 30.0

# -- what the process dials and resolves ---------------------------------------------------------
_watching: list[tuple[str, Any]] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watching is not None and event in ("socket.connect", "socket.getaddrinfo"):
        _watching.append((event, args[1] if event == "socket.connect" else args[0]))


sys.addaudithook(_audit)


@contextlib.contextmanager
def watching() -> Any:
    """Record each ``(event, address-or-host)`` the process connects to or looks up."""
    global _watching
    seen: list[tuple[str, Any]] = []
    _watching = seen
    try:
        yield seen
    finally:
        _watching = None


def dialled(seen: list[tuple[str, Any]]) -> list[str]:
    return [address[0] for event, address in seen if event == "socket.connect"]


def looked_up(seen: list[tuple[str, Any]], host: str) -> int:
    return sum(1 for event, name in seen if event == "socket.getaddrinfo" and name == host)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


# -- servers ------------------------------------------------------------------------------------
Answer = Callable[[str, bytes], tuple[int, dict[str, str], bytes]]


class Served:
    """A raw HTTP/1.1 server: ``answer(path, body) -> (status, headers, body)``; counts connections."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            length = next(
                (int(line[15:]) for line in head.lower().split("\r\n") if line.startswith("content-length: ")), 0
            )
            status, headers, body = self.answer(head.split(" ")[1], await reader.readexactly(length))
            fields = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "content-length": str(len(body))}.items())
            writer.write(f"HTTP/1.1 {status} X\r\n{fields}connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[Served]:
    """``answer`` served on 127.0.0.1 and, on the same port, on ::1."""
    served = Served(answer)
    server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    servers = [server]
    with contextlib.suppress(OSError):  # a host without IPv6 loopback: the IPv4 one is enough
        servers.append(await asyncio.start_server(served.handle, "::1", served.port))
    try:
        yield served
    finally:
        for each in servers:
            each.close()


def document(path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    return 200, {"content-type": "application/json"}, json.dumps({"resource": path}).encode()


def redirect_to(location: str, status: int = 302) -> Answer:
    return lambda path, body: (status, {"location": location}, b"")


def admitting(served: Served, **policy: Any) -> UrlPolicy:
    """A policy that admits the first server (by host and port) and nothing else on loopback."""
    return UrlPolicy(allowed_hosts=(f"127.0.0.1:{served.port}",), **policy)


# Redirect targets on this machine, each spelled another way; ``{port}`` is the target's.
LOOPBACK_SPELLINGS = [
    "http://127.0.0.1:{port}/meta",
    "http://localhost:{port}/meta",
    "http://LocalHost:{port}/meta",
    "http://[::1]:{port}/meta",
    "http://2130706433:{port}/meta",  # 127.0.0.1 as one decimal number
    "http://0177.0.0.1:{port}/meta",  # octal
    "http://127.1:{port}/meta",  # short form
    "http://0x7f.1:{port}/meta",  # hexadecimal
    "http://[::ffff:127.0.0.1]:{port}/meta",  # IPv4-mapped IPv6
    "https://127.0.0.1:{port}/meta",
]
# Elsewhere: never dialled whatever the outcome (nothing listens there).
ELSEWHERE = [
    ("http://10.0.0.1/admin", "10.0.0.1"),
    ("https://10.0.0.1/admin", "10.0.0.1"),
    ("https://192.168.1.1/", "192.168.1.1"),
    ("https://172.16.0.1/", "172.16.0.1"),
    ("https://100.64.0.1/", "100.64.0.1"),  # shared address space (CGNAT)
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),  # cloud metadata
    ("https://169.254.169.254/latest/meta-data/", "169.254.169.254"),
    ("https://2852039166/latest/meta-data/", "169.254.169.254"),  # the same, as one number
    ("https://[::ffff:169.254.169.254]/", "::ffff:169.254.169.254"),
    ("https://[::ffff:a9fe:a9fe]/", "::ffff:169.254.169.254"),
    ("https://[fe80::1]/", "fe80::1"),
    ("https://[fc00::1]/", "fc00::1"),
    ("https://[fd12:3456::1]/", "fd12:3456::1"),
    ("https://[2002:a9fe:a9fe::1]/", "2002:a9fe:a9fe::1"),  # 6to4 around 169.254.169.254
    ("https://[64:ff9b::a00:1]/", "64:ff9b::a00:1"),  # NAT64 around 10.0.0.1
    ("https://0.0.0.0/", "0.0.0.0"),
    ("https://[::]/", "::"),
    ("https://224.0.0.1/", "224.0.0.1"),
    ("https://240.0.0.1/", "240.0.0.1"),
    ("https://255.255.255.255/", "255.255.255.255"),
]


# -- fetch_json: every URL is checked --------------------------------------------------------------
@pytest.mark.parametrize("spelling", LOOPBACK_SPELLINGS)
def test_a_redirect_to_loopback_is_refused_before_the_target_sees_a_connection(spelling):
    async def main() -> None:
        async with serving(document) as target:
            async with serving(redirect_to(spelling.format(port=target.port))) as first:
                with pytest.raises(UrlRefused, match="loopback"):
                    await fetch_json(f"http://127.0.0.1:{first.port}/meta", admitting(first), timeout=DEADLINE)
                assert first.connections == 1
                assert target.connections == 0

    run(main())


@pytest.mark.parametrize(("location", "address"), ELSEWHERE)
def test_a_redirect_to_a_private_link_local_or_reserved_address_is_never_dialled(location, address):
    async def main() -> None:
        async with serving(redirect_to(location)) as first:
            with watching() as seen, pytest.raises(UrlRefused) as refused:
                await fetch_json(f"http://127.0.0.1:{first.port}/meta", admitting(first), timeout=DEADLINE)
            assert dialled(seen) == ["127.0.0.1"]  # the first server only
            assert address in str(refused.value) or "http:// is refused" in str(refused.value)

    run(main())


@pytest.mark.parametrize(
    "spelling", ["http://localhost:{port}/meta", "http://2130706433:{port}/meta", "http://[::1]:{port}/meta"]
)
def test_a_redirect_to_loopback_is_followed_when_the_policy_allows_loopback(spelling):
    async def main() -> None:
        async with serving(document) as target:
            async with serving(redirect_to(spelling.format(port=target.port))) as first:
                url = f"http://127.0.0.1:{first.port}/meta"
                assert await fetch_json(url, UrlPolicy(allow_loopback=True), timeout=DEADLINE) == {"resource": "/meta"}
                assert target.connections == 1

    run(main())


def test_the_first_url_is_checked_too():
    async def main() -> None:
        async with serving(document) as server:
            with watching() as seen, pytest.raises(UrlRefused, match="127.0.0.1, a loopback address"):
                await fetch_json(f"http://127.0.0.1:{server.port}/meta", timeout=DEADLINE)
            assert dialled(seen) == [] and server.connections == 0

    run(main())


def test_the_connection_goes_to_the_address_checked_with_one_lookup_of_the_name():
    """DNS rebinding: a second lookup between the check and the connection could answer
    with another address. The name is resolved once; the socket is dialled by address."""

    async def main() -> None:
        async with serving(document) as server:
            with watching() as seen:
                url = f"http://localhost:{server.port}/meta"
                assert await fetch_json(url, UrlPolicy(allow_loopback=True), timeout=DEADLINE) == {"resource": "/meta"}
            assert looked_up(seen, "localhost") == 1
            assert dialled(seen) in (["127.0.0.1"], ["::1"])

    run(main())


@pytest.mark.parametrize(
    ("url", "policy", "why"),
    [
        ("ftp://example.com/meta", UrlPolicy(), "only https:// URLs"),
        ("file:///etc/passwd", UrlPolicy(), "only https:// URLs"),
        # http:// reaches loopback only; naming a private host does not change that.
        ("http://10.0.0.1/meta", UrlPolicy(allowed_hosts=("10.0.0.1",)), "http:// is refused: use https://"),
        ("http://10.0.0.1/meta", UrlPolicy(allow_private=True), "http:// is refused: use https://"),
    ],
)
def test_schemes_other_than_https_are_refused(url, policy, why):
    async def main() -> None:
        with watching() as seen, pytest.raises(UrlRefused, match=why):
            await fetch_json(url, policy, timeout=DEADLINE)
        assert dialled(seen) == []

    run(main())


def test_a_redirect_to_another_scheme_is_refused():
    async def main() -> None:
        async with serving(redirect_to("file:///etc/passwd")) as first:
            with pytest.raises(UrlRefused, match="only https:// URLs"):
                await fetch_json(f"http://127.0.0.1:{first.port}/meta", admitting(first), timeout=DEADLINE)

    run(main())


def test_allowed_hosts_admit_a_host_by_name_whatever_it_resolves_to():
    async def main() -> None:
        async with serving(document) as server:
            policy = UrlPolicy(allowed_hosts=("localhost",))
            assert await fetch_json(f"http://localhost:{server.port}/x", policy, timeout=DEADLINE) == {"resource": "/x"}

    run(main())


def test_allow_private_does_not_admit_loopback_or_cloud_metadata():
    async def main() -> None:
        for url in ("https://127.0.0.1/", "https://169.254.169.254/"):
            with pytest.raises(UrlRefused):
                await fetch_json(url, UrlPolicy(allow_private=True), timeout=DEADLINE)

    run(main())


# -- fetch_json: what a reply must be ------------------------------------------------------------
def loopback_fetch(served: Served, **options: Any) -> Any:
    url = f"http://127.0.0.1:{served.port}/meta"
    return fetch_json(url, UrlPolicy(allow_loopback=True), **{"timeout": DEADLINE, **options})


def test_fetch_json_refuses_a_reply_that_is_not_json():
    async def main() -> None:
        async with serving(lambda path, body: (200, {"content-type": "text/html"}, b"<html>")) as server:
            with pytest.raises(MalformedResponse, match="text/html, not application/json"):
                await loopback_fetch(server)

    run(main())


def test_fetch_json_refuses_a_reply_larger_than_max_bytes():
    async def main() -> None:
        big = json.dumps({"pad": "x" * 5000}).encode()
        async with serving(lambda path, body: (200, {"content-type": "application/json"}, big)) as server:
            with pytest.raises(MalformedResponse, match="larger than 1000 bytes"):
                await loopback_fetch(server, max_bytes=1000)

    run(main())


@pytest.mark.parametrize("host", ["a" * 70, "a..b", "." * 3], ids=["a label of 70 characters", "an empty label", "dots only"])
def test_a_malformed_host_name_is_a_connection_error_naming_it(host):
    # The IDNA codec refuses these before any lookup: still one of fetch_json's errors.
    with pytest.raises(ConnectionClosed, match="not a well-formed host name"):
        asyncio.run(fetch_json(f"https://{host}/", timeout=5))


def test_fetch_json_reports_an_error_status():
    async def main() -> None:
        async with serving(lambda path, body: (404, {"content-type": "text/plain"}, b"no such document")) as server:
            with pytest.raises(HttpStatusError) as failed:
                await loopback_fetch(server)
            assert failed.value.status == 404 and failed.value.excerpt == "no such document"

    run(main())


def test_fetch_json_gives_up_after_its_timeout():
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; returns when the client hangs up
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(RequestTimeout):
                await fetch_json(f"http://127.0.0.1:{port}/", UrlPolicy(allow_loopback=True), timeout=0.3)
        finally:
            server.close()

    run(main())


# -- the MCP transport: redirects the server chose --------------------------------------------------
def mcp_reply(path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    result = {"content": [{"type": "text", "text": "echoed"}], "resultType": "complete"}
    reply = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": result}
    return 200, {"content-type": "application/json"}, json.dumps(reply).encode()


async def call_through(url: str, **options: Any) -> str:
    transport = HttpClientTransport(url, **options)
    async with Client(transport, mode="2026-07-28", timeout=DEADLINE) as client:
        result = await client.call_tool("echo", {"text": "hi"})
        return str(result.content[0].text)


@pytest.mark.parametrize(
    ("location", "address"),
    [e for e in ELSEWHERE if e[0].startswith("http://")]
    + [
        ("https://10.0.0.1/mcp", "10.0.0.1"),
        ("https://169.254.169.254/mcp", "169.254.169.254"),
    ],
)
def test_the_transport_refuses_a_redirect_out_of_its_urls_zone_before_connecting(location, address):
    """The user chose a loopback URL; a redirect the server chose to a private or
    link-local address fails the request, and that address is never dialled."""

    async def main() -> None:
        async with serving(redirect_to(location, 307)) as first:
            with watching() as seen, pytest.raises(ConnectionClosed, match="UrlRefused"):
                await call_through(f"http://127.0.0.1:{first.port}/mcp")
            assert set(dialled(seen)) == {"127.0.0.1"}

    run(main())


def test_the_transport_follows_a_redirect_within_its_urls_zone():
    """A URL on loopback may redirect to loopback: the user chose that zone."""

    async def main() -> None:
        async with serving(mcp_reply) as target:
            async with serving(redirect_to(f"http://localhost:{target.port}/mcp", 307)) as first:
                assert await call_through(f"http://127.0.0.1:{first.port}/mcp") == "echoed"
                assert target.connections >= 1

    run(main())


def test_the_transport_follows_any_redirect_without_a_policy():
    async def main() -> None:
        async with serving(mcp_reply) as target:
            async with serving(redirect_to(f"http://localhost:{target.port}/mcp", 307)) as first:
                assert await call_through(f"http://127.0.0.1:{first.port}/mcp", url_policy=None) == "echoed"

    run(main())


def test_a_policy_refuses_a_string_for_allowed_hosts():
    with pytest.raises(TypeError, match="tuple of host names"):
        UrlPolicy(allowed_hosts="auth.internal")  # type: ignore[arg-type]


def test_tls_to_a_pinned_address_still_checks_the_certificate_for_the_host_name(tmp_path, monkeypatch):
    """The connection goes to the checked address, and TLS still names the URL's host:
    a certificate for ``localhost`` only is accepted at https://localhost."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=DEADLINE,
    )  # fmt: skip
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)

    async def main() -> None:
        served = Served(document)
        server = await asyncio.start_server(served.handle, "127.0.0.1", 0, ssl=tls)
        port = server.sockets[0].getsockname()[1]
        try:
            with watching() as seen:
                url = f"https://localhost:{port}/meta"
                assert await fetch_json(url, UrlPolicy(allow_loopback=True), timeout=DEADLINE) == {"resource": "/meta"}
            assert dialled(seen)[-1] == "127.0.0.1"  # by address ("::1" first, where localhost has it)
            with pytest.raises(ConnectionClosed, match="TLS"):  # the same server, named by its address
                await fetch_json(f"https://127.0.0.1:{port}/meta", UrlPolicy(allow_loopback=True), timeout=DEADLINE)
        finally:
            server.close()

    run(main())
