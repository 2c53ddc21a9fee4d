"""How the host signs in to a server: the OAuth provider for a configured server's
``"auth"`` block (``provider_for`` an ``AuthSpec``) and the file that keeps the tokens
(``token_store``). The host and the command line (``modelctx call --oauth``) both use it.

Imported only for a server that has one: a host without OAuth servers never loads
``modelctx.auth``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..auth import (
    ClientCredentialsProvider,
    ClientMetadata,
    FileTokenStore,
    OAuthClientProvider,
    TokenStore,
    open_in_browser,
)
from ._config import DEFAULT_TOKEN_STORE, AuthSpec, HostConfigError

__all__ = ["DEFAULT_TOKEN_STORE", "AuthSpec", "provider_for", "token_store"]


def token_store(path: str | None = None) -> FileTokenStore:
    """The file that keeps the host's OAuth tokens: ``path`` (``HostConfig.token_store``),
    else ``DEFAULT_TOKEN_STORE``, ``~`` expanded."""
    return FileTokenStore(os.path.expanduser(path or DEFAULT_TOKEN_STORE))


def provider_for(
    server: str,
    spec: AuthSpec,
    store: TokenStore,
    authorization_handler: Callable[[str, str], Awaitable[None]] | None,
) -> Any:
    """An ``OAuthClientProvider`` or ``ClientCredentialsProvider`` for ``server``, keeping
    its tokens in ``store``; ``authorization_handler(server, url)`` sends the person to
    sign in (default: the system browser). Raises ``HostConfigError`` for a private
    key file that cannot be read."""
    if spec.kind == "client_credentials":
        return _client_credentials(server, spec, store)

    async def send_to(url: str) -> None:
        if authorization_handler is None:
            await open_in_browser(url)
        else:
            await authorization_handler(server, url)

    return OAuthClientProvider(
        ClientMetadata(client_name=spec.client_name, redirect_uris=(spec.redirect_uri,)),
        store=store,
        client_id=spec.client_id,
        client_secret=spec.client_secret,
        client_id_metadata_url=spec.client_metadata_url,
        redirect_handler=send_to,
        scopes=spec.scopes,
    )


def _client_credentials(server: str, spec: AuthSpec, store: TokenStore) -> ClientCredentialsProvider:
    assert spec.client_id is not None  # _config checked it
    private_key = None
    if spec.private_key_file is not None:
        try:
            private_key = Path(spec.private_key_file).read_bytes()
        except OSError as exc:
            raise HostConfigError(
                f"server {server!r}: cannot read 'auth.privateKeyFile' {spec.private_key_file}: {exc.strerror or exc}"
            ) from None
    try:
        return ClientCredentialsProvider(
            spec.client_id,
            client_secret=spec.client_secret,
            private_key=private_key,
            signing_algorithm=spec.signing_algorithm,
            scopes=spec.scopes,
            store=store,
        )
    except ValueError as exc:
        raise HostConfigError(f"server {server!r}: 'auth': {exc}") from None
