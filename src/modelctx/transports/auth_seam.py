"""The seam an HTTP client auth object plugs into (OAuth lives above, in ``modelctx.auth``).

The Streamable HTTP client transport asks an ``HttpAuth`` for headers before each HTTP
request. When the server answers 401 or 403, the transport hands the response's status
and headers to ``challenged``; when that returns True the request is sent once more, with
fresh headers, and whatever comes back the second time is the answer. Transports never
import ``modelctx.auth``: this Protocol is all they know of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, runtime_checkable

__all__ = ["AuthHook", "HttpAuth"]


@runtime_checkable
class HttpAuth(Protocol):
    """What an HTTP client transport needs from an auth object (e.g. ``OAuthClientProvider``)."""

    async def headers(self, method: str, url: str) -> dict[str, str]:
        """Headers to add to an HTTP request (``Authorization``); may be empty."""
        ...

    async def challenged(self, status: int, headers: Mapping[str, str], method: str, url: str) -> bool:
        """React to a 401 or 403 (``headers`` hold ``www-authenticate``): True to send the
        request once more with fresh headers, False to let the status stand. May raise
        a ``modelctx.errors.AuthorizationError`` that says why it cannot authorize."""
        ...


#: The older hook: an async callable returning headers, with no way to react to a 401.
AuthHook = Callable[[], Awaitable[dict[str, str]]]
