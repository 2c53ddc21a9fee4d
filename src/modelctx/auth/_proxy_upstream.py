"""The OAuth proxy's side as a client of the upstream identity provider: one
pre-registered confidential client, its redirect URI at the proxy, PKCE S256 on every
request (OAuth 2.1 section 7.5.1: a confidential client too), the code exchanged
server to server, and who signed in read from what the upstream answered.

The upstream's tokens stay in the proxy: ``exchange`` returns them to its callback,
which reads the subject and keeps them for the server's own calls; no MCP client
receives them (security best practices, Token Passthrough).
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..errors import MCPError
from ..transports.fetch import UrlPolicy, post_form
from ._pkce import Pkce

__all__ = ["Identify", "Upstream", "UpstreamError"]

#: Who signed in, from the upstream's token response (a dict, as the upstream sent it):
#: their stable identifier there, the ``sub`` of the proxy's tokens.
Identify = Callable[[Mapping[str, Any]], Awaitable[str]]


class UpstreamError(Exception):
    """The upstream refused or failed: ``message`` is for the operator's log; the
    browser is told only that signing in failed."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Upstream:
    """The upstream identity provider and the proxy's client there."""

    def __init__(
        self,
        *,
        authorize_url: str,
        token_url: str,
        client_id: str,
        client_secret: str | None,
        redirect_uri: str,
        scopes: Sequence[str],
        resource: str | None,
        extra_params: Mapping[str, str],
        identify: Identify,
        timeout: float = 10.0,
    ) -> None:
        for name, url in (("upstream_authorize", authorize_url), ("upstream_token", token_url)):
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("https", "http") or not parts.netloc or parts.fragment:
                raise ValueError(f"{name} {url!r} must be an absolute http(s) URL without a fragment")
        self.authorize_url = authorize_url
        self.token_url = token_url
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri
        self.scopes = tuple(scopes)
        self.resource = resource
        self.extra_params = dict(extra_params)
        self.identify = identify
        self.timeout = timeout
        # The operator named these URLs: loopback and private addresses are theirs to use.
        self._policy = UrlPolicy(allow_loopback=True, allow_private=True)

    def authorization_url(self, state: str, pkce: Pkce) -> str:
        """Where the browser goes to sign in upstream for the transaction ``state``."""
        query = {
            **self.extra_params,
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "state": state,
            "code_challenge": pkce.challenge,
            "code_challenge_method": pkce.method,
        }
        if self.scopes:
            query["scope"] = " ".join(self.scopes)
        if self.resource is not None:
            query["resource"] = self.resource
        separator = "&" if urllib.parse.urlsplit(self.authorize_url).query else "?"
        return self.authorize_url + separator + urllib.parse.urlencode(query)

    async def exchange(self, code: str, verifier: str) -> dict[str, Any]:
        """The upstream's token response for ``code``; raises ``UpstreamError`` saying
        what failed when it refuses, cannot be reached or answers no access token."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
        }
        return await self._token_request(form, "the code")

    async def refresh(self, refresh_token: str) -> dict[str, Any]:
        """The upstream's token response for ``refresh_token`` (``UpstreamError`` as ``exchange``)."""
        return await self._token_request({"grant_type": "refresh_token", "refresh_token": refresh_token}, "the refresh token")

    async def _token_request(self, form: dict[str, str], what: str) -> dict[str, Any]:
        if self.resource is not None:
            form["resource"] = self.resource
        headers = {"accept": "application/json"}  # GitHub answers form-encoded without it
        if self.client_secret is not None:
            pair = f"{_quoted(self.client_id)}:{_quoted(self.client_secret)}"  # RFC 6749 2.3.1
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form["client_id"] = self.client_id
        try:
            reply = await post_form(self.token_url, form, self._policy, timeout=self.timeout, headers=headers)
        except MCPError as exc:
            raise UpstreamError(f"the upstream token endpoint {self.token_url} could not be reached: {exc}") from None
        data = reply.data if isinstance(reply.data, dict) else {}
        if reply.status != 200 or not isinstance(data.get("access_token"), str):
            reason = data.get("error_description") or data.get("error") or f"HTTP {reply.status}"
            raise UpstreamError(
                f"the upstream token endpoint {self.token_url} refused {what}: {str(reason)[:200]}; "
                "check the proxy's client_id, client_secret and that its redirect URI "
                f"{self.redirect_uri} is registered there"
            )
        return data

    async def subject(self, tokens: Mapping[str, Any]) -> str:
        """Who signed in, by ``identify``; raises ``UpstreamError`` when it cannot say."""
        try:
            subject = await self.identify(tokens)
        except UpstreamError:
            raise
        except Exception as exc:  # noqa: BLE001 - the operator's function: its failure is logged, not shown
            raise UpstreamError(f"identify could not name the user: {type(exc).__name__}: {exc}") from None
        if not isinstance(subject, str) or not subject:
            raise UpstreamError(f"identify returned {subject!r}, not the user's identifier (a non-empty string)")
        return subject


def _quoted(value: str) -> str:
    return urllib.parse.quote(value, safe="")
