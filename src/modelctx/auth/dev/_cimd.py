"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; MCP
basic/authorization/client-registration.mdx): a ``client_id`` that is a URL names the
document describing the client. The server fetches it behind the SSRF guard
(``UrlPolicy``), checks it by the rule registration follows (``check_metadata``), and
keeps the client for a few minutes (``Store.add_document``: at most ``MAX_DOCUMENTS``).

Why a document could not be used is for the server's log, not for whoever named the
URL: the answer to them is one sentence whatever happened (``UNUSABLE``), so the
server cannot be made to read out loopback JSON or tell open ports from closed ones.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from ...errors import MCPError
from ...transports.fetch import UrlPolicy, fetch_json
from ._metadata import MAX_URI, MetadataError, check_metadata
from ._models import DevClient, is_loopback_http

__all__ = ["MAX_FETCHES", "UNUSABLE", "CimdError", "is_metadata_url", "load_client"]

#: The one answer to a client whose document could not be used (the reason is logged).
UNUSABLE = (
    "The client metadata document named by client_id could not be used (the authorization server logs the reason)."
)

CACHE_SECONDS = 300.0
FETCH_TIMEOUT = 5.0
MAX_DOCUMENT = 64 * 1024
# Documents fetched at once: each holds a connection and up to MAX_DOCUMENT bytes for
# FETCH_TIMEOUT at most; past it a request naming another one is refused, not queued.
MAX_FETCHES = 8
_SHARED_SECRET_METHODS = {"client_secret_basic", "client_secret_post", "client_secret_jwt"}


class CimdError(Exception):
    """The document could not be fetched or does not describe the client; the message
    says which, for the server's log (the client is told only ``UNUSABLE``)."""


def is_metadata_url(client_id: str) -> bool:
    """Whether ``client_id`` names a metadata document: an https URL with a path (or, on
    a development machine, an http loopback one)."""
    try:
        parts = urlsplit(client_id)
    except ValueError:
        return False
    if len(client_id) > MAX_URI:
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
        raise CimdError(f"the document at {client_id} names another client_id than its own URL")
    try:
        metadata = check_metadata(document)
    except MetadataError as exc:
        raise CimdError(f"the document at {client_id} is refused: {exc}") from None
    redirect_uris = metadata.get("redirect_uris")
    if not redirect_uris:
        raise CimdError(f"{client_id} lists no redirect_uris")
    method = metadata.get("token_endpoint_auth_method", "none")
    if method in _SHARED_SECRET_METHODS:
        raise CimdError(f"{client_id} asks for {method}: a metadata document client has no shared secret")
    if method not in ("none", "private_key_jwt"):
        raise CimdError(f"{client_id} asks for an unsupported token_endpoint_auth_method {method!r}")
    jwks = metadata.get("jwks")
    if method == "private_key_jwt" and jwks is None:
        jwks_uri = metadata.get("jwks_uri")
        if jwks_uri is None:
            raise CimdError(f"{client_id} uses private_key_jwt but gives neither jwks nor jwks_uri")
        try:
            jwks = check_metadata({"jwks": await _fetch(jwks_uri, policy, "client JWK Set")})["jwks"]
        except MetadataError as exc:
            raise CimdError(f"the JWK Set at {jwks_uri} is refused: {exc}") from None
    return DevClient(
        client_id=client_id,
        redirect_uris=tuple(redirect_uris),
        grant_types=tuple(metadata.get("grant_types") or ["authorization_code"]),
        auth_methods=frozenset({method}),
        scope=metadata.get("scope"),
        jwks=jwks,
        metadata=metadata,
        expires_at=time.time() + CACHE_SECONDS,
    )


async def _fetch(url: str, policy: UrlPolicy, what: str) -> Any:
    try:
        return await fetch_json(url, policy, timeout=FETCH_TIMEOUT, max_bytes=MAX_DOCUMENT)
    except MCPError as exc:
        raise CimdError(f"cannot fetch the {what} {url}: {exc}") from None
