"""A result cache that follows the server's ``ttlMs`` and ``cacheScope`` hints.

server/utilities/caching.mdx: a result is fresh until ``received + ttlMs``; ``0`` or a
missing/negative TTL means do not reuse. The key is the method and every param that
affects the result (``_meta`` excluded). ``private`` results are reused only under
the same credentials, so the key also carries the credential identity. A
``list_changed`` or ``resources/updated`` notification drops the matching entries at
once. Results of multi round-trip retries are never cached (the client does not ask).

The cache is bounded: past ``max_entries`` the oldest entry goes.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import msgspec

__all__ = ["ResultCache"]

_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def _key(method: str, params: dict[str, Any], credential: str | None) -> bytes:
    salient = {k: v for k, v in params.items() if k != "_meta"}
    return _encode_sorted([method, salient, credential])


class ResultCache:
    def __init__(self, max_entries: int = 1024) -> None:
        self._entries: OrderedDict[bytes, tuple[float, dict[str, Any], str, dict[str, Any]]] = OrderedDict()
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, method: str, params: dict[str, Any], credential: str | None) -> dict[str, Any] | None:
        now = time.monotonic()
        for cred in (None, credential) if credential is not None else (None,):
            entry = self._entries.get(_key(method, params, cred))
            if entry is None:
                continue
            expires, result, _, _ = entry
            if now < expires:
                self.hits += 1
                return result
            del self._entries[_key(method, params, cred)]
        self.misses += 1
        return None

    def put(self, method: str, params: dict[str, Any], credential: str | None, result: dict[str, Any]) -> None:
        ttl = result.get("ttlMs")
        if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or ttl <= 0:
            return
        scope = result.get("cacheScope")
        # Only a result the server marked public may be shared across credentials.
        cred = None if scope == "public" else credential
        key = _key(method, params, cred)
        self._entries[key] = (time.monotonic() + ttl / 1000.0, result, method, params)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def invalidate(self, method: str, uri: str | None = None) -> int:
        """Drop entries of ``method`` (only those for ``uri`` when given)."""
        doomed = [
            key
            for key, (_, _, m, params) in self._entries.items()
            if m == method and (uri is None or params.get("uri") == uri)
        ]
        for key in doomed:
            del self._entries[key]
        return len(doomed)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
