"""The protected resource: an MCP server as an OAuth 2.1 resource server.

basic/authorization/*.mdx (2026-07-28) on RFC 9728 (Protected Resource Metadata),
RFC 6750 (Bearer tokens and their challenges) and RFC 8707 (audience). A
``ProtectedResource`` plugs into the HTTP app (``HttpApp(server, auth=resource)``),
which asks it, for every request and before any MCP work:

1. a GET of one of its well-known paths (the path-inserted
   ``/.well-known/oauth-protected-resource/<endpoint path>`` and the root one) is
   answered with the metadata document, no token needed;
2. any other request must carry ``Authorization: Bearer <token>`` (a token in the
   query string or the body is never read: authorization/index.mdx, Token
   Requirements); the ``verifier`` checks it and returns an ``AccessToken``;
3. the token must hold every one of ``required_scopes``.

Refusals are exceptions the transport turns into challenges (``challenge``): no or
a bad token, ``InvalidToken``, 401; too few scopes, ``InsufficientScope``, 403 naming
every scope needed at once, so the client steps up once.

The raw token is not kept anywhere after verification: the ``AccessToken`` a
handler sees (``ctx.principal``) has no field for it, so a tool cannot pass the
client's token on to another service (security best practices, Token Passthrough).
Only a token that names neither a subject nor a client carries its SHA-256
(``token_digest``), which cannot be turned back into the token: what its sessions and
limits are keyed by (``transports.identity``), since nothing else names who it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..errors import InsufficientScope, InvalidToken
from ..transports.identity import identity

if TYPE_CHECKING:
    from ._dpop import DPoPVerifier

__all__ = ["AccessToken", "ProtectedResource", "TokenVerifier"]

WELL_KNOWN = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class AccessToken:
    """A verified access token, as handlers see it (``ctx.principal``).

    ``subject`` and ``issuer`` name the principal (a refreshed token is the same
    one); ``scopes`` are those granted; ``audience`` the resources it was issued for;
    ``expires_at`` a Unix time; ``claims`` everything the issuer said (read only);
    ``jkt`` the thumbprint of the key a DPoP-bound token is bound to. The token text
    itself is deliberately absent. ``token_digest``: the SHA-256 (hex) of the token
    text, set by ``ProtectedResource.authenticate`` only on a token that names neither
    a subject nor a client: such a token is no one but itself, so a handshake session,
    quota or ``requestState`` is bound to the token (``transports.identity``).
    """

    subject: str | None
    issuer: str | None
    scopes: frozenset[str] = frozenset()
    client_id: str | None = None
    audience: tuple[str, ...] = ()
    expires_at: float | None = None
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    jkt: str | None = None
    token_digest: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (
            f"AccessToken(subject={self.subject!r}, issuer={self.issuer!r}, "
            f"client_id={self.client_id!r}, scopes={sorted(self.scopes)!r})"
        )


class TokenVerifier(Protocol):
    """What checks a bearer token for a ``ProtectedResource``."""

    async def verify(self, token: str) -> AccessToken:
        """The token's ``AccessToken``; raises ``InvalidToken`` (saying why, never
        quoting the token) when it is not valid for this resource."""
        ...


class ProtectedResource:
    """An MCP endpoint's OAuth declaration: who issues its tokens, which scopes it
    knows and requires, and how tokens are checked.

    ``resource``: the canonical URL of the MCP endpoint (``https://host/mcp``; no
    fragment), the audience tokens must name (RFC 8707). ``authorization_servers``:
    issuer URLs (at least one, RFC 9728 / authorization-server-discovery.mdx).
    ``scopes_supported``: advertised in the metadata. ``required_scopes``: held by
    every token on every request (403 otherwise). ``verifier``: a ``TokenVerifier``
    (``JwtVerifier``, ``IntrospectionVerifier``). ``resource_name`` and
    ``resource_documentation`` are optional metadata fields.
    ``dpop`` (RFC 9449): ``"off"`` (bearer tokens only; a DPoP-bound token is refused),
    ``"allowed"`` (bearer tokens, and DPoP-bound ones presented as ``Authorization: DPoP``
    with a valid proof) or ``"required"`` (DPoP only). ``dpop_nonce``: require the
    server's nonce in proofs (clients retry once with it). ``dpop_verifier``: a
    ``DPoPVerifier`` of one's own (algorithms, iat window, replay cache).
    ``scope_hierarchy``: what each scope includes (``{"files": ["files:read",
    "files:write"]}``), followed transitively: a token granted ``files`` holds
    ``files:read`` for every check, ``ctx.scopes`` and ``RequiredScopes`` included
    (authorization/index.mdx: servers MUST honor their scope hierarchies).
    Raises ``ValueError`` for a resource URL or issuer list that cannot work.
    """

    def __init__(
        self,
        resource: str,
        *,
        authorization_servers: Sequence[str],
        verifier: TokenVerifier,
        scopes_supported: Iterable[str] = (),
        required_scopes: Iterable[str] = (),
        resource_name: str | None = None,
        resource_documentation: str | None = None,
        dpop: Literal["off", "allowed", "required"] = "off",
        dpop_nonce: bool = False,
        dpop_verifier: DPoPVerifier | None = None,
        scope_hierarchy: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        parts = _checked_resource(resource)
        self._implied = _closure(scope_hierarchy or {})
        if dpop not in ("off", "allowed", "required"):
            raise ValueError(f"dpop is 'off', 'allowed' or 'required', not {dpop!r}")
        self.dpop = dpop
        self.dpop_verifier = _dpop_verifier(dpop, dpop_nonce, dpop_verifier)
        if isinstance(authorization_servers, str) or not authorization_servers:
            raise ValueError("authorization_servers is a list of issuer URLs with at least one entry")
        self.resource = resource
        self.authorization_servers = tuple(authorization_servers)
        self.verifier = verifier
        self.scopes_supported = tuple(scopes_supported)
        self.required_scopes = frozenset(required_scopes)
        origin = self._origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        #: The document's URL named in every challenge: the path-inserted one (RFC 9728 3.1).
        self.metadata_url = origin + WELL_KNOWN + path
        self._paths = frozenset({WELL_KNOWN + path, WELL_KNOWN})
        document: dict[str, Any] = {
            "resource": resource,
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if self.scopes_supported:
            document["scopes_supported"] = list(self.scopes_supported)
        if resource_name is not None:
            document["resource_name"] = resource_name
        if resource_documentation is not None:
            document["resource_documentation"] = resource_documentation
        if self.dpop_verifier is not None:  # RFC 9728 2 (its DPoP fields)
            document["dpop_signing_alg_values_supported"] = list(self.dpop_verifier.algorithms)
            document["dpop_bound_access_tokens_required"] = dpop == "required"
        self._document = document

    # -- how the processes serving it share state --------------------------------------
    def share_through_redis(self, url: str, prefix: str) -> None:
        """Keep spent DPoP proofs in the Redis at ``url`` under ``<prefix>dpop:``, so every
        worker and replica sharing it refuses a replay (the HTTP app calls this when the
        server has a ``redis_url``). Does nothing without DPoP or with a ``dpop_verifier``
        whose replay cache is already shared."""
        if self.dpop_verifier is None or self.dpop_verifier.replays.shared:
            return
        from ._replays import RedisReplays

        self.dpop_verifier.replays = RedisReplays(url, prefix=f"{prefix}dpop:")

    def check_processes(self, processes: int) -> None:
        """Raise ``ValueError`` saying what to do when ``processes`` processes serving
        this resource would not share what must be shared: DPoP's record of spent proofs
        (each worker would accept every proof once). Called before workers are forked."""
        if processes > 1 and self.dpop_verifier is not None and not self.dpop_verifier.replays.shared:
            raise ValueError(
                f"DPoP (--auth-dpop) with {processes} workers needs Redis: each worker would keep its own "
                "record of spent proofs and accept every proof once; add --redis URL (or set "
                "ServerConfig.redis_url), or serve one worker"
            )

    # -- what the HTTP app asks --------------------------------------------------------
    def metadata_document(self, path: str) -> dict[str, Any] | None:
        """The Protected Resource Metadata document if ``path`` is one of its
        well-known paths, else None."""
        return dict(self._document) if path in self._paths else None

    async def authenticate(
        self, headers: Mapping[str, str], method: str = "POST", path: str | None = None
    ) -> AccessToken:
        """The verified token of a ``method`` request to the endpoint (``headers`` by
        lower-case name). ``path``: the path the request was sent to (the ASGI
        ``root_path`` and ``path``) when it is not the endpoint's own (``GET /sse``,
        ``POST /messages`` of HTTP+SSE beside it): a DPoP proof must then name that URL
        (RFC 9449 4.3: ``htu`` is the request's URL), on the resource's scheme and host;
        None: the resource URL.

        Raises ``InvalidToken`` (401) for a missing, malformed or invalid token (an
        ``InvalidDPoPProof`` for a DPoP proof that does not hold) and
        ``InsufficientScope`` (403) when it lacks one of ``required_scopes``.
        """
        authorization = headers.get("authorization")
        scheme = (authorization or "").strip().partition(" ")[0].lower()
        if self.dpop_verifier is not None and scheme == "dpop":
            url = self.resource if path is None else self._origin + "/" + path.lstrip("/")  # never a host
            principal = await self._dpop_principal(authorization or "", headers.get("dpop"), method, url, self.dpop_verifier)
        elif self.dpop == "required":
            raise InvalidToken(
                "This resource accepts DPoP-bound tokens only: send Authorization: DPoP <token> and a DPoP proof",
                token_sent=authorization is not None,
            )
        else:
            token = bearer_token(authorization)
            principal = await self.verifier.verify(token)
            if principal.jkt is not None:
                # A DPoP-bound token (RFC 9449 cnf.jkt) sent as a plain bearer token: accepting
                # it without checking a proof would undo its binding (RFC 9449 7.1).
                raise InvalidToken(
                    "The access token is DPoP-bound: send it as Authorization: DPoP with a proof"
                    if self.dpop_verifier is not None
                    else "The access token is DPoP-bound; this resource accepts bearer tokens only"
                )
        principal = self._with_implied_scopes(principal)
        self.check_scopes(principal, self.required_scopes)
        if identity(principal) is None:
            # Neither sub nor client_id: nothing names who it is but the token itself.
            token = (authorization or "").strip().partition(" ")[2].strip()
            digest = hashlib.sha256(token.encode()).hexdigest()
            principal = dataclasses.replace(principal, token_digest=digest)
        return principal

    def _with_implied_scopes(self, principal: AccessToken) -> AccessToken:
        if not self._implied:
            return principal
        implied = frozenset().union(*(self._implied.get(scope, ()) for scope in principal.scopes))
        if implied <= principal.scopes:
            return principal
        return dataclasses.replace(principal, scopes=principal.scopes | implied)

    async def _dpop_principal(
        self, authorization: str, proof: str | None, method: str, url: str, dpop: DPoPVerifier
    ) -> AccessToken:
        """RFC 9449 7.1: the token is valid and bound (``cnf.jkt``), and the proof names
        this request (``method`` to ``url``), this token (``ath``) and is signed by the
        key the token is bound to."""
        from ._dpop import InvalidDPoPProof

        token = authorization.strip().partition(" ")[2].strip()
        if not token or not _B64TOKEN.fullmatch(token):
            raise InvalidDPoPProof("The Authorization header is not 'DPoP <token>'")
        principal = await self.verifier.verify(token)
        if principal.jkt is None:
            raise InvalidDPoPProof("The access token is not DPoP-bound (no cnf.jkt); send it as Bearer")
        await dpop.verify(proof, method, url, access_token=token, jkt=principal.jkt)
        return principal

    def check_scopes(self, principal: AccessToken, needed: Iterable[str]) -> None:
        """Raise ``InsufficientScope`` naming ``required_scopes`` and ``needed`` when
        ``principal`` lacks any of ``needed``."""
        needed = frozenset(needed)
        if not needed <= principal.scopes:
            raise InsufficientScope(self.required_scopes | needed)

    def challenge(self, refusal: Exception) -> tuple[int, str]:
        """The HTTP status and ``WWW-Authenticate`` value answering ``refusal``
        (an ``InvalidToken`` or ``InsufficientScope``; RFC 6750 3, RFC 9728 5.1)."""
        if isinstance(refusal, InsufficientScope):
            scopes = self.required_scopes | refusal.required
            params = [
                ("error", "insufficient_scope"),
                ("scope", " ".join(sorted(scopes))),
                ("resource_metadata", self.metadata_url),
                ("error_description", refusal.message),
            ]
            return 403, self._challenges(params, [])
        params = []
        if getattr(refusal, "unavailable", False):
            # The proof could not be checked (its replay cache is down): not the client's
            # fault, so no error code; 503 and Retry-After (challenge_headers) instead.
            return 503, self._challenges([("resource_metadata", self.metadata_url)], [])
        dpop_params = self._dpop_error(refusal)  # a refused proof is said in the DPoP challenge
        if not dpop_params and (not isinstance(refusal, InvalidToken) or refusal.token_sent):
            description = refusal.message if isinstance(refusal, InvalidToken) else "The access token is invalid"
            params += [("error", "invalid_token"), ("error_description", description)]
        params.append(("resource_metadata", self.metadata_url))
        scope = self._challenge_scope()
        if scope:
            params.append(("scope", scope))
        return 401, self._challenges(params, dpop_params)

    def _dpop_error(self, refusal: Exception) -> list[tuple[str, str]]:
        """The DPoP challenge's error for a refused proof (RFC 9449 7.1, 9), else none."""
        if self.dpop_verifier is None:
            return []
        from ._dpop import InvalidDPoPProof

        if not isinstance(refusal, InvalidDPoPProof):
            return []
        error = "use_dpop_nonce" if refusal.use_nonce else "invalid_dpop_proof"
        return [("error", error), ("error_description", refusal.message)]

    def _challenges(self, params: list[tuple[str, str]], dpop_errors: list[tuple[str, str]]) -> str:
        """The Bearer challenge, the DPoP one (RFC 9449 7.1: ``algs``), or both, as
        ``dpop`` says; an error about a DPoP proof goes in the DPoP challenge only."""
        if self.dpop_verifier is None:
            return _bearer(params)
        common = [p for p in params if p[0] in ("resource_metadata", "scope")]
        dpop = [*dpop_errors, *(params if self.dpop == "required" else common)]
        dpop.append(("algs", " ".join(self.dpop_verifier.algorithms)))
        challenge = _scheme("DPoP", dpop)
        if self.dpop == "required":
            return challenge
        return _bearer(common if dpop_errors else params) + ", " + challenge

    def _challenge_scope(self) -> str:
        # What a client should ask for: the scopes every request needs, else all the
        # advertised ones (authorization/index.mdx, Scope Selection Strategy).
        return " ".join(sorted(self.required_scopes) or self.scopes_supported)


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (RFC 6750 2.1).

    Raises ``InvalidToken`` (``token_sent=False`` when there is no header) otherwise.
    """
    if authorization is None:
        raise InvalidToken("No access token: send Authorization: Bearer <token>", token_sent=False)
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise InvalidToken("The Authorization header is not 'Bearer <token>'", token_sent=scheme.lower() == "bearer")
    if not _B64TOKEN.fullmatch(token):
        raise InvalidToken("The bearer token is malformed (RFC 6750 2.1 b64token)")
    return token


_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# RFC 6750 3: error_description and scope may hold only these characters.
_NOT_QUOTABLE = re.compile(r'[^\x20\x21\x23-\x5b\x5d-\x7e]')


def _bearer(params: Sequence[tuple[str, str]]) -> str:
    return _scheme("Bearer", params)


def _scheme(name: str, params: Sequence[tuple[str, str]]) -> str:
    return f"{name} " + ", ".join(f'{key}="{_NOT_QUOTABLE.sub("?", value)}"' for key, value in params)


def _dpop_verifier(dpop: str, nonce: bool, given: DPoPVerifier | None) -> DPoPVerifier | None:
    """The proof checker ``dpop`` calls for (joserfc loads only then)."""
    if dpop == "off":
        return None
    from ._dpop import DPoPNonces, DPoPVerifier

    if given is not None:
        if nonce and given.nonces is None:
            given.nonces = DPoPNonces()
        return given
    return DPoPVerifier(nonces=DPoPNonces() if nonce else None)


def _closure(hierarchy: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Each scope with every scope it includes, directly or through others (cycles end)."""
    if any(isinstance(included, str) for included in hierarchy.values()):
        raise ValueError("scope_hierarchy maps a scope to a list of the scopes it includes, not to a string")
    direct = {scope: frozenset(included) for scope, included in hierarchy.items()}
    closed: dict[str, frozenset[str]] = {}
    for scope in direct:
        seen: set[str] = set()
        todo = list(direct[scope])
        while todo:
            included = todo.pop()
            if included not in seen:
                seen.add(included)
                todo.extend(direct.get(included, ()))
        closed[scope] = frozenset(seen)
    return closed


def _checked_resource(resource: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(resource)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ValueError(f"resource {resource!r} must be the absolute http(s) URL of the MCP endpoint")
    if parts.fragment or resource.endswith("#"):
        raise ValueError(f"resource {resource!r} must not have a fragment (RFC 8707 2)")
    return parts
