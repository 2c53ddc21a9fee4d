"""Transports: thin adapters between bytes on a wire and the protocol core.

``stdio`` serves on this process's stdin/stdout; ``http`` is an ASGI application for
Streamable HTTP. Each is imported only when used.
"""
