"""Servers from what people already have: an OpenAPI document, or an ASGI app's.

``Server.from_openapi`` and ``Server.from_asgi`` delegate here. The pieces, each a module:
``_load`` reads the document (bounded), ``_schema`` resolves ``$ref``s into JSON Schema,
``_operations`` reads each operation into a name, arguments and schemas, ``_routes`` picks
what each becomes, ``_call`` sends the HTTP request, ``_register`` puts them on the server.

Nothing is imported here: ``modelctx.server`` re-exports ``RouteMap`` from ``_routes``
alone; the rest loads when a server is first built from a document (``_build``).
"""
