"""Client registration and client authentication at the token endpoint.

basic/authorization/client-registration.mdx (2026-07-28): a client uses, in this order,
credentials registered beforehand; a Client ID Metadata Document (its ``client_id`` is an
``https`` URL) when the authorization server sets ``client_id_metadata_document_supported``;
Dynamic Client Registration (RFC 7591) with an ``application_type``. At the token endpoint
it authenticates as it registered: ``client_secret_basic``, ``client_secret_post`` or
``none`` (a public client); ``private_key_jwt`` is in ``_client_credentials``.
"""

from __future__ import annotations

import base64
import urllib.parse
from dataclasses import dataclass, field

from ..errors import AuthorizationError
from ..transports.fetch import UrlPolicy, post_json
from ._discovery import AuthServerMetadata
from ._loopback import is_loopback_host

__all__ = ["ClientMetadata", "Registration", "apply_client_auth", "choose_auth_method", "register_dynamically"]

#: The default redirect URI of a native client: the loopback receiver in ``_redirect``.
#: Its port is below every system's ephemeral range (Linux 32768-60999, macOS and
#: Windows 49152-65535): a port in that range may be held at any moment by some
#: outgoing connection's local end, and the receiver could not listen.
DEFAULT_REDIRECT_URI = "http://127.0.0.1:18418/callback"


@dataclass(frozen=True)
class ClientMetadata:
    """What the client says about itself when it registers (RFC 7591 §2).

    ``redirect_uris``: the first is where the authorization response is received; the
    default, ``http://127.0.0.1:18418/callback``, is the loopback receiver's.
    ``application_type`` defaults to ``native`` when every redirect URI is a loopback
    ``http`` URL or a private scheme, else ``web`` (client-registration.mdx)."""

    client_name: str = "modelctx"
    redirect_uris: tuple[str, ...] = (DEFAULT_REDIRECT_URI,)
    application_type: str | None = None
    client_uri: str | None = None
    logo_uri: str | None = None

    def __post_init__(self) -> None:
        uris = self.redirect_uris
        object.__setattr__(self, "redirect_uris", (uris,) if isinstance(uris, str) else tuple(uris))
        if not self.redirect_uris:
            raise ValueError("ClientMetadata needs at least one redirect URI")

    @property
    def kind(self) -> str:
        if self.application_type:
            return self.application_type
        return "native" if all(_native_redirect(uri) for uri in self.redirect_uris) else "web"


def _native_redirect(uri: str) -> bool:
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return True  # a private-use scheme (com.example.app:/callback)
    return is_loopback_host(parts.hostname or "")


@dataclass(frozen=True)
class Registration:
    """The client's identity at one authorization server (the secret out of ``repr``)."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    auth_method: str = "none"


def choose_auth_method(server: AuthServerMetadata, has_secret: bool) -> str:
    """How to authenticate at the token endpoint: with a secret, ``client_secret_basic``
    unless the server lists only ``client_secret_post`` (RFC 8414: the default is basic);
    without one, ``none``."""
    supported = server.listed("token_endpoint_auth_methods_supported") or ("client_secret_basic",)
    if not has_secret:
        return "none"
    for method in ("client_secret_basic", "client_secret_post"):
        if method in supported:
            return method
    return "none" if "none" in supported else "client_secret_basic"


async def register_dynamically(
    server: AuthServerMetadata,
    client: ClientMetadata,
    grant_types: tuple[str, ...],
    policy: UrlPolicy,
    *,
    timeout: float = 10.0,
) -> Registration:
    """Register with RFC 7591 at the server's ``registration_endpoint``."""
    endpoint = server.registration_endpoint
    if endpoint is None:
        raise AuthorizationError(
            f"the authorization server {server.issuer} offers no dynamic client registration and "
            "no client metadata documents; register a client there and pass its client_id "
            "(and client_secret) to the OAuth provider"
        )
    supported = server.listed("token_endpoint_auth_methods_supported") or ("client_secret_basic",)
    # A native client cannot keep a secret: ask to be public when the server allows it.
    requested = "none" if "none" in supported else next(
        (m for m in ("client_secret_basic", "client_secret_post") if m in supported), "none"
    )
    document: dict[str, object] = {
        "client_name": client.client_name,
        "redirect_uris": list(client.redirect_uris),
        "grant_types": list(grant_types),
        "response_types": ["code"],
        "token_endpoint_auth_method": requested,
        "application_type": client.kind,
    }
    for name in ("client_uri", "logo_uri"):
        value = getattr(client, name)
        if value:
            document[name] = value
    reply = await post_json(endpoint, document, policy, timeout=timeout)
    data = reply.data if isinstance(reply.data, dict) else {}
    if reply.status not in (200, 201) or not isinstance(data.get("client_id"), str):
        reason = _oauth_error(data) or f"HTTP {reply.status}"
        raise AuthorizationError(
            f"dynamic client registration at {endpoint} failed ({reason}); register the client "
            "by hand and pass its client_id to the OAuth provider"
        )
    secret = data.get("client_secret") if isinstance(data.get("client_secret"), str) else None
    method = data.get("token_endpoint_auth_method")
    if not isinstance(method, str):
        method = requested  # the server accepted what was asked for
    return Registration(data["client_id"], secret, method)


def apply_client_auth(
    registration: Registration, form: dict[str, str], headers: dict[str, str]
) -> None:
    """Authenticate a token request as ``registration`` says (RFC 6749 §2.3.1)."""
    method = registration.auth_method
    if method == "client_secret_basic" and registration.client_secret is not None:
        # Each part form-encoded before base64 (RFC 6749 §2.3.1).
        pair = f"{_form(registration.client_id)}:{_form(registration.client_secret)}"
        headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        return
    form["client_id"] = registration.client_id
    if method == "client_secret_post" and registration.client_secret is not None:
        form["client_secret"] = registration.client_secret


def _form(value: str) -> str:
    return urllib.parse.quote_plus(value)


def _oauth_error(data: object) -> str | None:
    """``error: error_description`` of an OAuth error body (never echoing anything else)."""
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        return None
    description = data.get("error_description")
    text = str(data["error"])[:100]
    return f"{text}: {str(description)[:300]}" if isinstance(description, str) else text
