"""A server speaking only the revisions named in MODELCTX_TEST_VERSIONS (comma-separated):
``ServerConfig(versions=)`` as a user narrows it (tests/test_legacy_revisions.py)."""

from __future__ import annotations

import os

from modelctx import Server
from modelctx.server import ServerConfig

VERSIONS = tuple(os.environ["MODELCTX_TEST_VERSIONS"].split(","))

server = Server("versions-server", config=ServerConfig(versions=VERSIONS))


@server.tool
async def echo(text: str) -> str:
    """Say it back."""
    return text
