"""``OAuthClientProvider``: OAuth 2.1 authorization code flow for an MCP client.

basic/authorization (2026-07-28). On a 401 (or a 403 ``insufficient_scope``) from the
MCP server: discovery (``_discovery``), registration (``_registration``), then the
authorization request with PKCE S256, ``state`` and the ``resource`` parameter, in the
user's browser; the redirect is checked (``state``, and RFC 9207 ``iss`` as the spec's
table says) before the code is exchanged, with the same ``resource``, at the token
endpoint. Tokens and registrations are kept in a ``TokenStore`` keyed by (resource,
issuer); refresh tokens are used before asking the user again.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..errors import AuthorizationError
from ..transports.fetch import UrlPolicy
from ._client_base import OAuthProviderBase
from ._discovery import AuthServerMetadata, ResourceMetadata
from ._pkce import Pkce
from ._redirect import AuthorizationResponse, LoopbackReceiver, open_in_browser
from ._registration import ClientMetadata, Registration, choose_auth_method, register_dynamically
from ._tokens import StoredCredentials, TokenStore

if TYPE_CHECKING:
    from ._dpop import DPoPKey

__all__ = ["CallbackHandler", "OAuthClientProvider", "RedirectHandler"]

#: Opens the authorization URL for the user (default: the system browser, http(s) only).
RedirectHandler = Callable[[str], Awaitable[None]]
#: Waits for the redirect back and returns what it carried.
CallbackHandler = Callable[[], Awaitable[AuthorizationResponse]]


class OAuthClientProvider(OAuthProviderBase):
    """Authorizes a ``Client`` (or ``HttpClientTransport``) with OAuth 2.1.

    ``Client(url, auth=OAuthClientProvider(ClientMetadata(client_name="my app")))``.

    ``client``: what the client registers as (name, redirect URIs). ``store``: where
    tokens and registrations are kept (default ``MemoryTokenStore()``; a
    ``FileTokenStore(path)`` keeps the user logged in across runs). ``client_id`` (and
    ``client_secret``): a client registered beforehand, used first. ``client_id_metadata_url``:
    the https URL of this client's Client ID Metadata Document, used as its ``client_id``
    where the authorization server supports those. Otherwise the client registers
    dynamically. ``redirect_handler`` opens the authorization URL (default: the system
    browser, http(s) URLs only); ``callback_handler`` waits for the redirect (default: a
    receiver on the loopback address and port of the first redirect URI).
    ``authorization_timeout`` bounds the wait for the user, ``timeout`` each HTTP request.
    ``url_policy``: the SSRF guard for discovery (default: the zones of the MCP server's
    own address, so a loopback server may use a loopback authorization server).
    ``dpop``: True (a new ES256 key) or a ``DPoPKey``: ask for DPoP-bound tokens (RFC
    9449) and prove possession of the key on every token and MCP request.
    ``scopes``: what to ask for when the server's challenge and metadata name nothing.
    """

    def __init__(
        self,
        client: ClientMetadata | None = None,
        *,
        store: TokenStore | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_id_metadata_url: str | None = None,
        redirect_handler: RedirectHandler | None = None,
        callback_handler: CallbackHandler | None = None,
        authorization_timeout: float = 300.0,
        timeout: float = 10.0,
        url_policy: UrlPolicy | None = None,
        refresh_tokens: bool = True,
        dpop: bool | DPoPKey = False,
        scopes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(
            store=store, url_policy=url_policy, timeout=timeout, refresh=refresh_tokens, dpop=dpop, scopes=scopes
        )
        self.client = client or ClientMetadata()
        if client_secret is not None and client_id is None:
            raise ValueError("client_secret needs the client_id it belongs to")
        if client_id_metadata_url is not None and urllib.parse.urlsplit(client_id_metadata_url).scheme != "https":
            raise ValueError("client_id_metadata_url must be an https:// URL (it is the client_id)")
        self._client_id = client_id
        self._client_secret = client_secret
        self._metadata_url = client_id_metadata_url
        self._redirect_handler = redirect_handler or open_in_browser
        self._callback_handler = callback_handler
        self._authorization_timeout = authorization_timeout

    @property
    def redirect_uri(self) -> str:
        return self.client.redirect_uris[0]

    async def _obtain(
        self,
        server: AuthServerMetadata,
        resource_metadata: ResourceMetadata,
        resource: str,
        stored: StoredCredentials | None,
        scope: str | None,
        policy: UrlPolicy,
    ) -> StoredCredentials:
        endpoint = _authorization_endpoint(server)
        registration = await self._registration(server, resource, stored, policy)
        scope = self._scope_for(scope)
        pkce = Pkce()
        state = secrets.token_urlsafe(32)
        query = {
            "response_type": "code",
            "client_id": registration.client_id,
            "redirect_uri": self.redirect_uri,
            "code_challenge": pkce.challenge,
            "code_challenge_method": pkce.method,
            "state": state,
            # The identifier the server's metadata published (checked to name this server).
            "resource": resource_metadata.resource,
        }
        if scope:
            query["scope"] = scope
        separator = "&" if urllib.parse.urlsplit(endpoint).query else "?"
        response = await self._interact(endpoint + separator + urllib.parse.urlencode(query), state)
        _check_response(response, state, server)
        form = {
            "grant_type": "authorization_code",
            "code": response.code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": pkce.verifier,
        }
        return await self._token_request(
            server, form, registration, resource, policy, scope, resource_indicator=resource_metadata.resource
        )

    async def _registration(
        self, server: AuthServerMetadata, resource: str, stored: StoredCredentials | None, policy: UrlPolicy
    ) -> Registration:
        """Who the client is at ``server``: pre-registered, then what was registered there
        before (credentials are kept per issuer), then CIMD, then dynamic registration."""
        if self._client_id is not None:
            method = choose_auth_method(server, self._client_secret is not None)
            return Registration(self._client_id, self._client_secret, method)
        if stored is not None and stored.client_id:
            return Registration(stored.client_id, stored.client_secret, stored.token_endpoint_auth_method or "none")
        if self._metadata_url is not None and server.flag("client_id_metadata_document_supported"):
            return Registration(self._metadata_url, None, "none")
        grants = ("authorization_code", "refresh_token") if self._refresh_wanted else ("authorization_code",)
        registration = await register_dynamically(server, self.client, grants, policy, timeout=self._timeout)
        # Kept at once: a later failure must not register the client a second time.
        await self._keep(
            StoredCredentials(
                resource, server.issuer, registration.client_id, registration.client_secret, registration.auth_method
            )
        )
        return registration

    async def _interact(self, url: str, state: str) -> AuthorizationResponse:
        """Send the user to ``url``; the authorization response that comes back."""
        if self._callback_handler is not None:
            await self._redirect_handler(url)
            try:
                return await asyncio.wait_for(self._callback_handler(), self._authorization_timeout)
            except TimeoutError:
                raise AuthorizationError(
                    f"no authorization response within {self._authorization_timeout:g}s; try again"
                ) from None
        async with LoopbackReceiver(self.redirect_uri) as receiver:
            receiver.expect(state)  # the redirect may arrive before wait() is reached
            await self._redirect_handler(url)
            return await receiver.wait(state, self._authorization_timeout)

def _authorization_endpoint(server: AuthServerMetadata) -> str:
    """The endpoint the user's browser is sent to; ``AuthorizationError`` for none, for one that
    is not https (unless the issuer is http), or a server without PKCE S256."""
    endpoint = server.authorization_endpoint
    if endpoint is None:
        raise AuthorizationError(f"the authorization server {server.issuer} names no authorization_endpoint")
    scheme = urllib.parse.urlsplit(endpoint).scheme.lower()
    if scheme != "https" and not (scheme == "http" and server.issuer.startswith("http://")):
        # The user's browser goes there: never a downgrade from an https issuer, never
        # another scheme (javascript:, file:).
        raise AuthorizationError(
            f"the authorization server {server.issuer} names the authorization endpoint {endpoint!r}; "
            "refusing it (it must be https, like the issuer)"
        )
    methods = server.listed("code_challenge_methods_supported")
    if not methods or "S256" not in methods:
        raise AuthorizationError(
            f"the authorization server {server.issuer} does not advertise PKCE S256 "
            "(code_challenge_methods_supported); refusing to proceed without it"
        )
    return endpoint


def _check_response(response: AuthorizationResponse, state: str, server: AuthServerMetadata) -> None:
    """``state`` must be ours; ``iss`` as authorization.mdx's table (RFC 9207): when
    present it must equal the issuer by simple string comparison, advertised or not;
    when absent, the response is refused only if the server advertised sending it."""
    if response.state is None or not hmac.compare_digest(response.state.encode(), state.encode()):
        raise AuthorizationError(
            "the authorization response does not carry the state of this request; it was refused "
            "(it may be forged or from an older attempt); authorize again"
        )
    if response.iss is not None:
        if response.iss != server.issuer:
            raise AuthorizationError(
                f"the authorization response names the issuer {response.iss!r}, not {server.issuer!r} "
                "(RFC 9207); refusing it, it may come from another authorization server (mix-up attack)"
            )
    elif server.flag("authorization_response_iss_parameter_supported"):
        raise AuthorizationError(
            f"the authorization server {server.issuer} advertises the iss parameter (RFC 9207) but the "
            "authorization response has none; refusing it"
        )
