"""PKCE (RFC 7636) with S256, the only method an MCP client uses (authorization.mdx)."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass, field

__all__ = ["Pkce", "b64url"]


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7636 Appendix A)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Pkce:
    """A fresh code verifier (64 unreserved characters) and its S256 challenge."""

    verifier: str = field(default_factory=lambda: b64url(secrets.token_bytes(48)), repr=False)

    @property
    def challenge(self) -> str:
        return b64url(hashlib.sha256(self.verifier.encode("ascii")).digest())

    method = "S256"
