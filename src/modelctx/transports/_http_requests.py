"""A lean HTTP/1.1 client, the request part: URLs, redirects, proxies, TLS.

``Http11Client`` is the only way the Streamable HTTP client transport talks HTTP. Over
the pools of ``_http11`` it adds what a URL asks for:

* ``https://`` with the system's certificate store (``ssl.create_default_context``,
  which honours ``SSL_CERT_FILE``); credentials in the URL as ``Basic`` auth;
* redirects followed as browsers and httpx follow them (307 and 308 repeat the
  request; 301, 302 and 303 turn a POST into a GET; ``Authorization`` and ``Cookie``
  are not carried to another origin), at most 20 in a row;
* with a ``UrlPolicy``, the SSRF guard (``_url_guard``) on every URL the server chose:
  each redirect target (unless it is the first URL's own origin) is resolved, checked
  and connected to at the checked addresses. A redirect may lead back into the zones
  of the first URL (the user chose it: a loopback URL may redirect to loopback) and
  elsewhere only where the policy admits. ``check_first`` checks the first URL too;
* ``http://`` through a proxy named in the environment (``HTTP_PROXY``, ``ALL_PROXY``,
  minus ``NO_PROXY``); an ``https://`` URL the environment sends through a proxy is
  refused with an error that says so (no CONNECT tunnelling).
"""

from __future__ import annotations

import base64
import re
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping

from ._http11 import (
    ConnectError,
    Http11Pool,
    LocalProtocolError,
    Response,
    TooManyRedirects,
)
from ._url_guard import NO_TRUST, Trust, UrlPolicy, admit, check_scheme, trust_of

__all__ = ["Http11Client"]

_MAX_REDIRECTS = 20  # as httpx
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what h11 refuses in a header value
_NO_BODY = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
# Never carried to another origin: what names the user (Authorization, Cookie) and what
# names their handshake-era session (a session id is a bearer of that session's state).
_CREDENTIALS = frozenset({"authorization", "cookie", "mcp-session-id"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"  # RFC 3986 pchar and "/": left as they are


class _Target:
    """A URL split once into what a request needs (``urllib.parse``, cached by the client).

    The path and query are percent-encoded where they are not ASCII-safe, the host
    IDNA-encoded; ``user:password@`` becomes ``basic_auth`` (as httpx reads it)."""

    __slots__ = ("basic_auth", "host", "netloc", "origin", "path", "port", "proxied_path", "scheme", "url")

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise LocalProtocolError(f"not an http:// or https:// URL with a host: {hide_password(url)!r}")
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
            host = parts.hostname if parts.hostname.isascii() else parts.hostname.encode("idna").decode("ascii")
        except (ValueError, UnicodeError) as exc:  # a port that is not a number, a host IDNA refuses
            raise LocalProtocolError(f"{hide_password(url)!r}: {exc}") from None
        self.url = url
        self.scheme = scheme
        self.host = host
        self.port = port
        shown = f"[{host}]" if ":" in host else host
        self.netloc = shown if port == _DEFAULT_PORTS[scheme] else f"{shown}:{port}"
        self.origin = (scheme, host, port)
        self.path = urllib.parse.quote(parts.path or "/", safe=_PATH_SAFE)
        if parts.query:
            self.path += "?" + urllib.parse.quote(parts.query, safe=_PATH_SAFE + "?")
        self.basic_auth = _basic(parts.username, parts.password) if parts.username is not None else None
        self.proxied_path = f"{scheme}://{self.netloc}{self.path}"  # the absolute form, for a proxy


class Http11Client:
    """Requests over pooled keep-alive HTTP/1.1 connections (see the module doc).

    ``default_headers`` go on every request unless the request names them too. There
    is no cap on connections in use; at most ``max_idle`` per origin stay open idle.
    ``url_policy``: the SSRF guard on redirects (None: every redirect is followed).
    """

    def __init__(
        self,
        *,
        max_idle: int = 32,
        default_headers: Mapping[str, str] | None = None,
        url_policy: UrlPolicy | None = None,
    ) -> None:
        self.max_idle = max_idle
        self.default_headers = {k.lower(): v for k, v in (default_headers or {}).items()}
        self.url_policy = url_policy
        self._pools: dict[tuple[str, str, int], Http11Pool] = {}
        # Pools to checked addresses, by origin and by what the first URL vouched for.
        self._checked: dict[tuple[tuple[str, str, int], Trust], Http11Pool] = {}
        self._trust: dict[tuple[str, str, int], Trust] = {}
        self._targets: dict[str, _Target] = {}
        self._names: set[str] = set()  # header names already checked to be tokens
        self._proxies = {k: v for k, v in urllib.request.getproxies().items() if k in ("http", "https", "all")}
        self._tls: ssl.SSLContext | None = None
        self._closed = False

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        write_timeout: float | None,
        check_first: bool = False,
    ) -> Response:
        """Send a request, following redirects; the response once its headers are in.

        ``headers`` have lower-case names. The caller must ``release()`` the response.
        With a ``url_policy``, redirect targets are checked (``check_first``: ``url``
        too) and ``UrlRefused`` raised before connecting to one the policy refuses."""
        merged = {**self.default_headers, **headers}
        first = self._target(url)
        for _ in range(_MAX_REDIRECTS + 1):
            target = self._target(url)
            if target.basic_auth is not None and "authorization" not in merged:
                merged["authorization"] = target.basic_auth
            if self.url_policy is None or (target.origin == first.origin and not check_first):
                pool = self._route(target)
            else:
                trust = NO_TRUST if check_first else await self._trust_in(first)
                pool = await self._checked_route(target, self.url_policy, trust)
            data = self._serialize(method, target, pool, merged, body)
            response = await pool.request(
                data, connect_timeout=connect_timeout, read_timeout=read_timeout, write_timeout=write_timeout
            )
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or location is None:
                return response
            response.release()
            next_url = urllib.parse.urljoin(url, location)
            if self.url_policy is not None:
                check_scheme(hide_password(next_url))
            method, body, merged = _redirected(response.status_code, method, body, merged, target, self._target(next_url))
            url = next_url
        raise TooManyRedirects(f"more than {_MAX_REDIRECTS} redirects, the last to {hide_password(url)}")

    def close(self) -> None:
        """Close idle connections; those in use close when their responses are released."""
        self._closed = True
        pools, self._pools = self._pools, {}
        checked, self._checked = self._checked, {}
        for pool in (*pools.values(), *checked.values()):
            pool.close()

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) > 64:  # redirects to ever new URLs must not grow this
                self._targets.clear()
            target = self._targets[url] = _Target(url)
        return target

    def _route(self, target: _Target) -> Http11Pool:
        """The pool of connections to send a request for ``target`` through."""
        pool = self._pools.get(target.origin)
        if pool is None:
            pool = self._pools[target.origin] = self._new_pool(target, ())
        return pool

    async def _checked_route(self, target: _Target, policy: UrlPolicy, trust: Trust) -> Http11Pool:
        """The pool for a URL the server chose: its addresses checked once, then pinned."""
        key = (target.origin, trust)
        pool = self._checked.get(key)
        if pool is None:
            shown = hide_password(target.url)
            addresses = await admit(shown, target.scheme, target.host, target.port, policy, trust)
            pool = self._checked.get(key) or self._new_pool(target, addresses)
            self._checked[key] = pool
        return pool

    async def _trust_in(self, first: _Target) -> Trust:
        trust = self._trust.get(first.origin)
        if trust is None:
            assert self.url_policy is not None
            timeout = self.url_policy.resolve_timeout
            trust = self._trust[first.origin] = await trust_of(first.scheme, first.host, first.port, timeout)
        return trust

    def _new_pool(self, target: _Target, addresses: tuple[str, ...]) -> Http11Pool:
        if self._closed:
            raise ConnectError("the HTTP client is closed")
        tls = self._tls_context() if target.scheme == "https" else None
        proxy = self._proxy_for(target)
        if proxy is None:
            pool = Http11Pool(target.host, target.port, tls=tls, max_idle=self.max_idle, addresses=addresses)
        elif target.scheme == "https":
            raise ConnectError(
                f"the environment sends {target.url} through the proxy {hide_password(proxy)}, and "
                "modelctx's HTTP client cannot tunnel HTTPS through a proxy: add the host to NO_PROXY"
            )
        else:
            pool = _proxy_pool(proxy, self.max_idle)
        return pool

    def _proxy_for(self, target: _Target) -> str | None:
        proxy = self._proxies.get(target.scheme) or self._proxies.get("all")
        if not proxy or urllib.request.proxy_bypass(target.host):
            return None
        return proxy

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _serialize(self, method: str, target: _Target, pool: Http11Pool, headers: dict[str, str], body: bytes) -> bytes:
        """The request's bytes; ``LocalProtocolError`` for a header HTTP/1.1 cannot carry
        (a value with CR or LF could otherwise smuggle in a header of its own)."""
        names = self._names
        if not names.issuperset(headers):
            for name in headers:
                if not _TOKEN.fullmatch(name):
                    raise LocalProtocolError(f"Illegal header name {name!r}")
            names.update(headers)
        values = "\t".join(headers.values())
        if not values.isascii() or _BAD_VALUE.search(values):
            bad = next(v for v in headers.values() if not v.isascii() or _BAD_VALUE.search(v))
            raise LocalProtocolError(f"Illegal header value {bad!r}: only visible ASCII, spaces and tabs")
        headers.pop("host", None)  # ours names the URL's host (the caller's dict is a copy)
        length = f"content-length: {len(body)}\r\n" if body or method not in _NO_BODY else ""
        fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        head = f"{method} {target.proxied_path if pool.proxy else target.path} HTTP/1.1\r\nhost: {target.netloc}\r\n{pool.extra}{fields}{length}\r\n"
        return head.encode("ascii") + body


def _redirected(
    status: int, method: str, body: bytes, headers: dict[str, str], source: _Target, target: _Target
) -> tuple[str, bytes, dict[str, str]]:
    """The next request after a redirect, as browsers and httpx make it."""
    if status == 303 and method != "HEAD" or status in (301, 302) and method == "POST":
        method, body = "GET", b""
        headers = {k: v for k, v in headers.items() if k not in ("content-type", "content-length")}
    if target.origin != source.origin and not _CREDENTIALS.isdisjoint(headers):
        headers = {k: v for k, v in headers.items() if k not in _CREDENTIALS}
    return method, body, headers


def _proxy_pool(proxy: str, max_idle: int) -> Http11Pool:
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if parts.scheme != "http" or not parts.hostname:
        raise ConnectError(f"the proxy {hide_password(proxy)} in the environment is not an http:// proxy")
    auth = _basic(parts.username, parts.password) if parts.username is not None else None
    return Http11Pool(parts.hostname, parts.port or 80, tls=None, max_idle=max_idle, proxy=True, proxy_auth=auth)


def _basic(username: str, password: str | None) -> str:
    """``Basic`` credentials from a URL's (percent-encoded) user and password."""
    pair = f"{urllib.parse.unquote(username)}:{urllib.parse.unquote(password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def hide_password(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)
