"""DPoP (RFC 9449): proofs of possession that bind access tokens to a client's key.

The client holds a key pair (``DPoPKey``; ES256 by default, one per provider) and
sends, with every token request and every request that carries a DPoP-bound token, a
proof: a JWT of ``typ`` ``dpop+jwt`` signed with that key, whose header carries the
public key (``jwk``) and whose claims name the request (``htm`` method, ``htu`` URL
without query or fragment), when it was made (``iat``), a unique ``jti``, the hash of
the access token it goes with (``ath``) and the server's ``nonce`` when one was asked.

The server side (``DPoPVerifier``) checks a proof against the request it came with,
and against the token's ``cnf.jkt`` (the RFC 7638 thumbprint of the key the token was
issued to); ``DPoPNonces`` are the optional server nonces (RFC 9449 8 and 9). All
signing and verification goes through joserfc's public API.

A valid proof is spent: its ``jti`` (with its key's thumbprint) goes into a replay cache
until the proof is too old anyway, and a proof already there is refused (RFC 9449 11.1).
That cache must be shared by every process a request can reach: ``MemoryReplays`` (the
default) holds for one process; ``RedisReplays`` (``_replays.py``) for every worker and
replica sharing one Redis, which the HTTP app wires when the server has a ``redis_url``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, JWKRegistry, OKPKey, RSAKey

from ..errors import InvalidToken

__all__ = [
    "DPOP_ALGORITHMS",
    "DPoPKey",
    "DPoPNonces",
    "DPoPVerifier",
    "InvalidDPoPProof",
    "MemoryReplays",
    "ReplayCache",
    "VerifiedProof",
    "access_token_hash",
    "htu_of",
    "jwk_thumbprint",
]

#: Asymmetric JWS algorithms a proof may use (RFC 9449 4.2: never ``none`` nor a MAC).
DPOP_ALGORITHMS = ("ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA")
_MAX_PROOF = 8 * 1024  # bytes; a proof with an EC key is a few hundred
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


class InvalidDPoPProof(InvalidToken):
    """A request's DPoP proof is missing or does not hold (RFC 9449 4.3, 7.1); a 401.

    ``use_nonce``: the proof lacked the server's current nonce (``error=use_dpop_nonce``,
    the client retries with the nonce of the ``DPoP-Nonce`` header, RFC 9449 8, 9).
    ``unavailable``: the proof could not be checked for replay (the shared replay cache
    did not answer): the resource answers 503 with ``Retry-After`` instead of accepting a
    proof it cannot prove fresh. The message says what failed; it never quotes the proof
    or the token.
    """

    def __init__(
        self, message: str, *, use_nonce: bool = False, nonce: str | None = None, unavailable: bool = False
    ) -> None:
        super().__init__(message)
        self.use_nonce = use_nonce
        self.nonce = nonce
        self.unavailable = unavailable
        if nonce is not None:
            self.challenge_headers = MappingProxyType({"dpop-nonce": nonce})
        elif unavailable:
            self.challenge_headers = MappingProxyType({"retry-after": "1"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def access_token_hash(token: str) -> str:
    """``ath``: base64url of the SHA-256 of the access token's ASCII text (RFC 9449 4.2)."""
    return _b64(hashlib.sha256(token.encode("ascii")).digest())


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK (what ``cnf.jkt`` holds)."""
    return str(JWKRegistry.import_key(dict(jwk)).thumbprint())


def htu_of(url: str) -> str:
    """``url`` as a proof names it and as it is compared: scheme and host lower case,
    no default port, no query or fragment (RFC 9449 4.2, 4.3 with RFC 3986 6.2.2-3);
    a trailing slash is not significant (the MCP endpoint answers either way)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


class DPoPKey:
    """A client's DPoP key pair and the proofs it signs.

    ``key``: a joserfc private key (EC, RSA or OKP) to use; by default a new EC P-256
    key, which lives as long as this object (a token bound to it is useless without
    it, so a provider keeps its ``DPoPKey`` as long as its tokens). ``algorithm``: the
    JWS algorithm of the proofs (asymmetric; ``ValueError`` otherwise).
    """

    def __init__(self, key: ECKey | RSAKey | OKPKey | None = None, *, algorithm: str = "ES256") -> None:
        if algorithm not in DPOP_ALGORITHMS:
            raise ValueError(f"DPoP algorithm {algorithm!r} refused: use one of {', '.join(DPOP_ALGORITHMS)}")
        if key is None:
            if algorithm not in _CURVES:
                raise ValueError(f"give a key for {algorithm}; a key is made only for ES256, ES384 or ES512")
            key = ECKey.generate_key(_CURVES[algorithm], private=True)
        self.algorithm = algorithm
        self._key = key
        self.public_jwk: dict[str, Any] = dict(key.as_dict(private=False))
        self.public_jwk.pop("kid", None)
        #: The RFC 7638 thumbprint of the public key: the ``cnf.jkt`` of tokens bound to it.
        self.jkt = jwk_thumbprint(self.public_jwk)

    def __repr__(self) -> str:
        return f"DPoPKey(algorithm={self.algorithm!r}, jkt={self.jkt!r})"

    def proof(self, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None) -> str:
        """A fresh proof for one ``method`` request to ``url`` (query and fragment are
        left out of ``htu``); with ``access_token`` its ``ath``, with ``nonce`` the
        server's nonce. Every call has a new ``jti``: a proof is never reused."""
        header = {"typ": "dpop+jwt", "alg": self.algorithm, "jwk": self.public_jwk}
        parts = urllib.parse.urlsplit(url)
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method.upper(),
            "htu": urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        payload = json.dumps(claims, separators=(",", ":")).encode()
        return jws.serialize_compact(header, payload, self._key, algorithms=[self.algorithm])


@dataclass(frozen=True)
class VerifiedProof:
    """What a valid proof vouched for: the thumbprint of its key and its ``jti``."""

    jkt: str
    jti: str
    iat: int


class DPoPNonces:
    """Server nonces (RFC 9449 8, 9): a value that changes every ``lifetime`` seconds; the
    current one and the one before it are accepted, so a client that just got a nonce is
    not refused at the turn.

    A nonce is the HMAC of the current time window under ``key`` (default: random, for
    this process): processes holding one key hand out and accept the same nonces, so a
    client that got one from a worker is not refused by the next. A ``DPoPVerifier``
    whose replay cache is shared (``RedisReplays``) fetches that key from it."""

    def __init__(self, lifetime: float = 300.0, *, key: bytes | None = None) -> None:
        self.lifetime = lifetime
        self.key = key if key is not None else secrets.token_bytes(32)
        #: True once ``key`` is the one every process shares.
        self.shared = key is not None

    def use_key(self, key: bytes) -> None:
        """Derive nonces from ``key`` from now on (the key the processes share)."""
        self.key, self.shared = key, True

    def _nonce(self, window: int) -> str:
        return _b64(hmac.new(self.key, window.to_bytes(8, "big", signed=True), hashlib.sha256).digest()[:18])

    def current(self) -> str:
        """The nonce to hand out now (``DPoP-Nonce``)."""
        return self._nonce(int(time.time() // self.lifetime))

    def accepts(self, nonce: Any) -> bool:
        if not isinstance(nonce, str):
            return False
        window = int(time.time() // self.lifetime)
        return any(hmac.compare_digest(nonce, self._nonce(w)) for w in (window, window - 1))


class DPoPVerifier:
    """Checks DPoP proofs (RFC 9449 4.3, 7.1) for one server.

    ``algorithms``: the allow-list (asymmetric only; ``ValueError`` otherwise).
    ``max_age``: how old (``iat``) a proof may be, in seconds, and ``leeway`` how far in
    the future (clock skew). A proof's ``jti`` is remembered for ``max_age + leeway``
    seconds (after that its ``iat`` refuses it anyway) in ``replays`` (default: a
    ``MemoryReplays`` of at most ``replay_cache`` entries, for one process; a
    ``RedisReplays`` for several). ``nonces``: when given, a proof must carry the
    current server nonce.
    """

    def __init__(
        self,
        *,
        algorithms: Iterable[str] = ("ES256", "ES384", "RS256", "PS256", "EdDSA"),
        max_age: float = 60.0,
        leeway: float = 5.0,
        replay_cache: int = 100_000,
        nonces: DPoPNonces | None = None,
        replays: ReplayCache | None = None,
    ) -> None:
        self.algorithms = tuple(algorithms)
        unsafe = [a for a in self.algorithms if a not in DPOP_ALGORITHMS]
        if unsafe or not self.algorithms:
            raise ValueError(f"DPoP algorithms {unsafe or '()'} refused: use asymmetric ones from {DPOP_ALGORITHMS}")
        self.max_age = max_age
        self.leeway = leeway
        self.nonces = nonces
        #: Where spent proofs are remembered (``shared`` says whether other processes see them).
        self.replays: ReplayCache = replays if replays is not None else MemoryReplays(replay_cache)

    async def verify(
        self,
        proof: str | None,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        jkt: str | None = None,
    ) -> VerifiedProof:
        """The proof's key thumbprint when ``proof`` is a valid proof for a ``method``
        request to ``url`` (with ``access_token``: its ``ath`` must match it; with
        ``jkt``: its key must be that one). ``InvalidDPoPProof`` saying why otherwise.
        A valid proof's ``jti`` is then spent: the same proof is refused next time, by
        every process sharing ``replays``; when they cannot be asked the proof is refused
        with ``unavailable`` set (fail closed)."""
        if not proof:
            raise InvalidDPoPProof("No DPoP proof: send one DPoP header with each request")
        if len(proof) > _MAX_PROOF or "," in proof:
            raise InvalidDPoPProof("The DPoP header must hold exactly one proof JWT")
        header, claims = self._signed_parts(proof)
        self._check_request(claims, method, url)
        now = time.time()
        iat = claims.get("iat")
        if not isinstance(iat, int) or isinstance(iat, bool):
            raise InvalidDPoPProof("The DPoP proof has no iat")
        if iat > now + self.leeway or iat < now - self.max_age:
            raise InvalidDPoPProof("The DPoP proof is stale or from the future (iat); make a fresh one")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti or len(jti) > 256:
            raise InvalidDPoPProof("The DPoP proof has no valid jti")
        if access_token is not None:
            ath = claims.get("ath")
            if not isinstance(ath, str) or not hmac.compare_digest(ath, access_token_hash(access_token)):
                raise InvalidDPoPProof("The DPoP proof does not name this access token (ath)")
        thumbprint = jwk_thumbprint(header["jwk"])
        if jkt is not None and not hmac.compare_digest(thumbprint, jkt):
            raise InvalidDPoPProof("The DPoP proof is signed by another key than the one the token is bound to")
        if self.nonces is not None and self.replays.shared and not self.nonces.shared:
            self.nonces.use_key(await self.replays.shared_key("nonce-key"))
        if self.nonces is not None and not self.nonces.accepts(claims.get("nonce")):
            raise InvalidDPoPProof(
                "The server requires a DPoP nonce: retry with the one in DPoP-Nonce",
                use_nonce=True,
                nonce=self.nonces.current(),
            )
        await self._spend(thumbprint, jti)
        return VerifiedProof(thumbprint, jti, iat)

    def _signed_parts(self, proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            header = dict(jws.extract_compact(proof.encode("ascii")).protected)
        except (JoseError, ValueError, UnicodeError):
            raise InvalidDPoPProof("The DPoP proof is not a signed JWT") from None
        if header.get("typ") != "dpop+jwt":
            raise InvalidDPoPProof("The DPoP proof's typ is not dpop+jwt")
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise InvalidDPoPProof(f"The DPoP proof's algorithm {alg!r} is not accepted; use one of {', '.join(self.algorithms)}")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict) or any(name in jwk for name in ("d", "p", "q", "dp", "dq", "qi", "k")):
            raise InvalidDPoPProof("The DPoP proof's header must carry its public key (jwk), and no private part")
        try:
            key = JWKRegistry.import_key(jwk)
            signed = jws.deserialize_compact(proof, key, algorithms=[alg])
            claims = json.loads(signed.payload)
        except (JoseError, ValueError, TypeError):
            raise InvalidDPoPProof("The DPoP proof's signature does not verify with its jwk") from None
        if not isinstance(claims, dict):
            raise InvalidDPoPProof("The DPoP proof's payload is not a JSON object")
        return header, claims

    @staticmethod
    def _check_request(claims: Mapping[str, Any], method: str, url: str) -> None:
        htm = claims.get("htm")
        if not isinstance(htm, str) or htm != method.upper():
            raise InvalidDPoPProof(f"The DPoP proof is for another HTTP method (htm), not {method.upper()}")
        htu = claims.get("htu")
        if not isinstance(htu, str) or "?" in htu or "#" in htu or htu_of(htu) != htu_of(url):
            raise InvalidDPoPProof("The DPoP proof is for another URL (htu)")

    async def _spend(self, thumbprint: str, jti: str) -> None:
        """Remember the proof until it would be too old anyway; refuse a replay. The key
        is the digest of key and ``jti``: bounded in size, and one client's ``jti`` values
        never spend another's."""
        key = hashlib.sha256(f"{thumbprint}.{jti}".encode()).hexdigest()
        if not await self.replays.spend(key, self.max_age + self.leeway):
            raise InvalidDPoPProof("The DPoP proof was used before (jti); make a fresh proof for each request")


class ReplayCache(Protocol):
    """Where a ``DPoPVerifier`` remembers spent proofs.

    ``shared``: True when every process serving the resource sees the same cache (a
    server refuses to fork workers around one that is not)."""

    shared: bool

    async def spend(self, key: str, seconds: float) -> bool:
        """True the first time ``key`` is spent within ``seconds``, False for a replay.
        Raises ``InvalidDPoPProof`` with ``unavailable`` when the cache cannot answer."""
        ...

    async def shared_key(self, name: str) -> bytes:
        """A random key called ``name``, the same for every process sharing the cache (the
        server nonces' key). Raises like ``spend``."""
        ...


class MemoryReplays:
    """Spent proofs in this process only, at most ``size`` of them: when full the oldest
    are dropped first (a proof that old is refused by its ``iat`` anyway, unless
    ``size`` proofs arrived within its ``max_age``)."""

    shared = False

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self._seen: OrderedDict[str, float] = OrderedDict()  # key -> when it stops mattering
        self._keys: dict[str, bytes] = {}

    async def spend(self, key: str, seconds: float) -> bool:
        now = time.monotonic()
        while self._seen:
            oldest, until = next(iter(self._seen.items()))
            if until > now and len(self._seen) < self.size:
                break
            del self._seen[oldest]
        if key in self._seen:
            return False
        self._seen[key] = now + seconds
        return True

    async def shared_key(self, name: str) -> bytes:
        return self._keys.setdefault(name, secrets.token_bytes(32))
