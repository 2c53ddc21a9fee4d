"""A parent that mounts tests/servers/asking_server.py run as a child process twice: as
``now`` (2026-07-28, where the child asks through input_required) and as ``old`` (the
handshake era, where it asks on its connection)."""

import sys
from pathlib import Path

from modelctx import Client, Server
from modelctx.host import RemoteServer

CHILD = [sys.executable, "-m", "modelctx", "serve", str(Path(__file__).parent / "asking_server.py")]

server = Server("front", version="1.0.0")
server.mount(RemoteServer(CHILD), prefix="now")
server.mount(RemoteServer(Client(CHILD, mode="handshake")), prefix="old")

if __name__ == "__main__":
    server.run()
