"""Who a principal is: the one rule every per-principal guard keys by.

A principal (``ctx.principal``: an ``AccessToken``, or whatever an ``authenticate``
hook returns) is named by three typed parts, its issuer, subject and client id, each a
non-empty string, an int, or absent. Its ``identity`` is those parts as a JSON object
with sorted keys: absent is ``null``, never the string ``"None"``, so a token without
``sub`` and a token whose ``sub`` is ``"None"`` are two principals, and no separator can
be forged into a part. A refreshed token of the same user and client is the same
principal (the token text is not part of the identity).

Task owners (``server._tasks``), the binding of a handshake session to the principal
that opened it and the per-principal session quota (``_session.SessionTable``, Redis
too), ``requestState`` binding, listen-stream slots and rate limits all key by this rule
(``principal_key``), so none of them can disagree about who is who.

A principal with neither a subject nor a client id has no stable identity: every such
token of one issuer would otherwise be the same principal (the key ``iss:None`` of old).
What each guard does with one:

- tasks refuse it (``owner_of`` raises): a task outlives the token, and nothing else
  names whose it is;
- everything keyed by ``principal_key`` keys it by its ``token_digest`` (a SHA-256 of the
  token text, which ``auth.ProtectedResource`` sets only on such tokens): it is its own
  token, so a session it opened is usable by that token alone, and a refreshed token is
  a new principal;
- a principal from an ``authenticate`` hook with neither (and no digest) is keyed by its
  ``repr``: the hook's own value, equal for equal values (a dataclass, a tuple).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["TOKEN_DIGEST", "identity", "identity_key", "principal_key"]

#: The attribute a principal with no stable identity carries its token's digest in.
TOKEN_DIGEST = "token_digest"


def _part(value: Any) -> str | int | None:
    """A part of an identity as typed: a non-empty string or an int; anything else is absent."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def identity(principal: Any) -> dict[str, Any] | None:
    """``{"iss", "sub", "client_id"}`` of an authenticated principal (an ``AccessToken``,
    any object with a ``subject``, a claims mapping, or a plain string or int naming it);
    None when it names neither a subject nor a client, so it has no stable identity."""
    if isinstance(principal, Mapping):
        get: Callable[[str], Any] = principal.get
        issuer, subject, client = get("iss"), get("sub"), get("client_id")
    elif isinstance(principal, (str, int)) and not isinstance(principal, bool):
        issuer, subject, client = None, principal, None
    else:
        issuer = getattr(principal, "issuer", None)
        subject = getattr(principal, "subject", None)
        client = getattr(principal, "client_id", None)
    subject, client = _part(subject), _part(client)
    if subject is None and client is None:
        return None
    return {"client_id": client, "iss": _part(issuer), "sub": subject}


# One encoder, made once (json.dumps with options builds one per call: twice the time).
_ENCODE = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def identity_key(principal: Any) -> str | None:
    """``identity(principal)`` as compact JSON with sorted keys (what a task owner is
    stored as); None when it has no stable identity."""
    named = identity(principal)
    return None if named is None else _ENCODE(named)


def principal_key(principal: Any) -> str | None:
    """What ``principal`` is compared and counted by: None for no principal (the
    anonymous caller), else a string: its ``identity_key``; for a principal with no
    stable identity, ``token:`` and its token's digest; else ``value:`` and its ``repr``.
    The three forms cannot equal one another (an identity key starts with ``{``)."""
    if principal is None:
        return None
    key = identity_key(principal)
    if key is not None:
        return key
    digest = getattr(principal, TOKEN_DIGEST, None)
    if isinstance(digest, str) and digest:
        return f"token:{digest}"
    return f"value:{principal!r}"
