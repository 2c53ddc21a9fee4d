"""The dispatcher's seam: what the layers above ``server/`` may use of one request's dispatch.

A relay answers some methods itself: inside the dispatch, as a middleware (the host's
gateway answers ``tools/call`` from its upstreams), or ahead of it, from a duplex
transport's fast lane (``transports/_seam.FastLane``). Either way it must see, decorate
and fail the request exactly as the dispatcher does, so these are the dispatcher's own
steps, named here so that nothing outside ``server/`` imports its private modules:

- ``Dispatcher.admit(request, peer) -> Caller``: who asks and under which revision
  (``_meta`` on 2026-07-28, else the peer's handshake session), once the method is one
  this server serves to that caller; raises what ``handle`` answers with;
- ``Dispatcher.decorate(method, result, caller)``: what the caller's revision adds to
  a result (``resultType``, ``serverInfo``, cache hints), or takes out of it (2025-03-26
  and 2024-11-05 sessions);
- ``error_reply(request, exc)``: an exception as its JSON-RPC error response
  (``ProtocolError`` as itself, anything else a generic -32603, logged);
- ``Call``, the request being handled, as middleware (``async (call, call_next)``) gets
  it; ``Caller``;
- multi round-trip (basic/patterns/mrtr.mdx): ``load_answers(call)`` restores a retry's
  sealed round before a handler runs; a handler's ``Context.ask`` raises
  ``InputRequired``, which ``input_required(call, asked)`` turns into the result;
- ``UriTemplate``: how ``resources/read`` matches a URI to a resource template
  (RFC 6570), for a relay that routes a URI to the server whose template it matches;
- ``caller_identity(call)``: who sent the call by the one identity rule
  (transports/identity.py), what ``requestState`` is sealed for; a relay keys its own
  per-client state (the gateway's "always" answers) by it too.
"""

from ._context import Call, Caller, InputRequired
from ._dispatch import Dispatcher, Handler, Middleware, error_reply
from ._methods import caller_identity, input_required, load_answers
from ._uri_template import UriTemplate

__all__ = [
    "Call",
    "Caller",
    "Dispatcher",
    "Handler",
    "InputRequired",
    "Middleware",
    "UriTemplate",
    "caller_identity",
    "error_reply",
    "input_required",
    "load_answers",
]
