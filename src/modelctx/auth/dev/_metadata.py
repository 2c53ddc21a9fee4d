"""Client metadata: one rule for what a client may say about itself, whether it says so
by dynamic registration (RFC 7591 section 2) or in a Client ID Metadata Document.

``check_metadata`` checks the type and the size of every metadata field this server
reads, and every redirect URI with ``redirect_uri_problem``; it returns only those
fields (RFC 7591 section 2: metadata the server does not understand is ignored, so it
is not kept either). ``read_json`` decodes a request body without a 500 for JSON
nested too deeply or a lone surrogate.

The limits are what a person or a browser can use, with room to spare; they bound
what one client costs this in-memory server (``MAX_METADATA`` as JSON at most, against
64 KB bodies and documents), so the caps on clients in ``_models`` bound the memory.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from ._models import is_loopback_http

__all__ = ["KNOWN_FIELDS", "MAX_URI", "MetadataError", "check_metadata", "read_json", "redirect_uri_problem"]

# A name a person reads on the consent page, in one line: 200 characters is several
# times any product name, and a 60 KB "name" is a page of text pretending to be one.
MAX_NAME = 200
# A redirect URI comes back with code, state and iss in a Location header and in the
# browser's address bar; 2,000 characters is the long-standing length every browser
# and proxy carries. The other URL fields (client_uri, logo_uri, tos_uri, policy_uri,
# jwks_uri) and a metadata document's own URL have the same bound.
MAX_URI = 2000
# Several loopback ports of a native app, or a web app's few environments.
MAX_REDIRECT_URIS = 20
# A space-separated list of scope names: dozens fit.
MAX_SCOPE = 1000
# An e-mail address is at most 64 + 1 + 255 characters (RFC 5321 section 4.5.3.1).
MAX_CONTACT = 320
MAX_CONTACTS = 10
# Identifiers and keywords (software_id, software_version, grant and response types,
# the auth method, application_type): none is longer than a UUID or a URN by much.
MAX_WORD = 200
MAX_WORDS = 10
# A public JWK is under 1 KB (an RSA 4096 key), a few KB with its certificate chain.
MAX_KEYS = 10
# What one client's metadata may come to, as JSON, whatever its fields.
MAX_METADATA = 16 * 1024
# Deeper than any metadata needs (jwks > keys > key > x5c is four levels).
MAX_DEPTH = 16

_WORD_FIELDS = ("token_endpoint_auth_method", "application_type", "software_id", "software_version")
_URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")
_LIST_FIELDS = ("grant_types", "response_types")
KNOWN_FIELDS = frozenset(
    {"redirect_uris", "client_name", "scope", "contacts", "jwks", *_WORD_FIELDS, *_URI_FIELDS, *_LIST_FIELDS}
)


class MetadataError(ValueError):
    """Metadata the server refuses; ``error`` is the RFC 7591 section 3.2.2 code
    (``invalid_redirect_uri`` or ``invalid_client_metadata``), the message says why."""

    def __init__(self, message: str, error: str = "invalid_client_metadata") -> None:
        super().__init__(message)
        self.error = error


def redirect_uri_problem(uri: object) -> str | None:
    """Why ``uri`` cannot be a redirect URI, or None: it must be an https URL with a
    host, or http on a loopback host (RFC 8252 section 7.3; MCP basic/authorization,
    Communication Security), without a fragment (RFC 6749 section 3.1.2), at most
    ``MAX_URI`` characters. Every other scheme is refused (``javascript:``, ``data:``,
    ``file:``, private-use schemes): the browser would be sent there with the code."""
    if not isinstance(uri, str):
        return "Each redirect URI must be a string"
    if len(uri) > MAX_URI:
        return f"A redirect URI is longer than {MAX_URI} characters"
    if _unencodable(uri) or any(ord(c) < 0x21 or c == "\x7f" for c in uri):
        return "A redirect URI holds a space, a control character or a lone surrogate"
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return "A redirect URI is not a URL"
    if parts.fragment or uri.endswith("#"):
        return "A redirect URI must not have a fragment (RFC 6749 section 3.1.2)"
    if parts.scheme == "https" and parts.hostname:
        return None
    if is_loopback_http(uri):
        return None
    return "Each redirect URI must be https, or http on a loopback host (127.0.0.1, [::1], localhost)"


def check_metadata(document: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``document`` this server reads, each checked; raises ``MetadataError``
    naming the first field that is of the wrong type, too large, or (a redirect URI)
    against ``redirect_uri_problem``."""
    metadata = {key: value for key, value in document.items() if key in KNOWN_FIELDS}
    uris = metadata.get("redirect_uris")
    if uris is not None:
        if not isinstance(uris, list):
            raise MetadataError("'redirect_uris' must be an array of strings", "invalid_redirect_uri")
        if len(uris) > MAX_REDIRECT_URIS:
            raise MetadataError(f"More than {MAX_REDIRECT_URIS} redirect_uris", "invalid_redirect_uri")
        for uri in uris:
            problem = redirect_uri_problem(uri)
            if problem is not None:
                raise MetadataError(problem, "invalid_redirect_uri")
    _text(metadata, "client_name", MAX_NAME)
    _text(metadata, "scope", MAX_SCOPE)
    for name in _WORD_FIELDS:
        _text(metadata, name, MAX_WORD)
    for name in _URI_FIELDS:
        _text(metadata, name, MAX_URI)
    for name in _LIST_FIELDS:
        _texts(metadata, name, MAX_WORDS, MAX_WORD)
    _texts(metadata, "contacts", MAX_CONTACTS, MAX_CONTACT)
    if "jwks" in metadata:
        _check_jwks(metadata["jwks"])
    size = len(json.dumps(metadata, ensure_ascii=False).encode())
    if size > MAX_METADATA:
        raise MetadataError(f"The client metadata comes to {size} bytes as JSON; at most {MAX_METADATA} are kept")
    return metadata


def read_json(raw: bytes) -> Any:
    """``raw`` decoded as JSON; raises ``MetadataError`` for anything else: not UTF-8,
    not JSON (``NaN`` is not), nested deeper than ``MAX_DEPTH``."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise MetadataError("The body is not UTF-8") from None
    except RecursionError:
        raise MetadataError(f"The body is JSON nested too deeply (at most {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as exc:
        # The decoder's message says where, and quotes nothing of the body.
        raise MetadataError(f"The body is not JSON ({exc})") from None
    except ValueError:  # NaN, Infinity, an integer of thousands of digits
        raise MetadataError(
            "The body holds a number no client metadata has (NaN, Infinity, or thousands of digits)"
        ) from None
    if _depth(value) > MAX_DEPTH:
        raise MetadataError(f"The body is JSON nested too deeply (at most {MAX_DEPTH} levels)")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level <= MAX_DEPTH:
            stack.extend((child, level + 1) for child in children)
    return deepest


def _unencodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text(metadata: dict[str, Any], name: str, limit: int) -> None:
    value = metadata.get(name)
    if value is None:
        return
    if not isinstance(value, str):
        raise MetadataError(f"'{name}' must be a string")
    if len(value) > limit:
        raise MetadataError(f"'{name}' is longer than {limit} characters")
    if _unencodable(value):
        raise MetadataError(f"'{name}' is not valid Unicode text (it holds a lone surrogate)")


def _texts(metadata: dict[str, Any], name: str, count: int, limit: int) -> None:
    values = metadata.get(name)
    if values is None:
        return
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise MetadataError(f"'{name}' must be an array of strings")
    if len(values) > count:
        raise MetadataError(f"'{name}' lists more than {count} values")
    for value in values:
        if len(value) > limit or _unencodable(value):
            raise MetadataError(f"Each of '{name}' must be Unicode text of at most {limit} characters")


def _check_jwks(jwks: object) -> None:
    # RFC 7517: a JWK's members are strings, but key_ops and x5c (arrays of strings).
    keys = jwks.get("keys") if isinstance(jwks, dict) else None
    if not isinstance(keys, list) or not all(isinstance(key, dict) for key in keys):
        raise MetadataError("'jwks' must be a JWK Set: an object whose 'keys' is an array of JWKs")
    if len(keys) > MAX_KEYS:
        raise MetadataError(f"'jwks' holds more than {MAX_KEYS} keys")
    for key in keys:
        for value in key.values():
            strings = value if isinstance(value, list) else [value]
            if not all(isinstance(s, str) and not _unencodable(s) for s in strings):
                raise MetadataError("Each member of a JWK in 'jwks' must be a string or an array of strings")
        if "d" in key:
            raise MetadataError("'jwks' must hold public keys only (a key has 'd')")
    try:
        KeySet.import_key_set(jwks)  # type: ignore[arg-type]  # a JSON object, checked by joserfc
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        raise MetadataError(f"'jwks' is not a JWK Set of usable keys ({type(exc).__name__})") from None
