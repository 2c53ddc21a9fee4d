"""The signing key of the development authorization server.

One key signs every access token; its public half is served as the JWKS at ``jwks_uri``.
It is generated when the server starts, or loaded from a file (written with mode 0600)
so tokens issued before a restart still verify after it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from joserfc.jwk import ECKey, KeyParameters, RSAKey

__all__ = ["SIGNING_ALGORITHMS", "SigningKey"]

SIGNING_ALGORITHMS = ("ES256", "RS256")


class SigningKey:
    """A private JWK and the algorithm it signs with (``ES256`` or ``RS256``)."""

    def __init__(self, key: ECKey | RSAKey, algorithm: str) -> None:
        self.key = key
        self.algorithm = algorithm

    @property
    def kid(self) -> str:
        return str(self.key.kid)

    @classmethod
    def generate(cls, algorithm: str = "ES256") -> SigningKey:
        """A new key for ``algorithm``; raises ``ValueError`` for an algorithm not in
        ``SIGNING_ALGORITHMS``."""
        parameters: KeyParameters = {"use": "sig", "alg": algorithm}
        if algorithm == "ES256":
            return cls(ECKey.generate_key("P-256", parameters, private=True, auto_kid=True), algorithm)
        if algorithm == "RS256":
            return cls(RSAKey.generate_key(2048, parameters, private=True, auto_kid=True), algorithm)
        raise ValueError(f"cannot sign with {algorithm!r}: choose one of {', '.join(SIGNING_ALGORITHMS)}")

    @classmethod
    def load_or_create(cls, path: Path, algorithm: str = "ES256") -> SigningKey:
        """The key kept in ``path``, or a new one written there (mode 0600).

        Raises ``ValueError`` when the file is readable by others than its owner (a
        private key), is not a private JWK, or holds a key for another algorithm.
        """
        # One descriptor is checked and read: a file swapped in after the mode check is
        # never the one read (the check was on the path, the read by path again).
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO planted there must not block
        except FileNotFoundError:
            made = cls.generate(algorithm)
            try:
                _write_private(path, json.dumps(made.key.as_dict(private=True)))
            except FileExistsError:  # another process made it meanwhile: use that one
                return cls.load_or_create(path, algorithm)
            return made
        except OSError as exc:
            raise ValueError(f"cannot read the key file {path}: {exc.strerror}") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ValueError(f"{path} is not a regular file; the key file must be one")
            mode = stat.S_IMODE(info.st_mode)
            if mode & 0o077:
                raise ValueError(f"{path} holds a private key but is readable by others (mode {mode:o}); chmod 600 it")
            raw = os.read(fd, 1 << 20)  # a JWK is a few KB
        finally:
            os.close(fd)
        try:
            data = json.loads(raw)
            kty = data.get("kty")
            key: ECKey | RSAKey = ECKey.import_key(data) if kty == "EC" else RSAKey.import_key(data)
        except (ValueError, AttributeError, TypeError) as exc:
            raise ValueError(f"{path} is not a private JWK ({exc}); delete it to have a new key made") from None
        if not key.is_private:
            raise ValueError(f"{path} holds a public key; the server needs the private key to sign")
        stored = data.get("alg", algorithm)
        if stored != algorithm:
            raise ValueError(f"{path} holds an {stored} key, not {algorithm}; pass that algorithm or another file")
        return cls(key, algorithm)

    def public_jwks(self) -> dict[str, Any]:
        """The JWK Set served at ``jwks_uri``: the public half only."""
        public = self.key.as_dict(private=False)
        public.setdefault("use", "sig")
        public.setdefault("alg", self.algorithm)
        return {"keys": [public]}


def _write_private(path: Path, text: str) -> None:
    # Created 0600 from the first byte (not written, then chmod-ed): no moment where
    # another user could read the key.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
