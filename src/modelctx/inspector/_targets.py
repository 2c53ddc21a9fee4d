"""What the inspector connects to: a URL, a server file or module, or a command line."""

from __future__ import annotations

import shlex
import sys

from ..client import ClientTransport
from ._session import TransportFactory

__all__ = ["transport_factory"]


def transport_factory(target: str | None, stdio: str | None) -> TransportFactory:
    """How to reach the server: an ``http(s)://`` URL, a ``--stdio`` command line, or a
    server file / ``module:obj`` run as ``python -m modelctx serve TARGET`` on stdio."""
    if stdio is not None:
        argv = shlex.split(stdio)
        if not argv:
            raise ValueError("--stdio needs a command line, e.g. --stdio 'python server.py'")
    elif target is None:
        raise ValueError("give a TARGET (URL, server file or module:obj) or --stdio 'COMMAND'")
    elif target.startswith(("http://", "https://")):
        url = target

        def http() -> ClientTransport:
            from ..transports.http_client import HttpClientTransport

            return HttpClientTransport(url)

        return http
    else:
        argv = [sys.executable, "-m", "modelctx", "serve", target]

    def stdio_process() -> ClientTransport:
        from ..transports.stdio_client import StdioClientTransport

        return StdioClientTransport(argv)

    return stdio_process
