"""The echo server of ``modelctx_echo.py``, mounted in a parent under the prefix "child"
(its tool is ``child_echo``), beside a tool derived from it (``derived_echo``) and
the same echo registered directly (``own_echo``): what
``bench/mount.py`` compares with the direct echo."""

import sys
from pathlib import Path

from modelctx import ArgTransform, Server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from modelctx_echo import server as echo  # noqa: E402 - found through the path above

server = Server("bench-parent", "1.0")


@server.tool
async def own_echo(text: str) -> str:
    """The same echo, registered directly in the parent: a figure from the same process."""
    return text


server.mount(echo, prefix="child")
server.derive_tool("child_echo", name="derived_echo", arguments={"text": ArgTransform(name="words")})
