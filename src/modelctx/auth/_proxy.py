"""``OAuthProxy``: an MCP server's own authorization server in front of an identity
provider that has no dynamic client registration (GitHub, Google, many enterprise IdPs).

MCP clients register with the proxy (RFC 7591) and are authorized by it; the user signs
in upstream through the proxy's one pre-registered client. The proxy then issues its
own tokens, for this MCP server only. One authorization, step by step:

1. ``GET /authorize`` from the MCP client (through the browser): checked as any
   authorization request is (registered client, exact redirect URI, PKCE S256, the
   ``resource`` must be this server, RFC 8707), by the same Authlib grants as the
   development server (``dev/_oauth.py``).
2. Consent at the proxy (security_best_practices.mdx, Confused Deputy): unless this
   browser approved this client for this redirect URI before (a signed cookie,
   ``_proxy_state.Approvals``) and did not come from another site's link, a page names the client, where the code goes, the MCP
   scopes and the upstream scopes, and asks. Without it any registered client could
   send a signed-in user's browser here and receive a code while the upstream skips
   its own consent for the proxy's one client.
3. Only then a transaction is opened (``_proxy_state.Transactions``): a random
   ``state`` for the upstream, a fresh PKCE verifier, and a cookie binding it to this
   browser, set with the redirect to the upstream's authorization endpoint.
4. ``GET <callback>`` from the upstream: the state must name an open transaction and
   the cookie match it (single use, ten minutes); the code is exchanged server to
   server with the proxy's credentials and the verifier; ``identify`` names the user
   from the upstream's answer. The upstream's tokens stay in the proxy, never sent on
   (Token Passthrough): a tool reaches them with ``upstream_token(ctx.principal)`` to
   call the upstream's API as the user.
5. The MCP client gets a code of the proxy's at its redirect URI (with its own
   ``state`` and ``iss``, RFC 9207), and at ``/token`` a JWT the proxy signs: ``iss``
   the proxy, ``aud`` this server's resource URL, ``sub`` the upstream user, ``sid``
   the sign-in, and a rotating refresh token of the proxy's own. Codes are single use (a replay revokes
   what the code gave), state is bounded as the development server's is.

The proxy is also the ``ResourceAuth`` of the MCP endpoint: ``HttpApp(server,
auth=proxy)`` checks every request's token against the proxy's key (a token from the
upstream, or for another resource, is refused) and serves the proxy's endpoints
(``app``) beside the MCP one.
"""

from __future__ import annotations

import asyncio
import html
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc6749 import OAuth2Error
from joserfc.jwk import ECKey
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import InvalidToken, ToolError
from ._jwt import JwtVerifier
from ._pkce import Pkce
from ._proxy_shared import MemoryProxyState, RedisProxyState, StateUnavailable
from ._proxy_state import APPROVAL_LIFETIME, SESSION_LIFETIME, TRANSACTION_LIFETIME, Approvals, UpstreamSession, sid_of
from ._proxy_upstream import Identify, Upstream, UpstreamError
from ._resource import AccessToken, ProtectedResource
from .dev._consent import PAGE_HEADERS
from .dev._endpoints import authorization_error, authorization_pairs, consent_form, consent_refused, register, token
from .dev._http import NO_STORE, error_page, to_response
from .dev._keys import SigningKey
from .dev._models import Store, is_loopback_http
from .dev._oauth import OAuthServer, Reply, form_request

__all__ = ["OAuthProxy"]

log = logging.getLogger("modelctx.auth")

_GRANTS = ("authorization_code", "refresh_token")  # a user behind every token: no client_credentials
_REFRESH_WAIT = 15.0  # seconds one upstream refresh may hold a sign-in's lock
_NO_SESSION = (
    "The server holds no upstream sign-in for this token any more (it restarted or dropped it); "
    "sign out and sign in again"
)
_T = TypeVar("_T")


class _Unavailable(InvalidToken):
    """The token could not be checked now (the shared state is silent): 503, retry shortly."""

    unavailable = True
    challenge_headers: Mapping[str, str] = MappingProxyType({"Retry-After": "1"})


class OAuthProxy:
    """An authorization server for the MCP endpoint ``resource`` that signs users in at
    an upstream identity provider with one pre-registered client::

        proxy = OAuthProxy(
            "https://mcp.example.com/mcp",
            upstream_authorize="https://github.com/login/oauth/authorize",
            upstream_token="https://github.com/login/oauth/access_token",
            client_id="Iv1.abc", client_secret=os.environ["GITHUB_SECRET"],
            identify=github_user_id,
        )
        server.run("http", auth=proxy)

    The upstream: ``upstream_authorize`` and ``upstream_token`` (its endpoints),
    ``client_id`` and ``client_secret`` (the proxy's client there, registered with the
    redirect URI ``callback_url``, by default ``<origin of resource>/oauth/callback``),
    ``upstream_scopes`` (asked for upstream), ``upstream_resource`` (an RFC 8707
    ``resource`` sent upstream, for providers that want one), ``upstream_params``
    (more query parameters for its authorization endpoint).

    Who signed in: ``identify``, an async function given the upstream's token response
    (a dict) that returns the user's stable identifier there (the ``sub`` of the
    proxy's tokens), e.g. by calling the provider's user API with the access token; or
    ``upstream_issuer`` for providers whose access tokens are JWTs: the token is
    verified against that issuer's published keys (audience ``upstream_resource``, else
    ``client_id``) and its ``sub`` taken.

    The proxy's own side: ``issuer`` (default the resource's origin; its endpoints are
    ``<issuer>/authorize``, ``/token``, ``/register``, ``/jwks``), ``scopes`` (what MCP
    clients may ask for; advertised), ``required_scopes`` (held by every request),
    ``access_token_ttl`` seconds, ``key_file`` (keeps the signing key, 0600, so tokens
    outlive a restart). Clients, codes, refresh tokens, pending sign-ins and the upstream's
    tokens are kept in memory, bounded; with ``redis_url`` (or the server's
    ``ServerConfig.redis_url`` / ``--redis``, under its ``redis_prefix``) they are kept in
    that Redis with the same bounds, and so are the signing key (unless ``key_file``) and
    the cookie key: every worker and replica sharing it serves every step of a sign-in
    (``_proxy_shared``). Without Redis it serves one process only.

    Raises ``ValueError`` for URLs that cannot work or no way to identify the user.
    """

    def __init__(
        self,
        resource: str,
        *,
        upstream_authorize: str,
        upstream_token: str,
        client_id: str,
        client_secret: str | None = None,
        identify: Identify | None = None,
        upstream_issuer: str | None = None,
        upstream_scopes: Sequence[str] = (),
        upstream_resource: str | None = None,
        upstream_params: Mapping[str, str] | None = None,
        issuer: str | None = None,
        callback_url: str | None = None,
        scopes: Iterable[str] = (),
        required_scopes: Iterable[str] = (),
        access_token_ttl: int = 3600,
        key_file: Path | str | None = None,
        redis_url: str | None = None,
    ) -> None:
        self.issuer, self.callback_url = _own_urls(resource, issuer, callback_url)
        self.upstream = Upstream(
            authorize_url=upstream_authorize,
            token_url=upstream_token,
            client_id=client_id,
            client_secret=client_secret,
            redirect_uri=self.callback_url,
            scopes=upstream_scopes,
            resource=upstream_resource,
            extra_params=upstream_params or {},
            identify=_identifier(identify, upstream_issuer, upstream_resource or client_id),
        )
        self._upstream_issuer = upstream_issuer
        self._key_file = key_file is not None
        key = SigningKey.load_or_create(Path(key_file), "ES256") if key_file else SigningKey.generate("ES256")
        self._oauth, self.resource = self._issuing(key, resource, list(scopes), required_scopes, access_token_ttl)
        self._approvals = Approvals()
        self._state: MemoryProxyState | RedisProxyState = MemoryProxyState(self._oauth.store, access_token_ttl)
        self._keys_loaded = True  # the shared ones, once read from Redis
        if redis_url is not None:
            self.share_through_redis(redis_url, "modelctx:")
        self._refreshing = asyncio.Lock()  # one upstream refresh at a time: a rotated token is used once
        self._secure = urlsplit(self.issuer).scheme == "https"
        self._cookies = _cookie_names(self._secure)
        hosts = _served_hosts(self.issuer, resource)
        #: The proxy's endpoints, served by ``HttpApp`` beside the MCP endpoint (or mount it).
        self.app = Starlette(routes=self._routes(), middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts)])

    def _issuing(
        self, key: SigningKey, resource: str, scopes: list[str], required: Iterable[str], ttl: int
    ) -> tuple[OAuthServer, ProtectedResource]:
        """The authorization server that issues the proxy's tokens and the resource that checks them."""
        oauth = OAuthServer(
            self.issuer,
            key,
            scopes_supported=scopes or None,
            resources=frozenset({resource}),
            access_token_ttl=ttl,
            grant_types=_GRANTS,
            client_documents=False,  # registration only: documents are not fetched here
        )
        oauth.family_claims = lambda family: {"sid": sid_of(family)}
        checks = ProtectedResource(
            resource,
            authorization_servers=[self.issuer],
            verifier=JwtVerifier(self.issuer, audience=resource, jwks=key.public_jwks(), require_at_jwt=True),
            scopes_supported=scopes,
            required_scopes=required,
            dpop="allowed",  # the token endpoint binds a token to the key of a DPoP proof sent with it
        )
        return oauth, checks

    @property
    def metadata(self) -> dict[str, Any]:
        """The proxy's RFC 8414 authorization server metadata document."""
        return dict(self._oauth.metadata)

    # -- the resource side: what HttpApp asks (ResourceAuth) ------------------------------
    def metadata_document(self, path: str) -> dict[str, Any] | None:
        """The Protected Resource Metadata at its well-known paths (naming the proxy as
        the authorization server), else None."""
        return self.resource.metadata_document(path)

    async def authenticate(
        self, headers: Mapping[str, str], method: str = "POST", path: str | None = None
    ) -> AccessToken:
        """The verified proxy token of a request (``path`` as ``ProtectedResource.authenticate``
        has it); ``InvalidToken`` (an upstream token, one for another resource, expired, of a
        revoked sign-in, ...) or ``InsufficientScope`` otherwise."""
        try:
            await self._ready()
            principal = await self.resource.authenticate(headers, method, path)
            sid = principal.claims.get("sid")
            revoked = isinstance(sid, str) and await self._state.revoked(sid)
        except StateUnavailable as exc:
            raise _Unavailable(str(exc)) from None
        if revoked:
            raise InvalidToken("This sign-in was revoked (a code or refresh token of it was used twice); sign in again")
        return principal

    # -- where the state lives ---------------------------------------------------------------
    def share_through_redis(self, url: str, prefix: str) -> None:
        """Keep the proxy's state in the Redis at ``url`` under ``<prefix>proxy:`` (the HTTP
        app calls this when the server has a ``redis_url``; an explicit ``redis_url=``
        given to the proxy wins), DPoP's spent proofs with it."""
        if self._state.shared:
            return
        from ._proxy_shared import RedisProxyState
        from ._replays import RedisReplays

        self._state = RedisProxyState(url, prefix=f"{prefix}proxy:", access_token_ttl=self._oauth.access_token_ttl)
        self._oauth.dpop.replays = RedisReplays(url, prefix=f"{prefix}proxy:dpop:")
        self.resource.share_through_redis(url, prefix)
        self._keys_loaded = False

    async def _ready(self) -> None:
        """Read the keys every process shares (made by the first to ask) before the first
        token is signed or checked; ``StateUnavailable`` when Redis is silent."""
        if self._keys_loaded:
            return
        jwk, cookie_key = await self._state.keys()
        if self._keys_loaded:  # another request of this process got there first
            return
        if jwk is not None and not self._key_file:
            key = SigningKey(ECKey.import_key(jwk), "ES256")
            self._oauth.key = key
            self.resource.verifier = JwtVerifier(
                self.issuer, audience=self.resource.resource, jwks=key.public_jwks(), require_at_jwt=True
            )
        if cookie_key is not None:
            self._approvals = Approvals(cookie_key)
        self._keys_loaded = True

    async def _run(self, client_id: str | None, credential: str | None, call: Callable[[], Reply]) -> Reply:
        """Run one Authlib ``call`` on the records it needs (``_proxy_shared``): loaded,
        run, written back; a grant spent elsewhere meanwhile is answered ``invalid_grant``."""
        store = await self._state.snapshot(client_id, credential)
        reply = self._on(store, call)
        refusal = await self._state.commit(store)
        if refusal is not None:
            return Reply(400, {"error": "invalid_grant", "error_description": refusal}, list(NO_STORE.items()))
        return reply

    def _on(self, store: Store, call: Callable[[], _T]) -> _T:
        # Authlib is synchronous: nothing else of this process runs while the store is swapped.
        own, self._oauth.store = self._oauth.store, store
        try:
            return call()
        finally:
            self._oauth.store = own

    def challenge(self, refusal: Exception) -> tuple[int, str]:
        """The status and ``WWW-Authenticate`` challenge answering ``refusal``."""
        return self.resource.challenge(refusal)

    def check_scopes(self, principal: AccessToken, needed: Iterable[str]) -> None:
        """Raise ``InsufficientScope`` when ``principal`` lacks one of ``needed``."""
        self.resource.check_scopes(principal, needed)

    def check_processes(self, processes: int) -> None:
        """Refuse several worker processes without Redis: each would hold its own
        clients, codes, transactions and signing key."""
        if processes > 1 and not self._state.shared:
            raise ValueError(
                f"the OAuth proxy keeps its clients, codes and pending sign-ins in memory: {processes} workers "
                "would each know only their own; add --redis URL (or set ServerConfig.redis_url) to share "
                "them, or serve one worker"
            )

    # -- the upstream's API, for the server's own calls ------------------------------------
    async def upstream_token(self, principal: AccessToken) -> str:
        """The upstream's access token of the sign-in behind ``principal`` (``ctx.principal``
        of a request this proxy authenticated), for a tool to call the upstream's API as
        the user. It is the server's to use: never return it to the MCP client. An expired
        one is refreshed upstream first when the upstream gave a refresh token.

        Raises ``ToolError`` (its message is shown to the caller) when the proxy holds no
        upstream token for it (the proxy restarted or dropped it past its cap) or the
        upstream refused to renew it: the user signs in again."""
        sid = principal.claims.get("sid") if principal.issuer == self.issuer else None
        if not isinstance(sid, str):
            raise ToolError(_NO_SESSION)
        try:
            session = await self._held(sid)
            if not _fresh(session):
                async with self._refreshing:
                    session = await self._renewed(sid)
        except StateUnavailable as exc:
            raise ToolError(str(exc)) from None
        return session.access_token

    async def _held(self, sid: str) -> UpstreamSession:
        session = await self._state.get_session(sid)
        if session is None:
            raise ToolError(_NO_SESSION)
        return session

    async def _renewed(self, sid: str) -> UpstreamSession:
        """``sid``'s upstream tokens, refreshed upstream unless another request (of any
        process) did meanwhile: one refresh at a time, as a rotated token is used once."""
        deadline = time.monotonic() + _REFRESH_WAIT
        while not await self._state.lock_refresh(sid, _REFRESH_WAIT):
            await asyncio.sleep(0.1)  # another process is refreshing it
            session = await self._held(sid)
            if _fresh(session):
                return session
            if time.monotonic() > deadline:
                raise ToolError("The upstream sign-in is being renewed elsewhere and did not finish; try again")
        try:
            session = await self._held(sid)  # renewed by the request that held the lock before?
            if _fresh(session):
                return session
            if session.refresh_token is None:
                raise ToolError("The upstream sign-in of this token expired; sign out and sign in again")
            try:
                tokens = await self.upstream.refresh(session.refresh_token)
            except UpstreamError as exc:
                log.warning("OAuth proxy: %s", exc.message)
                raise ToolError("The upstream refused to renew this sign-in; sign out and sign in again") from None
            renewed = _session(tokens, previous=session)
            await self._state.put_session(sid, renewed)
            return renewed
        finally:
            await self._state.unlock_refresh(sid)

    # -- routes -------------------------------------------------------------------------
    def _routes(self) -> list[Route]:
        prefix = urlsplit(self.issuer).path.rstrip("/")
        metadata_paths = {f"/.well-known/oauth-authorization-server{prefix}", f"/.well-known/openid-configuration{prefix}"}
        return [
            *(Route(path, self._metadata, methods=["GET"]) for path in sorted(metadata_paths)),
            Route(f"{prefix}/jwks", self._guarded(self._jwks), methods=["GET"]),
            Route(f"{prefix}/authorize", self._guarded(self._authorize), methods=["GET", "POST"]),
            Route(f"{prefix}/token", self._guarded(self._token), methods=["POST"]),
            Route(f"{prefix}/register", self._guarded(self._register), methods=["POST"]),
            Route(urlsplit(self.callback_url).path, self._guarded(self._callback), methods=["GET"]),
        ]

    def _guarded(self, endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """``endpoint`` once the shared keys are read; 503 with Retry-After when the
        shared state is silent (nothing is accepted without it)."""

        async def guarded(request: Request) -> Response:
            try:
                await self._ready()
                return await endpoint(request)
            except StateUnavailable as exc:
                headers = {**NO_STORE, "Retry-After": "1"}
                if request.url.path.endswith(("/token", "/register")):
                    return JSONResponse({"error": "temporarily_unavailable", "error_description": str(exc)}, 503, headers)
                page = error_page(503, "temporarily_unavailable", str(exc))
                page.headers["Retry-After"] = "1"
                return page

        return guarded

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(self._oauth.metadata, headers={"Access-Control-Allow-Origin": "*"})

    async def _jwks(self, request: Request) -> Response:
        return JSONResponse(self._oauth.key.public_jwks(), headers={"Cache-Control": "max-age=300"})

    async def _token(self, request: Request) -> Response:
        return await token(self._oauth, request, run=self._run)

    async def _register(self, request: Request) -> Response:
        return await register(self._oauth, request, run=self._run)

    # Steps 1 and 2: the MCP client's request, then consent.
    async def _authorize(self, request: Request) -> Response:
        if request.method == "POST":
            return await self._decide(request)
        pairs = authorization_pairs(request)
        if isinstance(pairs, Response):
            return pairs
        store = await self._state.snapshot(_client_of(pairs))
        checked = self._on(store, lambda: self._checked(request, pairs))
        if isinstance(checked, Response):
            return checked
        oauth_request, grant = checked
        client_id = grant.request.client.client_id
        # A remembered approval counts only when the browser came here on its own (an app
        # opened the URL, or the proxy's own page): a link on another site, which anyone
        # can craft for an approved client, is asked again (Sec-Fetch-Site, Fetch Metadata).
        direct = request.headers.get("sec-fetch-site", "none") in ("none", "same-origin")
        approved = self._approvals.approved(request.cookies.get(self._cookies["approved"]), client_id, grant.redirect_uri)
        if approved and direct:
            return await self._to_upstream(request, pairs)
        return await self._consent_page(grant, pairs)

    def _checked(self, request: Request, pairs: list[tuple[str, str]]) -> tuple[Any, Any] | Response:
        """The Authlib request and grant of a valid authorization request, else the answer."""
        oauth_request = form_request("GET", self._oauth.endpoint("authorize"), request.headers, pairs)
        try:
            return oauth_request, self._oauth.get_consent_grant(oauth_request, end_user=None)
        except OAuth2Error as error:
            return authorization_error(self._oauth, oauth_request, error)

    async def _consent_page(self, grant: Any, pairs: list[tuple[str, str]]) -> Response:
        ticket, browser = await self._state.open_consent(pairs)
        client = grant.request.client
        page = _render_consent(
            action=self._oauth.endpoint("authorize"),
            ticket=ticket,
            client=str(client.metadata.get("client_name") or client.client_id),
            client_id=client.client_id,
            redirect_uri=grant.redirect_uri,
            scope=grant.request.scope or "",
            resource=grant.request.resource,
            provider=urlsplit(self.upstream.authorize_url).netloc,
            upstream_scopes=" ".join(self.upstream.scopes),
        )
        response = HTMLResponse(page, headers=PAGE_HEADERS)
        # Strict: only the page's own form posts it back.
        self._set_cookie(response, "consent", browser, max_age=600, samesite="strict")
        return response

    async def _decide(self, request: Request) -> Response:
        form = await consent_form(request, self.issuer)  # CSRF: a cross-origin post is refused
        if isinstance(form, Response):
            return form
        ticket, browser = form.get("ticket", ""), request.cookies.get(self._cookies["consent"], "")
        pairs = await self._state.take_consent(ticket, browser)
        if pairs is None:
            return consent_refused()
        store = await self._state.snapshot(_client_of(pairs))
        checked = self._on(store, lambda: self._checked(request, pairs))
        if isinstance(checked, Response):
            return checked
        oauth_request, grant = checked
        if form.get("decision") != "approve":
            return to_response(self._on(store, lambda: self._oauth.create_authorization_response(oauth_request, None, grant)))
        response = await self._to_upstream(request, pairs)
        approved = self._approvals.add(
            request.cookies.get(self._cookies["approved"]), grant.request.client.client_id, grant.redirect_uri
        )
        self._set_cookie(response, "approved", approved, max_age=int(APPROVAL_LIFETIME), samesite="lax")
        return response

    # Step 3: the transaction, and the browser sent upstream.
    async def _to_upstream(self, request: Request, pairs: list[tuple[str, str]]) -> Response:
        pkce = Pkce()
        flow = request.cookies.get(self._cookies["flow"])
        state, browser = await self._state.open_transaction(pairs, pkce.verifier, flow)
        response = RedirectResponse(self.upstream.authorization_url(state, pkce), 302, headers=NO_STORE)
        # Lax: the upstream sends the browser back with a top-level GET from its own site.
        self._set_cookie(response, "flow", browser, max_age=int(TRANSACTION_LIFETIME), samesite="lax")
        return response

    # Steps 4 and 5: the upstream's answer, then the MCP client's code.
    async def _callback(self, request: Request) -> Response:
        query = dict(parse_qsl(request.url.query, keep_blank_values=True))
        flow = request.cookies.get(self._cookies["flow"], "")
        transaction = await self._state.take_transaction(query.get("state", ""), flow)
        if transaction is None:
            return error_page(
                400,
                "invalid_request",
                "This sign-in is unknown, expired, already finished, or was started in another browser; "
                "start the authorization again from the application.",
            )
        pairs = list(transaction.pairs)
        store = await self._state.snapshot(_client_of(pairs))
        checked = self._on(store, lambda: self._checked(request, pairs))
        if isinstance(checked, Response):  # the client went away meanwhile (its registration dropped)
            return checked
        oauth_request, grant = checked
        signed_in = await self._signed_in(query, transaction.verifier)
        if signed_in is None:
            return self._failed(grant, query)
        subject, tokens = signed_in
        reply = self._on(store, lambda: self._oauth.create_authorization_response(oauth_request, subject, grant))
        code = dict(parse_qsl(urlsplit(reply.location or "").query)).get("code")
        if code is not None:  # the proxy's tokens from this code carry sid = sid_of(code); held before the code is
            await self._state.put_session(sid_of(code), _session(tokens))
        await self._state.commit(store)  # the code, only now usable
        return to_response(reply)  # the flow cookie stays: other sign-ins of this browser may be pending

    async def _signed_in(self, query: Mapping[str, str], verifier: str) -> tuple[str, dict[str, Any]] | None:
        """The upstream user this callback signed in and the upstream's token response,
        or None (logged: why)."""
        if "error" in query or not query.get("code"):
            log.info("OAuth proxy: the upstream answered %r", query.get("error", "no code")[:100])
            return None
        if self._upstream_issuer is not None and "iss" in query and query["iss"] != self._upstream_issuer:
            log.warning("OAuth proxy: a callback names issuer %r, not the upstream's", query["iss"][:200])
            return None  # RFC 9207 2.4: a mix-up
        try:
            tokens = await self.upstream.exchange(query["code"], verifier)
            return await self.upstream.subject(tokens), tokens
        except UpstreamError as exc:
            log.warning("OAuth proxy: %s", exc.message)
            return None

    def _failed(self, grant: Any, query: Mapping[str, str]) -> Response:
        """The MCP client's redirect saying the sign-in did not complete (its own state, iss)."""
        denied = query.get("error") == "access_denied"
        params = [
            ("error", "access_denied" if denied else "temporarily_unavailable"),
            ("error_description", "The user denied access" if denied else "Signing in upstream failed; try again"),
        ]
        state = grant.request.payload.state
        if state:
            params.append(("state", state))
        params.append(("iss", self.issuer))
        return RedirectResponse(add_params_to_uri(grant.redirect_uri, params), 302, headers=NO_STORE)

    def _set_cookie(self, response: Response, name: str, value: str, *, max_age: int, samesite: Any) -> None:
        response.set_cookie(
            self._cookies[name], value, max_age=max_age, path="/", secure=self._secure, httponly=True, samesite=samesite
        )


def _identifier(identify: Identify | None, upstream_issuer: str | None, audience: str) -> Identify:
    """``identify``, else the ``sub`` of the upstream's JWT access tokens (``upstream_issuer``)."""
    if identify is not None:
        return identify
    if upstream_issuer is None:
        raise ValueError(
            "say how the proxy learns who signed in: identify= (an async function of the upstream's "
            "token response), or upstream_issuer= when the upstream's access tokens are JWTs"
        )
    return _jwt_subject(JwtVerifier(upstream_issuer, audience=audience))


def _own_urls(resource: str, issuer: str | None, callback_url: str | None) -> tuple[str, str]:
    """The proxy's issuer and callback URL (by default on the resource's origin); ``ValueError``
    for one that is neither https nor http on a loopback host."""
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(resource))
    urls = ((issuer or origin).rstrip("/"), callback_url or f"{origin}/oauth/callback")
    for name, url in zip(("issuer", "callback_url"), urls, strict=True):
        if urlsplit(url).scheme != "https" and not is_loopback_http(url):
            raise ValueError(f"{name} {url!r} must be https, or http on a loopback host for development")
    return urls


def _cookie_names(secure: bool) -> dict[str, str]:
    # __Host-: only this origin, Path=/, Secure (security_best_practices.mdx, Consent
    # Cookie Security); a loopback http development server cannot set Secure ones.
    prefix = "__Host-" if secure else ""
    return {name: f"{prefix}modelctx-proxy-{name}" for name in ("consent", "approved", "flow")}


def _served_hosts(issuer: str, resource: str) -> list[str]:
    """The Host values the proxy's endpoints answer (a page rebinding its own name to a
    loopback address reaches them with its name in Host)."""
    hosts = {urlsplit(issuer).hostname or "", urlsplit(resource).hostname or ""}
    if is_loopback_http(issuer):
        hosts |= {"127.0.0.1", "localhost", "::1", "[::1]"}
    return sorted(hosts)


def _client_of(pairs: list[tuple[str, str]]) -> str | None:
    """The ``client_id`` an authorization request names (the first, as Authlib reads it)."""
    return next((value for name, value in pairs if name == "client_id"), None)


def _fresh(session: UpstreamSession) -> bool:
    """Whether ``session``'s upstream access token is good for 30 s more (or says no expiry)."""
    return session.expires_at is None or session.expires_at > time.time() + 30


def _session(tokens: Mapping[str, Any], previous: UpstreamSession | None = None) -> UpstreamSession:
    expires_in = tokens.get("expires_in")
    refresh = tokens.get("refresh_token")
    return UpstreamSession(
        access_token=str(tokens["access_token"]),
        refresh_token=refresh if isinstance(refresh, str) else (previous.refresh_token if previous else None),
        expires_at=time.time() + expires_in if isinstance(expires_in, (int, float)) and expires_in > 0 else None,
        forget_at=previous.forget_at if previous else time.time() + SESSION_LIFETIME,
    )


def _jwt_subject(verifier: JwtVerifier) -> Identify:
    async def identify(tokens: Mapping[str, Any]) -> str:
        try:
            principal = await verifier.verify(str(tokens["access_token"]))
        except InvalidToken as exc:
            raise UpstreamError(f"the upstream access token does not verify: {exc.message}") from None
        if not principal.subject:
            raise UpstreamError("the upstream access token names no subject (sub)")
        return principal.subject

    return identify


def _render_consent(
    *,
    action: str,
    ticket: str,
    client: str,
    client_id: str,
    redirect_uri: str,
    scope: str,
    resource: str,
    provider: str,
    upstream_scopes: str,
) -> str:
    """The proxy's consent page: which client, where its code goes, for what, and what
    the upstream will be asked for (security_best_practices.mdx, Consent UI)."""
    e = html.escape
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize {e(client)}</title>
<style>body{{font-family:sans-serif;max-width:40em;margin:3em auto}}dt{{font-weight:bold}}</style></head>
<body><h1>Authorize {e(client)}?</h1>
<p><b>{e(client)}</b> (client id <code>{e(client_id)}</code>) asks to use <b>{e(resource)}</b> as you.
If you approve, you sign in at <b>{e(provider)}</b> next.</p>
<dl><dt>Scope here</dt><dd>{e(scope) or "(none named)"}</dd>
<dt>Asked of {e(provider)}</dt><dd>{e(upstream_scopes) or "(no scope named)"}</dd>
<dt>The answer goes to</dt><dd>{e(redirect_uri)}</dd></dl>
<p>Approve only if you started this from that application.</p>
<form method="post" action="{e(action)}">
<input type="hidden" name="ticket" value="{e(ticket)}">
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>
"""

