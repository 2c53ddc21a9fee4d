"""Reference MCP servers built on modelctx, each runnable as a module.

- ``python -m modelctx.servers.filesystem ROOT [ROOT...]``: files under the given roots.
- ``python -m modelctx.servers.sqlite DB_PATH``: a SQLite database, read-only queries and confirmed writes.
- ``python -m modelctx.servers.memory [--store PATH]``: a persistent knowledge graph.

Each is also a model of how to write a server with modelctx: read them as examples.
"""
