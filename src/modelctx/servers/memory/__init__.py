"""The memory reference server: a persistent knowledge graph stored in SQLite.

``python -m modelctx.servers.memory [--store PATH]`` serves it on stdio (``--http`` for
Streamable HTTP). It offers the tools of ``@modelcontextprotocol/server-memory`` with
the same names, arguments and results (create_entities, create_relations,
add_observations, delete_entities, delete_observations, delete_relations, read_graph,
search_nodes, open_nodes) and the ``memory://knowledge-graph`` resource, so a user can
switch from one to the other. Unlike the npm server's JSON Lines file, the graph is a
SQLite database written in transactions: several servers may share one store.

The store defaults to ``default_store()``: ``memory.sqlite3`` in the user's data
directory (``$XDG_DATA_HOME/modelctx``, else ``~/.local/share/modelctx``; on macOS
``~/Library/Application Support/modelctx``; on Windows ``%APPDATA%\\modelctx``).
``MODELCTX_MEMORY_STORE`` overrides it.
"""

from __future__ import annotations

from ._graph import EntityNotFound, KnowledgeGraph, Page, Position
from ._server import GRAPH_URI, build_server
from ._store import default_store

__all__ = ["GRAPH_URI", "EntityNotFound", "KnowledgeGraph", "Page", "Position", "build_server", "default_store"]
