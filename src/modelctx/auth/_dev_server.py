"""``DevAuthorizationServer``: an OAuth 2.1 authorization server for development, so a
protected MCP server can be tried end to end on one machine. Not for production: it
keeps everything in memory, has one built-in user, and registers any client that asks.

It is Authlib's server (``dev/_oauth.py``, grants in ``dev/_grants.py``) served as an
ASGI app (Starlette routing; uvicorn runs it). What it offers:

* RFC 8414 metadata at ``/.well-known/oauth-authorization-server`` and OpenID discovery
  at ``/.well-known/openid-configuration`` (path-inserted when the issuer has a path);
* ``/authorize``: client and exact redirect URI checked, PKCE ``S256`` and a
  ``resource`` (RFC 8707) required; consent auto-approved, or a page (``dev/_consent.py``);
  every answer sent to the redirect URI carries ``iss`` (RFC 9207), errors too;
* ``/token``: ``authorization_code`` (single-use codes), ``refresh_token`` (rotated),
  ``client_credentials``; clients authenticate with ``none``, ``client_secret_basic``,
  ``client_secret_post`` or ``private_key_jwt``; access tokens are JWTs (ES256 or RS256)
  whose ``aud`` is the resource, with ``iss``, ``sub``, ``scope``, ``exp``, ``iat``,
  ``jti``, ``client_id``; the public key at ``/jwks``;
* ``/register``: dynamic client registration (RFC 7591), and Client ID Metadata
  Documents (a ``client_id`` that is a URL), fetched behind the SSRF guard; both held to
  one rule for metadata and redirect URIs (``dev/_metadata.py``); both off with
  ``registration=False``. The token and registration endpoints are shared with the
  OAuth proxy (``dev/_endpoints.py``).

Everything it keeps is bounded, so no stream of requests grows it without end: each
metadata field (``dev/_metadata.py``), the authorization request (8 KB), and the number
of registered clients, cached documents, codes, refresh tokens, spent credentials and
assertion ids (``dev/_models.py``: the least recently used goes past a cap, but for
assertion ids, where the new one is refused), and of documents fetched at once
(``dev/_cimd.py``: past it the request is refused, not queued).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import OAuth2Error
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..transports.fetch import UrlPolicy
from .dev import _cimd
from .dev._cimd import UNUSABLE, CimdError, is_metadata_url, load_client
from .dev._consent import COOKIE, PAGE_HEADERS, Consents, render_page
from .dev._endpoints import authorization_error, authorization_pairs, consent_form, consent_refused, register, token
from .dev._http import error_page, listen, to_response
from .dev._keys import SigningKey
from .dev._models import DevClient, is_loopback_http
from .dev._oauth import OAuthServer, form_request

__all__ = ["DevAuthorizationServer"]

log = logging.getLogger("modelctx.auth")

_PUBLIC_GRANTS = ("authorization_code", "refresh_token")
_CONFIDENTIAL_GRANTS = ("authorization_code", "refresh_token", "client_credentials")


class DevAuthorizationServer:
    """A development OAuth 2.1 authorization server for ``issuer`` (its exact URL:
    https, or http on a loopback host)::

        server = DevAuthorizationServer("http://127.0.0.1:9000", auto_approve=True)
        server.register_client("my-cli")  # public; any loopback redirect URI
        server.run(port=9000)  # or mount server.app (ASGI) yourself

    ``auto_approve`` grants at once every valid authorization request whose redirect
    URI is on loopback (tools, tests, demos on this machine); any other request gets a
    consent page (else any web page the user opens could obtain a token by sending the
    browser here with a client of its own). ``subject`` is the one user it knows (the
    ``sub`` of tokens from the code flow). ``key_file`` keeps the signing key
    (``algorithm``, ES256 or RS256) across restarts, created 0600 if missing.
    ``scopes``, when given, are the only scopes it grants (``scopes_supported``);
    ``resources``, when given, the only resources (MCP server URLs) it issues tokens
    for. ``cimd_policy`` is the SSRF guard for Client ID Metadata Documents (default:
    public https and loopback, as on a development machine). ``registration=False``
    turns both dynamic registration and metadata documents off, so only the clients
    given to ``register_client`` exist (an identity provider like GitHub's, to try an
    ``OAuthProxy`` against).

    Raises ``ValueError`` for an issuer that is not https or loopback http, or a key
    file it cannot use.
    """

    def __init__(
        self,
        issuer: str,
        *,
        auto_approve: bool = False,
        subject: str = "dev-user",
        key_file: Path | str | None = None,
        algorithm: str = "ES256",
        scopes: Iterable[str] | None = None,
        resources: Iterable[str] | None = None,
        access_token_ttl: int = 3600,
        cimd_policy: UrlPolicy | None = None,
        registration: bool = True,
    ) -> None:
        _check_issuer(issuer)
        key = SigningKey.load_or_create(Path(key_file), algorithm) if key_file else SigningKey.generate(algorithm)
        self.issuer = issuer
        self.auto_approve = auto_approve
        self.subject = subject
        self._oauth = OAuthServer(
            issuer,
            key,
            scopes_supported=list(scopes) if scopes else None,
            resources=frozenset(resources) if resources else None,
            access_token_ttl=access_token_ttl,
            registration=registration,
        )
        self._consents = Consents()
        self._cimd_policy = cimd_policy if cimd_policy is not None else UrlPolicy(allow_loopback=True)
        self._fetching = 0  # metadata documents being fetched now
        # A web page that rebinds its own name to this loopback address reaches the
        # server with its name in Host: only the issuer's host is served.
        hosts = [urlsplit(issuer).hostname or ""]
        if is_loopback_http(issuer):
            hosts += ["127.0.0.1", "localhost", "::1", "[::1]"]
        self.app = Starlette(routes=self._routes(), middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)])

    @property
    def metadata(self) -> dict[str, Any]:
        """The RFC 8414 authorization server metadata document."""
        return dict(self._oauth.metadata)

    def jwks(self) -> dict[str, Any]:
        """The public JWK Set that verifies the access tokens."""
        return self._oauth.key.public_jwks()

    def register_client(
        self,
        client_id: str,
        secret: str | None = None,
        *,
        redirect_uris: Iterable[str] = (),
        grant_types: Iterable[str] | None = None,
    ) -> None:
        """Pre-register a client: confidential with ``secret`` (``client_secret_basic``
        or ``_post``; may use client credentials), else public (``none``, PKCE).
        Without ``redirect_uris`` it may use any http loopback redirect URI (RFC 8252
        section 7.3), which suits command-line tools and the conformance suite."""
        uris = tuple(redirect_uris)
        grants = tuple(grant_types) if grant_types is not None else (_CONFIDENTIAL_GRANTS if secret else _PUBLIC_GRANTS)
        self._oauth.store.clients[client_id] = DevClient(
            client_id=client_id,
            secret=secret,
            redirect_uris=uris,
            grant_types=grants,
            auth_methods=frozenset({"client_secret_basic", "client_secret_post"} if secret else {"none"}),
            any_loopback_redirect=not uris,
        )

    def run(self, host: str = "127.0.0.1", port: int = 9000, *, ready_message: str | None = None) -> None:
        """Serve on ``host:port`` with uvicorn until interrupted; ``ready_message`` goes to
        stderr once the socket listens. An address in use ends with ``SystemExit``."""
        import uvicorn

        listening = listen(host, port)

        class Announcing(uvicorn.Server):
            async def startup(self, sockets: list[Any] | None = None) -> None:
                await super().startup(sockets)
                if ready_message and not self.should_exit:
                    print(ready_message, file=sys.stderr, flush=True)

        config = uvicorn.Config(self.app, lifespan="off", log_level="warning", access_log=False)
        Announcing(config).run(sockets=[listening])

    # Routes.

    def _routes(self) -> list[Route]:
        prefix = urlsplit(self.issuer).path.rstrip("/")
        metadata_paths = {
            f"/.well-known/oauth-authorization-server{prefix}",
            f"/.well-known/openid-configuration{prefix}",
            f"{prefix}/.well-known/openid-configuration",
        }
        return [
            *(Route(path, self._metadata, methods=["GET"]) for path in sorted(metadata_paths)),
            Route(f"{prefix}/jwks", self._jwks, methods=["GET"]),
            Route(f"{prefix}/authorize", self._authorize, methods=["GET", "POST"]),
            Route(f"{prefix}/token", self._token, methods=["POST"]),
            *([Route(f"{prefix}/register", self._register, methods=["POST"])] if self._oauth.registration else []),
        ]

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(self._oauth.metadata)

    async def _jwks(self, request: Request) -> Response:
        return JSONResponse(self.jwks(), headers={"Cache-Control": "max-age=300"})

    async def _authorize(self, request: Request) -> Response:
        if request.method == "POST":
            return await self._decide(request)
        pairs = authorization_pairs(request)
        if isinstance(pairs, Response):
            return pairs
        refusal = await self._load_metadata_document(dict(pairs).get("client_id"))
        if refusal is not None:
            return error_page(400, "invalid_client", refusal)
        oauth_request = form_request("GET", self._oauth.endpoint("authorize"), request.headers, pairs)
        try:
            grant = self._oauth.get_consent_grant(oauth_request, end_user=self.subject)
        except OAuth2Error as error:
            return authorization_error(self._oauth, oauth_request, error)
        if self.auto_approve and is_loopback_http(grant.redirect_uri):
            return to_response(self._oauth.create_authorization_response(oauth_request, self.subject, grant))
        return self._consent_page(grant, pairs)

    def _consent_page(self, grant: Any, pairs: list[tuple[str, str]]) -> Response:
        ticket, browser = self._consents.open(pairs)
        client: DevClient = grant.request.client
        page = render_page(
            action=self._oauth.endpoint("authorize"),
            ticket=ticket,
            client=str(client.metadata.get("client_name") or client.client_id),
            redirect_uri=grant.redirect_uri,
            scope=grant.request.scope or "",
            resource=grant.request.resource,
            subject=self.subject,
        )
        response = HTMLResponse(page, headers=PAGE_HEADERS)
        path = urlsplit(self.issuer).path.rstrip("/") + "/authorize"
        response.set_cookie(COOKIE, browser, max_age=600, path=path, httponly=True, samesite="strict")
        return response

    async def _decide(self, request: Request) -> Response:
        form = await consent_form(request, self.issuer)
        if isinstance(form, Response):
            return form
        pairs = self._consents.take(form.get("ticket", ""), request.cookies.get(COOKIE, ""))
        if pairs is None:
            return consent_refused()
        oauth_request = form_request("GET", self._oauth.endpoint("authorize"), request.headers, pairs)
        try:
            grant = self._oauth.get_consent_grant(oauth_request, end_user=self.subject)
        except OAuth2Error as error:
            return authorization_error(self._oauth, oauth_request, error)
        user = self.subject if form.get("decision") == "approve" else None
        return to_response(self._oauth.create_authorization_response(oauth_request, user, grant))

    async def _token(self, request: Request) -> Response:
        return await token(self._oauth, request, self._load_metadata_document)

    async def _register(self, request: Request) -> Response:
        return await register(self._oauth, request)

    async def _load_metadata_document(self, client_id: str | None) -> str | None:
        """Fetch the client behind a URL ``client_id`` unless known; the reason it cannot
        be used, or None."""
        if not client_id or not is_metadata_url(client_id) or self._oauth.store.client(client_id) is not None:
            return None
        if not self._oauth.client_documents:  # no document is fetched: the client is unknown
            return None
        if self._fetching >= _cimd.MAX_FETCHES:
            log.warning("client metadata document refused: %d are being fetched already", self._fetching)
            return UNUSABLE
        self._fetching += 1
        try:
            client = await load_client(client_id, self._cimd_policy)
        except CimdError as exc:
            # The reason is the operator's to read, never the requester's (it may quote a
            # loopback document, or tell a closed port from an open one).
            log.warning("client metadata document refused: %r", str(exc))
            return UNUSABLE
        finally:
            self._fetching -= 1
        self._oauth.store.add_document(client)
        return None


def _check_issuer(issuer: str) -> None:
    parts = urlsplit(issuer)
    if parts.query or parts.fragment or not parts.netloc:
        raise ValueError(f"issuer {issuer!r} must be a URL with no query or fragment (RFC 8414 section 2)")
    if parts.scheme != "https" and not is_loopback_http(issuer):
        raise ValueError(f"issuer {issuer!r} must be https, or http on a loopback host for development")
