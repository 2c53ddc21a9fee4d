"""The reference filesystem server: files under the roots you give it, and nothing else.

Run it with ``python -m modelctx.servers.filesystem ROOT [ROOT...]`` (stdio; ``--http``
for Streamable HTTP, ``--read-only`` to leave out every tool that writes), or build it
in your own code::

    from modelctx.servers.filesystem import build_server

    server = build_server(["./docs"], read_only=True)
    server.run()

Tools keep the names and arguments of the npm ``@modelcontextprotocol/server-filesystem``
(``read_text_file``, ``edit_file``, ...) so a host can switch without retraining, and add
``search_file_contents``, byte ranges and recursion limits. Files are also resources
(``file://`` URIs and the template ``file:///{+path}``) with change notifications.
Every path is confined to the roots by real path, and used only through directory
descriptors walked from the root's without following a link (see ``_paths.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...server import Server, ServerConfig
from ._paths import Roots
from ._read_tools import register_read_tools
from ._resources import FileResources
from ._write_tools import register_write_tools

__all__ = ["build_server"]

PAGE_SIZE = 100


def build_server(directories: Sequence[str], *, read_only: bool = False, max_listed: int = 1000) -> Server:
    """A ``Server`` for ``directories`` (each must exist; symlinks among them are
    resolved now, once). ``read_only`` leaves out write_file, edit_file,
    create_directory and move_file. ``max_listed`` bounds the files shown by
    ``resources/list`` (the template still reads any file under a root).
    Raises ``NotADirectoryError`` for a root that is not a directory."""
    roots = Roots(list(directories))
    holder: list[FileResources] = []
    server = Server(
        "modelctx-filesystem",
        instructions=f"Files under {roots.describe()}. Paths may be absolute (under one of them) "
        "or relative to the first." + (" Read-only." if read_only else ""),
        config=ServerConfig(page_size=PAGE_SIZE),
        lifespan=lambda s: holder[0].watching(s),
    )
    register_read_tools(server, roots)
    if not read_only:
        register_write_tools(server, roots)
    holder.append(FileResources(server, roots, max_listed=max_listed))
    return server
