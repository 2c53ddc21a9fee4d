"""Discovery: from a 401 to the authorization server's endpoints.

basic/authorization/authorization-server-discovery.mdx (2026-07-28):

1. Protected Resource Metadata (RFC 9728): the ``resource_metadata`` URL of the
   ``WWW-Authenticate`` challenge when there is one; then the well-known URL with the MCP
   endpoint's path inserted (``/.well-known/oauth-protected-resource/mcp``); then the
   root one. Its ``resource`` must name this server (the client refuses to authorize
   for a server that claims to be another).
2. Authorization server metadata for the first issuer it lists: RFC 8414 first, then
   OpenID Connect discovery, path-inserted forms before path-appended ones, as the
   page orders them. The document's ``issuer`` must be identical to the issuer the URL
   was built from, or the metadata is not used (RFC 8414 §3.3).

Every fetch goes through ``fetch_json`` behind the SSRF guard (``UrlPolicy``).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import AuthorizationError, HttpStatusError, MalformedResponse
from ..transports.fetch import UrlPolicy, fetch_json

__all__ = [
    "AuthServerMetadata",
    "Challenge",
    "ResourceMetadata",
    "as_metadata_urls",
    "canonical_resource",
    "discover_authorization_server",
    "discover_resource",
    "parse_challenge",
    "prm_urls",
    "resource_matches",
]

_PRM = "/.well-known/oauth-protected-resource"
_PARAM = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?')


@dataclass(frozen=True)
class Challenge:
    """What a ``WWW-Authenticate: Bearer ...`` challenge says (RFC 6750 §3, RFC 9728 §5.1)."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None

    @property
    def scopes(self) -> list[str]:
        return self.scope.split() if self.scope else []


def parse_challenge(headers: Mapping[str, str], scheme: str | None = None) -> Challenge:
    """The Bearer challenge of a response's ``www-authenticate`` header, else its DPoP
    one (RFC 9449 7.1, same parameters); with ``scheme``, that one only; empty if none."""
    value = next((v for k, v in headers.items() if k.lower() == "www-authenticate"), "")
    schemes = (scheme,) if scheme is not None else ("bearer", "dpop")
    match = next((m for name in schemes if (m := re.search(rf"(?i)(?<![\w-]){name}(?![\w-])", value))), None)
    if match is None:
        return Challenge()
    params: dict[str, str] = {}
    rest = value[match.end() :]
    position = 0
    while position < len(rest):
        found = _PARAM.match(rest, position)
        if found is None:
            break  # the next scheme (or something unreadable): this challenge ends here
        name = found.group(1).lower()
        quoted = found.group(2)
        params.setdefault(name, re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else found.group(3))
        position = found.end()
    return Challenge(params.get("resource_metadata") or None, params.get("scope") or None, params.get("error") or None)


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (RFC 8707 §2, authorization.mdx): lower-case
    scheme and host, no fragment, no trailing slash on an empty path."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.lower()
    path = parts.path if parts.path != "/" else ""
    return urllib.parse.urlunsplit((parts.scheme.lower(), netloc, path, parts.query, ""))


def prm_urls(server_url: str, header_url: str | None) -> list[str]:
    """Where to look for the Protected Resource Metadata, in the spec's order."""
    parts = urllib.parse.urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    urls = [header_url] if header_url else []
    path = parts.path.rstrip("/")
    if path:
        urls.append(f"{origin}{_PRM}{path}")
    urls.append(f"{origin}{_PRM}")
    return list(dict.fromkeys(urls))


def resource_matches(declared: str, server_url: str) -> bool:
    """Whether the PRM ``resource`` names this server: the same origin, and a path that
    is the server's own or one of its parents (a root document names the whole origin)."""
    mine = urllib.parse.urlsplit(canonical_resource(server_url))
    theirs = urllib.parse.urlsplit(canonical_resource(declared))
    if (theirs.scheme, theirs.netloc) != (mine.scheme, mine.netloc) or theirs.query:
        return False
    parent = theirs.path.rstrip("/")
    return mine.path == parent or mine.path.startswith(parent + "/") or not parent


@dataclass(frozen=True)
class ResourceMetadata:
    """The parts of a Protected Resource Metadata document the client uses."""

    url: str  # where it was found
    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None
    raw: dict[str, Any] = field(repr=False)


async def discover_resource(
    server_url: str, header_url: str | None, policy: UrlPolicy, *, timeout: float = 10.0
) -> ResourceMetadata:
    """The server's Protected Resource Metadata, its ``resource`` checked against
    ``server_url``. Raises ``AuthorizationError`` saying where it looked."""
    tried: list[str] = []
    for url in prm_urls(server_url, header_url):
        try:
            document = await fetch_json(url, policy, timeout=timeout)
        except (HttpStatusError, MalformedResponse) as exc:
            tried.append(f"{url} ({_short(exc)})")
            continue
        return _resource_metadata(url, document, server_url)
    raise AuthorizationError(
        f"{server_url} asked for authorization, but no protected resource metadata was found "
        f"(tried {'; '.join(tried)}); the server must serve RFC 9728 metadata to be authorized"
    )


def _resource_metadata(url: str, document: Any, server_url: str) -> ResourceMetadata:
    if not isinstance(document, dict):
        raise AuthorizationError(f"the protected resource metadata at {url} is not a JSON object")
    resource = document.get("resource")
    servers = document.get("authorization_servers")
    if not isinstance(resource, str) or not resource:
        raise AuthorizationError(f"the protected resource metadata at {url} names no resource")
    if not resource_matches(resource, server_url):
        raise AuthorizationError(
            f"the protected resource metadata at {url} is for {resource!r}, not for {server_url}; "
            "refusing to authorize (a server may not ask for tokens meant for another)"
        )
    if not isinstance(servers, list) or not all(isinstance(s, str) and s for s in servers) or not servers:
        raise AuthorizationError(f"the protected resource metadata at {url} lists no authorization_servers")
    scopes = document.get("scopes_supported")
    supported = tuple(s for s in scopes if isinstance(s, str)) if isinstance(scopes, list) else None
    return ResourceMetadata(url, resource, tuple(servers), supported, document)


def as_metadata_urls(issuer: str) -> list[str]:
    """The well-known URLs of an issuer's metadata, in the spec's order."""
    parts = urllib.parse.urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]


@dataclass(frozen=True)
class AuthServerMetadata:
    """An authorization server's metadata (RFC 8414 / OpenID discovery), issuer checked."""

    url: str  # where it was found
    raw: dict[str, Any] = field(repr=False)

    @property
    def issuer(self) -> str:
        return str(self.raw["issuer"])

    @property
    def authorization_endpoint(self) -> str | None:
        return _str(self.raw.get("authorization_endpoint"))

    @property
    def token_endpoint(self) -> str | None:
        return _str(self.raw.get("token_endpoint"))

    @property
    def registration_endpoint(self) -> str | None:
        return _str(self.raw.get("registration_endpoint"))

    def listed(self, name: str) -> tuple[str, ...] | None:
        """A list-valued member (``scopes_supported``...), or None when absent."""
        value = self.raw.get(name)
        return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else None

    def flag(self, name: str) -> bool:
        return self.raw.get(name) is True


async def discover_authorization_server(issuer: str, policy: UrlPolicy, *, timeout: float = 10.0) -> AuthServerMetadata:
    """The metadata of ``issuer``, from the first well-known URL that has it. A document
    whose ``issuer`` differs from ``issuer`` is refused, never used."""
    tried: list[str] = []
    for url in as_metadata_urls(issuer):
        try:
            document = await fetch_json(url, policy, timeout=timeout)
        except (HttpStatusError, MalformedResponse) as exc:
            tried.append(f"{url} ({_short(exc)})")
            continue
        if not isinstance(document, dict):
            tried.append(f"{url} (not a JSON object)")
            continue
        if document.get("issuer") != issuer:
            raise AuthorizationError(
                f"the authorization server metadata at {url} names the issuer {document.get('issuer')!r}, "
                f"not {issuer!r}; refusing to use it (RFC 8414 §3.3: it may be an impostor's)"
            )
        return AuthServerMetadata(url, document)
    raise AuthorizationError(
        f"no metadata found for the authorization server {issuer} (tried {'; '.join(tried)}); "
        "check the authorization_servers the MCP server's protected resource metadata lists"
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _short(exc: Exception) -> str:
    if isinstance(exc, HttpStatusError):
        return f"HTTP {exc.status}"
    return str(exc)
