"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; MCP
basic/authorization/client-registration.mdx): a ``client_id`` that is a URL names the
document describing the client. The server fetches it behind the SSRF guard
(``UrlPolicy``), checks it, and keeps the client for a few minutes.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from ...client import UrlPolicy
from ...client._fetch import fetch_json
from ...errors import MCPError
from ._models import DevClient, is_loopback_http

__all__ = ["CimdError", "is_metadata_url", "load_client"]

CACHE_SECONDS = 300.0
FETCH_TIMEOUT = 5.0
MAX_DOCUMENT = 64 * 1024
_SHARED_SECRET_METHODS = {"client_secret_basic", "client_secret_post", "client_secret_jwt"}


class CimdError(Exception):
    """The document could not be fetched or does not describe the client; the message
    says which and is shown to the client as ``invalid_client``."""


def is_metadata_url(client_id: str) -> bool:
    """Whether ``client_id`` names a metadata document: an https URL with a path (or, on
    a development machine, an http loopback one)."""
    try:
        parts = urlsplit(client_id)
    except ValueError:
        return False
    if parts.scheme not in ("https", "http") or not parts.netloc or parts.path in ("", "/"):
        return False
    return parts.scheme == "https" or is_loopback_http(client_id)


async def load_client(client_id: str, policy: UrlPolicy) -> DevClient:
    """The client described by the document at ``client_id``; raises ``CimdError``."""
    document = await _fetch(client_id, policy, "client metadata document")
    if not isinstance(document, dict):
        raise CimdError(f"{client_id} is not a JSON object")
    if document.get("client_id") != client_id:
        raise CimdError(f"the document's client_id is {document.get('client_id')!r}, not its own URL {client_id!r}")
    redirect_uris = document.get("redirect_uris")
    if not isinstance(redirect_uris, list) or not redirect_uris or not all(isinstance(u, str) for u in redirect_uris):
        raise CimdError(f"{client_id} lists no redirect_uris")
    method = document.get("token_endpoint_auth_method", "none")
    if method in _SHARED_SECRET_METHODS:
        raise CimdError(f"{client_id} asks for {method}: a metadata document client has no shared secret")
    if method not in ("none", "private_key_jwt"):
        raise CimdError(f"{client_id} asks for an unsupported token_endpoint_auth_method {method!r}")
    jwks = document.get("jwks")
    if method == "private_key_jwt" and jwks is None:
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise CimdError(f"{client_id} uses private_key_jwt but gives neither jwks nor jwks_uri")
        jwks = await _fetch(jwks_uri, policy, "client JWK Set")
    grant_types = document.get("grant_types") or ["authorization_code"]
    return DevClient(
        client_id=client_id,
        redirect_uris=tuple(redirect_uris),
        grant_types=tuple(str(g) for g in grant_types),
        auth_methods=frozenset({method}),
        scope=document.get("scope") if isinstance(document.get("scope"), str) else None,
        jwks=jwks if isinstance(jwks, dict) else None,
        metadata=document,
        expires_at=time.time() + CACHE_SECONDS,
    )


async def _fetch(url: str, policy: UrlPolicy, what: str) -> Any:
    try:
        return await fetch_json(url, policy, timeout=FETCH_TIMEOUT, max_bytes=MAX_DOCUMENT)
    except MCPError as exc:
        raise CimdError(f"cannot fetch the {what} {url}: {exc}") from None
