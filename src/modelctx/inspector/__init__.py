"""A web inspector for MCP servers: ``modelctx inspect TARGET`` and ``modelctx dev FILE``.

The inspector's own process holds a ``Client`` to the server; the page (plain ES modules
in ``static/``, no build step) talks to that process over a token-guarded JSON API and
an event stream on 127.0.0.1. Nothing here is imported by ``import modelctx``.
"""

from ._observer import ObservedTransport
from ._session import InspectorSession

__all__ = ["InspectorSession", "ObservedTransport"]
