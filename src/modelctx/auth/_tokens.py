"""Where an OAuth client keeps what it obtained: tokens and its registration, per
(resource, authorization server issuer).

Credentials are keyed by the issuer that gave them (authorization.mdx, SEP-2352): when a
server's protected resource metadata names another authorization server, the client finds
nothing under the new issuer and registers again, never presenting the old client_id.
``MemoryTokenStore`` keeps them for the life of the process; ``FileTokenStore`` in a JSON
file only its owner can read (0600), replaced atomically on each write.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["FileTokenStore", "MemoryTokenStore", "StoredCredentials", "TokenStore"]

_EXPIRY_MARGIN = 30.0  # seconds before expiry a token counts as expired (clock skew, latency)


@dataclass(frozen=True)
class StoredCredentials:
    """What the client holds for one resource at one authorization server.

    ``resource``: the MCP server's canonical URL; ``issuer``: the authorization server
    that registered the client and issued the tokens; ``resource_indicator``: the
    ``resource`` parameter the tokens were requested for (the resource identifier the
    server's metadata published, RFC 8707). Secrets (``access_token``, ``refresh_token``, ``client_secret``) are left
    out of ``repr``."""

    resource: str
    issuer: str
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: str | None = None
    access_token: str | None = field(default=None, repr=False)
    token_type: str = "Bearer"
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None  # seconds since the epoch
    scope: str | None = None  # what was granted (or, when the server did not say, requested)
    resource_indicator: str | None = None
    updated_at: float = field(default_factory=time.time)

    def expired(self, now: float | None = None) -> bool:
        """Whether the access token is past (or within a margin of) its expiry."""
        if self.expires_at is None:
            return False
        return (now if now is not None else time.time()) >= self.expires_at - _EXPIRY_MARGIN

    def without_tokens(self) -> StoredCredentials:
        """The registration alone: the tokens dropped (they were refused)."""
        return replace(self, access_token=None, refresh_token=None, expires_at=None, scope=None)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredCredentials:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@runtime_checkable
class TokenStore(Protocol):
    """Keeps ``StoredCredentials`` keyed by (resource, issuer)."""

    async def get(self, resource: str, issuer: str) -> StoredCredentials | None:
        """The credentials for ``resource`` at ``issuer``, if any."""
        ...

    async def latest(self, resource: str) -> StoredCredentials | None:
        """The most recently stored credentials for ``resource`` at any issuer (to send a
        token before discovery has named the authorization server)."""
        ...

    async def put(self, credentials: StoredCredentials) -> None:
        """Store (replace) the credentials under their (resource, issuer)."""
        ...

    async def remove(self, resource: str, issuer: str) -> None:
        """Forget the credentials for ``resource`` at ``issuer``."""
        ...


class MemoryTokenStore:
    """A ``TokenStore`` in memory: nothing outlives the process."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], StoredCredentials] = {}

    def __repr__(self) -> str:
        return f"MemoryTokenStore({len(self._entries)} entries)"

    async def get(self, resource: str, issuer: str) -> StoredCredentials | None:
        return self._entries.get((resource, issuer))

    async def latest(self, resource: str) -> StoredCredentials | None:
        mine = [c for (r, _), c in self._entries.items() if r == resource]
        return max(mine, key=lambda c: c.updated_at, default=None)

    async def put(self, credentials: StoredCredentials) -> None:
        self._entries[(credentials.resource, credentials.issuer)] = replace(credentials, updated_at=time.time())

    async def remove(self, resource: str, issuer: str) -> None:
        self._entries.pop((resource, issuer), None)


class FileTokenStore:
    """A ``TokenStore`` in one JSON file at ``path``, so a user stays logged in across runs.

    The file is created with mode 0600 (only its owner reads it) and every write replaces
    it atomically (a temporary file in the same directory, flushed, then renamed), so a
    crash never leaves half a file. A file that cannot be read as a store is treated as
    empty and replaced on the next write. File I/O runs in a worker thread.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    async def get(self, resource: str, issuer: str) -> StoredCredentials | None:
        entries = await asyncio.to_thread(self._read)
        return entries.get(_key(resource, issuer))

    async def latest(self, resource: str) -> StoredCredentials | None:
        entries = await asyncio.to_thread(self._read)
        mine = [c for c in entries.values() if c.resource == resource]
        return max(mine, key=lambda c: c.updated_at, default=None)

    async def put(self, credentials: StoredCredentials) -> None:
        async with self._lock:
            await asyncio.to_thread(self._update, credentials, False)

    async def remove(self, resource: str, issuer: str) -> None:
        async with self._lock:
            await asyncio.to_thread(self._update, StoredCredentials(resource, issuer), True)

    # -- in the worker thread ----------------------------------------------------------------
    def _read(self) -> dict[str, StoredCredentials]:
        try:
            raw = json.loads(self.path.read_text("utf-8"))
            items = raw["entries"].items()
            return {key: StoredCredentials.from_json(value) for key, value in items}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def _update(self, credentials: StoredCredentials, remove: bool) -> None:
        entries = self._read()
        key = _key(credentials.resource, credentials.issuer)
        if remove:
            entries.pop(key, None)
        else:
            entries[key] = replace(credentials, updated_at=time.time())
        document = {"version": 1, "entries": {k: v.to_json() for k, v in entries.items()}}
        self._write(json.dumps(document, indent=1, sort_keys=True))

    def _write(self, text: str) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        # mkstemp creates the file 0600 from the start: no moment where others could read it.
        fd, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise


def _key(resource: str, issuer: str) -> str:
    return json.dumps([resource, issuer])
