"""The token and registration endpoints, the opening of ``/authorize`` (the request read,
the consent form checked) and the authorization error answer, over an ``OAuthServer``:
one implementation for the development authorization server and the OAuth proxy
(``auth/_proxy.py``), which differ only in how a user is signed in."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc6749 import OAuth2Error
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._dpop import InvalidDPoPProof
from ._http import NO_STORE, bounded_body, bounded_form, error_page, named_client, to_response
from ._metadata import MetadataError, check_metadata, read_json
from ._oauth import OAuthServer, Reply, form_request, json_request

__all__ = [
    "MAX_AUTHORIZATION_REQUEST", "authorization_error", "authorization_pairs", "consent_form", "consent_refused",
    "register", "token",
]

# An authorization request's query string: a metadata document URL and a redirect URI
# (2,000 characters each at most), a state, a challenge, a scope and a resource fit in
# a quarter of it. It bounds what a pending consent and an unexchanged code hold.
MAX_AUTHORIZATION_REQUEST = 8 * 1024

#: Loads the client a token request names when it is not known yet (a Client ID
#: Metadata Document): the reason it cannot be used, or None.
ClientLoader = Callable[[str | None], Awaitable[str | None]]
#: Runs one synchronous Authlib call (``call``) for a request naming ``client_id`` and
#: the code or refresh token ``credential``, and returns its reply: the OAuth proxy
#: loads those records from Redis first and writes what changed after.
Runner = Callable[[str | None, str | None, Callable[[], Reply]], Awaitable[Reply]]


async def _direct(client_id: str | None, credential: str | None, call: Callable[[], Reply]) -> Reply:
    return call()


def authorization_pairs(request: Request) -> list[tuple[str, str]] | Response:
    """The parameters of a GET ``/authorize``, or the 400 page when its query is longer
    than ``MAX_AUTHORIZATION_REQUEST`` bytes."""
    if len(request.url.query) > MAX_AUTHORIZATION_REQUEST:
        return error_page(
            400, "invalid_request", f"The authorization request is longer than {MAX_AUTHORIZATION_REQUEST} bytes"
        )
    return parse_qsl(request.url.query, keep_blank_values=True)


async def consent_form(request: Request, issuer: str) -> dict[str, str] | Response:
    """The fields of a consent form posted to ``/authorize``, or the answer: the body's
    refusal (``bounded_form``), or ``consent_refused`` for a post from another origin than
    the issuer's (CSRF: refused outright, its ticket never looked up)."""
    body = await bounded_form(request)
    if isinstance(body, Response):
        return body
    if request.headers.get("origin") not in (None, "{0.scheme}://{0.netloc}".format(urlsplit(issuer))):
        return consent_refused()
    return dict(body)


def consent_refused() -> Response:
    """The 403 page for a consent form that is expired, spent, forged or not this browser's."""
    return error_page(
        403,
        "access_denied",
        "This consent form is expired, already used, or was not shown to this browser; "
        "start the authorization again from the application.",
    )


def authorization_error(oauth: OAuthServer, oauth_request: Any, error: OAuth2Error) -> Response:
    """The answer to an authorization request Authlib refused: to the client's redirect
    URI when it could be trusted (with ``iss``, RFC 9207: errors too), else a page."""
    if not error.redirect_uri:
        # No client or redirect URI could be trusted: tell the user, never redirect
        # (RFC 6749 section 4.1.2.1).
        return error_page(error.status_code or 400, error.error, error.get_error_description() or "")
    reply: Reply = oauth.handle_error_response(oauth_request, error)
    if reply.location is not None:
        reply.location = add_params_to_uri(reply.location, [("iss", oauth.issuer)])
    return to_response(reply)


async def token(
    oauth: OAuthServer, request: Request, load_client: ClientLoader | None = None, run: Runner = _direct
) -> Response:
    """``/token``: a bounded form, readable client credentials, a DPoP proof checked when
    sent (RFC 9449 5: a valid one binds the token to its key), then Authlib's grants (by ``run``)."""
    body = await bounded_form(request)
    if isinstance(body, Response):
        return body
    basic_problem = _basic_credentials_problem(request.headers.get("authorization"))
    if basic_problem is not None:
        return JSONResponse(
            {"error": "invalid_client", "error_description": basic_problem},
            401,
            {**NO_STORE, "WWW-Authenticate": 'Basic realm="token"'},
        )
    if load_client is not None:
        refusal = await load_client(named_client(dict(body)))
        if refusal is not None:
            return JSONResponse({"error": "invalid_client", "error_description": refusal}, 400, NO_STORE)
    oauth_request = form_request("POST", oauth.endpoint("token"), request.headers, body)
    proofs = request.headers.getlist("dpop")
    if proofs:
        try:
            if len(proofs) > 1:
                raise InvalidDPoPProof("Send one DPoP header, not several")
            oauth_request.dpop_jkt = (await oauth.dpop.verify(proofs[0], "POST", oauth.endpoint("token"))).jkt
        except InvalidDPoPProof as exc:
            return JSONResponse({"error": "invalid_dpop_proof", "error_description": exc.message}, 400, NO_STORE)
    form = dict(body)
    credential = form.get("code") if form.get("grant_type") == "authorization_code" else form.get("refresh_token")
    client_id = named_client(form) or _basic_client_id(request.headers.get("authorization"))
    return to_response(await run(client_id, credential, lambda: oauth.create_token_response(oauth_request)))


async def register(oauth: OAuthServer, request: Request, run: Runner = _direct) -> Response:
    """``/register``: dynamic client registration (RFC 7591), the metadata checked by
    ``check_metadata`` first."""
    raw = await bounded_body(request)
    if isinstance(raw, Response):
        return raw
    try:
        data = read_json(raw)
        if not isinstance(data, dict) or not data:
            raise MetadataError("The body must be a JSON object of client metadata (RFC 7591 section 2)")
        metadata = check_metadata(data)
    except MetadataError as exc:
        return JSONResponse({"error": exc.error, "error_description": str(exc)}, 400, NO_STORE)
    oauth_request = json_request("POST", oauth.endpoint("register"), request.headers, metadata)
    return to_response(await run(None, None, lambda: oauth.create_endpoint_response("client_registration", oauth_request)))


def _basic_client_id(authorization: str | None) -> str | None:
    """The client id of readable ``Authorization: Basic`` credentials, else None."""
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
    except ValueError:
        return None
    return unquote_plus(decoded.partition(":")[0]) or None


def _basic_credentials_problem(authorization: str | None) -> str | None:
    """Why an ``Authorization: Basic`` header cannot be read (RFC 6749 section 2.3.1:
    base64 of form-encoded UTF-8 ``id:secret``), or None (also for other schemes,
    which the grants refuse in their own words)."""
    scheme, _, credentials = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
    except ValueError:  # binascii.Error, UnicodeDecodeError, a non-ASCII header
        return "The Basic credentials are not base64 of UTF-8 text"
    if ":" not in decoded:
        return "The Basic credentials must be client_id:client_secret"
    return None
