"""Sealed ``requestState`` for multi round-trip requests (basic/patterns/mrtr.mdx).

``requestState`` comes back from the client, so it is attacker-controlled input. The
spec asks that it be integrity-protected, bound to the request it belongs to, and
short-lived. A sealed state is ``base64url(payload) "." base64url(HMAC-SHA256)`` where
the payload records:

* ``m``: the method, and ``d``: a digest of the salient params (everything except
  ``_meta``, ``inputResponses`` and ``requestState``), so a state minted for one call
  cannot be replayed on another;
* ``e``: the expiry (Unix seconds);
* ``p``: the authenticated principal, when there is one;
* ``a``: the answers gathered in earlier rounds, so a handler that asks several
  questions in turn sees all of them on the last retry without server-side storage;
* ``q``: the keys of the questions this round asked: the retry may answer those and
  nothing else (an answer to a question never asked, or one that would replace an
  answer already sealed in ``a``, is ignored, as mrtr.mdx says of unexpected entries);
* ``n``: short fingerprints of the progress and log notifications the handler
  emitted in the rounds so far, in order, so that its replay does not send them again;
* ``s``: state the handler carries to its next attempt ("retry later").

The payload is signed, not encrypted: it holds what the client itself sent and what
the handler chose to carry, so it must not hold secrets. Any failure raises
``InvalidParams`` with a message that says which check failed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import InvalidParams

__all__ = ["SealedRound", "StateSealer", "params_digest"]

_SKIP = frozenset({"_meta", "inputResponses", "requestState"})


def params_digest(params: dict[str, Any]) -> str:
    salient = {k: v for k, v in params.items() if k not in _SKIP}
    canonical = msgspec.json.encode(salient, order="sorted")
    return hashlib.sha256(canonical).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class SealedRound:
    """What one round of a multi round-trip request hands to the next, under the seal.

    ``answers``: answers accepted in all earlier rounds; ``asked``: the keys of the
    questions the sealed round asked; ``notices``: fingerprints of the progress and log
    notifications emitted so far, in order; ``carried``: the handler's own state for its next attempt (``None``
    when it carries none).
    """

    answers: dict[str, Any] = field(default_factory=dict)
    asked: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    carried: Any = None


class StateSealer:
    """Seals and opens ``requestState`` values with one secret key.

    Replicas that serve the same clients must share the key (``secret``); by default a
    random key is made per process, which is right for one process. A server whose key
    is kept elsewhere (in Redis, shared by its replicas) sets it with ``use_key`` when it
    starts.
    """

    def __init__(self, secret: bytes | str | None = None, ttl_seconds: float = 600.0) -> None:
        self._key = secrets.token_bytes(32)
        if secret is not None:
            self.use_key(secret)
        self.ttl_seconds = ttl_seconds

    def use_key(self, secret: bytes | str) -> None:
        """Seal and open with ``secret`` from now on (at least 16 bytes; raises
        ``ValueError``). States sealed with the previous key no longer open."""
        if isinstance(secret, str):
            secret = secret.encode()
        if len(secret) < 16:
            raise ValueError(
                "the requestState secret must be at least 16 bytes "
                "(ServerConfig.request_state_secret or MODELCTX_REQUEST_STATE_SECRET)"
            )
        self._key = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def seal(
        self,
        method: str,
        params: dict[str, Any],
        answers: dict[str, Any],
        principal: str | None = None,
        *,
        asked: tuple[str, ...] = (),
        notices: tuple[str, ...] = (),
        carried: Any = None,
    ) -> str:
        """A sealed state for the retry of this request; see the module docstring."""
        body: dict[str, Any] = {
            "m": method,
            "d": params_digest(params),
            "e": int(time.time() + self.ttl_seconds),
            "a": answers,
        }
        if principal is not None:
            body["p"] = principal
        if asked:
            body["q"] = list(asked)
        if notices:
            body["n"] = list(notices)
        if carried is not None:
            body["s"] = carried
        payload = msgspec.json.encode(body)
        return _b64(payload) + "." + _b64(self._mac(payload))

    def open(
        self,
        state: Any,
        method: str,
        params: dict[str, Any],
        principal: str | None = None,
    ) -> dict[str, Any]:
        """Verify ``state`` for this request and return the answers it carries."""
        return self.open_round(state, method, params, principal).answers

    def open_round(
        self,
        state: Any,
        method: str,
        params: dict[str, Any],
        principal: str | None = None,
    ) -> SealedRound:
        """Verify ``state`` for this request and return the round it seals."""
        if not isinstance(state, str) or state.count(".") != 1:
            raise InvalidParams("Invalid requestState: not a value this server issued")
        encoded, tag = state.split(".")
        try:
            payload, mac = _unb64(encoded), _unb64(tag)
        except (ValueError, TypeError):
            raise InvalidParams("Invalid requestState: not a value this server issued") from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidParams("Invalid requestState: integrity check failed (tampered or foreign)")
        body = msgspec.json.decode(payload)
        if body.get("m") != method or body.get("d") != params_digest(params):
            raise InvalidParams(
                "Invalid requestState: it was issued for a different request; "
                "retry with the original params unchanged"
            )
        if body.get("p") != principal:
            raise InvalidParams("Invalid requestState: it was issued to a different principal")
        if body.get("e", 0) < time.time():
            raise InvalidParams("Invalid requestState: expired; send the request again without it")
        answers = body.get("a")
        return SealedRound(
            answers if isinstance(answers, dict) else {},
            _strings(body.get("q")),
            _strings(body.get("n")),
            body.get("s"),
        )


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()
