"""The SQLite reference server.

``python -m modelctx.servers.sqlite DB_PATH`` serves the database on stdio (``--http``
for Streamable HTTP):

- resources: ``sqlite://schema`` (every CREATE statement) and ``sqlite://table/NAME``
  per table and view (its CREATE statement and columns, as JSON);
- ``query``: one read-only statement a call, on a connection opened ``mode=ro`` with
  ``query_only``; ATTACH, PRAGMA and ``load_extension`` refused; rows a page at a time
  (``limit``, ``cursor``/``nextCursor``), bounded in time and bytes; results as
  structured content (``columns``, ``rows``, ``nextCursor``) with an output schema;
- ``execute``: one write, run only after the user confirms it through elicitation;
  annotated destructive so hosts can ask too;
- ``list_tables``, ``describe_table``.
"""

from __future__ import annotations

from ._query import Limits
from ._server import SCHEMA_URI, build_server, table_uri

__all__ = ["SCHEMA_URI", "Limits", "build_server", "table_uri"]
