"""``WorkloadIdentityProvider``: workload identity federation (SEP-1933, the extension
``io.modelcontextprotocol/auth/wif``).

A workload with no secret of its own (a Kubernetes pod, a cloud function, a CI job)
holds a JWT its platform issued. It presents that JWT to the MCP server's authorization
server with the JWT bearer grant (RFC 7523 §2.1): ``grant_type=urn:ietf:params:oauth:
grant-type:jwt-bearer``, ``assertion=<the JWT>``, ``resource`` (RFC 8707) and ``scope``,
and gets an access token. The JWT's ``aud`` must be the authorization server's issuer:
a callable source is given that issuer, to mint for it.

A refused grant is reported, never retried: the same assertion is not sent again after
a refusal, and no other grant is tried in its place (the extension: surface
``invalid_grant``, ``invalid_scope``, ``unauthorized_client``).
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import AuthorizationError
from ..transports.fetch import UrlPolicy
from ._client_base import OAuthProviderBase
from ._discovery import AuthServerMetadata, ResourceMetadata
from ._registration import Registration, choose_auth_method
from ._tokens import StoredCredentials, TokenStore

__all__ = ["JWT_BEARER", "AssertionSource", "Refusals", "WorkloadIdentityProvider"]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_EXPIRY_MARGIN = 10.0  # seconds: an assertion this close to its exp is not sent
_QUIET_PERIOD = 60.0  # seconds after a refusal during which no grant runs for that resource
# The reason in OAuthProviderBase._token_request's message ("... failed: <error>: <description>; check ...").
_REASON = re.compile(r"failed: (.*?)(?:; check the client's|$)")

#: Gives an assertion for an audience (the authorization server's issuer).
AssertionGetter = Callable[[str], "str | Awaitable[str]"]


def jwt_expiry(token: str) -> float | None:
    """The ``exp`` of a JWT, read without verifying it (the receiver verifies); None
    when ``token`` is not a JWT or names no expiry (a SAML assertion, an opaque token)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def fingerprint(secret: str) -> str:
    """What is remembered of an assertion: a digest, never the text."""
    return hashlib.sha256(secret.encode()).hexdigest()


class Refusals:
    """What was refused, so that it is reported again instead of retried: an assertion
    (remembered by its digest) is never sent again; for ``_QUIET_PERIOD`` seconds after a
    refusal for a resource no grant runs for it (a caller falling back to another request
    would otherwise turn one refusal into several)."""

    def __init__(self) -> None:
        self._assertions: dict[str, str] = {}
        self._resources: dict[str, tuple[float, str]] = {}

    def check_resource(self, resource: str) -> None:
        noted = self._resources.get(resource)
        if noted is not None and time.monotonic() - noted[0] < _QUIET_PERIOD:
            raise AuthorizationError(noted[1] + f" (refused less than {_QUIET_PERIOD:g}s ago; not asked again)")

    def check_assertion(self, assertion: str) -> None:
        message = self._assertions.get(fingerprint(assertion))
        if message is not None:
            raise AuthorizationError(message + " (that assertion was refused; it is not sent again)")

    def note(self, resource: str, assertion: str, message: str) -> None:
        self._assertions[fingerprint(assertion)] = message
        self._resources[resource] = (time.monotonic(), message)


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class AssertionSource:
    """Where assertions come from: a fixed string, a callable given the audience (sync or
    async), or a file re-read on each use (a platform rotates it). An assertion from a
    string or callable is kept per audience while current; one past its ``exp`` is never returned: the source is
    asked again, once, and if that one has expired too, ``AuthorizationError`` says so."""

    def __init__(
        self,
        what: str,
        *,
        value: str | AssertionGetter | None = None,
        path: str | Path | None = None,
    ) -> None:
        if (value is None) == (path is None):
            raise ValueError(f"give the {what} as a string or callable, or as a file (one of them)")
        self.what = what
        self._value = value
        self._path = Path(path) if path is not None else None
        self._kept: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"AssertionSource({self.what!r}, from={self.origin})"

    @property
    def origin(self) -> str:
        if self._path is not None:
            return f"the file {self._path}"
        return "the callable given" if callable(self._value) else "the string given"

    async def get(self, audience: str) -> str:
        kept = self._kept.get(audience)
        if kept is not None and not _expired(kept) and self._path is None:
            return kept  # a file is re-read: its writer may have rotated it early
        self._kept.pop(audience, None)
        assertion = await self._read(audience)
        if _expired(assertion):
            assertion = await self._read(audience)  # a source with a cache of its own may lag once
        if _expired(assertion):
            raise AuthorizationError(f"the {self.what} from {self.origin} expired at {_when(jwt_expiry(assertion) or 0)} "
                                     f"(now {_when(time.time())}); {self._remedy()}")
        self._kept[audience] = assertion
        return assertion

    def forget(self, audience: str) -> None:
        """Drop the assertion kept for ``audience`` (it was refused)."""
        self._kept.pop(audience, None)

    async def _read(self, audience: str) -> str:
        if self._path is not None:
            try:
                text = self._path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise AuthorizationError(
                    f"cannot read the {self.what} from {self._path}: {exc.strerror or type(exc).__name__}; "
                    "check the path and that this process may read it"
                ) from None
        elif callable(self._value):
            produced: Any = self._value(audience)
            text = await produced if inspect.isawaitable(produced) else produced
        else:
            text = self._value or ""
        if not isinstance(text, str) or not text.strip():
            raise AuthorizationError(f"{self.origin} gave no {self.what} (an empty value); {self._remedy()}")
        return text.strip()

    def _remedy(self) -> str:
        if self._path is not None:
            return "whatever writes that file (a token projection, a refresher) must keep it current"
        if callable(self._value):
            return "the callable must return a current one"
        return "give a callable or a file that yields current ones instead of a fixed string"


def _expired(assertion: str) -> bool:
    exp = jwt_expiry(assertion)
    return exp is not None and time.time() >= exp - _EXPIRY_MARGIN


def refusal(exc: AuthorizationError, secrets: tuple[str, ...]) -> tuple[str | None, str]:
    """The OAuth error code and the reason of a refused token request, with any of
    ``secrets`` the server echoed replaced by ``[redacted]``."""
    text = str(exc)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    found = _REASON.search(text)
    if found is None:
        return None, text
    reason = found.group(1)
    code = re.match(r"([a-z_]+)(?::|$)", reason)  # RFC 6749 §5.2 codes; "HTTP 502" is none
    return (code.group(1) if code else None), reason


def require_jwt_bearer(server: AuthServerMetadata) -> None:
    """Refuse, before anything is sent, a server whose metadata lists grant types and not
    the JWT bearer grant."""
    grants = server.listed("grant_types_supported")
    if grants is not None and JWT_BEARER not in grants:
        raise AuthorizationError(
            f"the authorization server {server.issuer} does not accept the JWT bearer grant "
            f"(it lists {', '.join(grants) or 'no grant types'}); this server cannot be used with workload or "
            "enterprise-managed authorization"
        )


class WorkloadIdentityProvider(OAuthProviderBase):
    """Authorizes a workload with the JWT bearer grant (RFC 7523), presenting a JWT its
    platform issued.

    ``assertion``: the JWT, or a callable ``(audience) -> jwt`` (sync or async; the
    audience is the authorization server's issuer); or ``assertion_file``: a file holding
    it, re-read on each use. ``client_id``: the workload's client at the authorization
    server (sent in the form; with ``client_secret``, authenticated as the server lists).
    ``scopes``: what to ask for when the server's challenge and metadata name nothing. A refused grant raises ``AuthorizationError`` and is not retried with the
    same assertion. Tokens are kept in ``store``.
    """

    def __init__(
        self,
        assertion: str | AssertionGetter | None = None,
        *,
        assertion_file: str | Path | None = None,
        client_id: str,
        client_secret: str | None = None,
        scopes: tuple[str, ...] = (),
        store: TokenStore | None = None,
        timeout: float = 10.0,
        url_policy: UrlPolicy | None = None,
    ) -> None:
        super().__init__(store=store, url_policy=url_policy, timeout=timeout, refresh=False, scopes=scopes)
        self.source = AssertionSource("workload identity token", value=assertion, path=assertion_file)
        self._client_id = client_id
        self._client_secret = client_secret
        self.refusals = Refusals()

    def __repr__(self) -> str:
        return f"WorkloadIdentityProvider(client_id={self._client_id!r}, source={self.source.origin}, store={self.store!r})"

    async def _obtain(
        self,
        server: AuthServerMetadata,
        resource_metadata: ResourceMetadata,
        resource: str,
        stored: StoredCredentials | None,
        scope: str | None,
        policy: UrlPolicy,
    ) -> StoredCredentials:
        self.refusals.check_resource(resource)
        require_jwt_bearer(server)
        scope = self._scope_for(scope)
        assertion = await self.source.get(server.issuer)
        return await grant_with_assertion(
            self, server, resource_metadata, resource, assertion, scope, policy,
            self._registration(server), self.refusals, self.source, _workload_hint,
        )

    def _registration(self, server: AuthServerMetadata) -> Registration:
        method = choose_auth_method(server, self._client_secret is not None)
        return Registration(self._client_id, self._client_secret, method)


Hint = Callable[[str | None, AuthServerMetadata, str | None], str]


async def grant_with_assertion(
    provider: OAuthProviderBase,
    server: AuthServerMetadata,
    resource_metadata: ResourceMetadata,
    resource: str,
    assertion: str,
    scope: str | None,
    policy: UrlPolicy,
    registration: Registration,
    refusals: Refusals,
    source: AssertionSource | None,
    hint: Hint,
) -> StoredCredentials:
    """The JWT bearer grant with ``assertion`` at ``server``. A refusal (an OAuth error
    answer) is remembered in ``refusals`` and raised as ``AuthorizationError`` saying what
    to do (``hint``), with neither the assertion nor the client secret in it."""
    refusals.check_assertion(assertion)
    form = {"grant_type": JWT_BEARER, "assertion": assertion}
    if scope:
        form["scope"] = scope
    try:
        return await provider._token_request(
            server, form, registration, resource, policy, scope, resource_indicator=resource_metadata.resource
        )
    except AuthorizationError as exc:
        code, reason = refusal(exc, (assertion, registration.client_secret or ""))
        message = (
            f"the authorization server {server.issuer} refused the JWT bearer grant ({reason}); "
            f"{hint(code, server, scope)}"
        )
        if code is not None:  # the server answered with a refusal; a failing server is not remembered
            refusals.note(resource, assertion, message)
        if source is not None:
            source.forget(server.issuer)
        raise AuthorizationError(message) from None


def _workload_hint(code: str | None, server: AuthServerMetadata, scope: str | None) -> str:
    if code == "invalid_grant":
        return (
            "the workload's JWT was not accepted: check that it is current, that its audience is "
            f"{server.issuer}, and that {server.issuer} trusts its issuer and subject (the federation settings)"
        )
    if code == "invalid_scope":
        return f"the scopes asked for ({scope or 'none'}) are not allowed for this workload; ask for fewer, or have them granted"
    if code in ("unauthorized_client", "invalid_client"):
        return f"this workload may not use the JWT bearer grant at {server.issuer}; its administrator must allow it"
    return "fix the cause, then connect again"
