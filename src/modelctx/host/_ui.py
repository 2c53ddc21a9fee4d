"""``HostUI``: what the host asks the person in front of it.

The host never talks to a terminal or a window itself. When a server asks the user
something (elicitation) or a tool call needs a person's approval, the host calls the
``HostUI`` it was given. Without one, ``DenyAllUI`` answers: it declines every
elicitation and every approval, and logs a warning saying how to give the host a UI,
so a server never hangs waiting for a person who is not there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..client import Elicitation
    from ._server import HostServer

__all__ = ["DenyAllUI", "HostUI"]

log = logging.getLogger("modelctx.host")


@runtime_checkable
class HostUI(Protocol):
    """The person's side of the host.

    ``elicit``: show what ``server`` asks (``Elicitation``: a form, or a URL to open) and
    return the answer, ``{"action": "accept", "content": {...}}``, ``{"action":
    "decline"}`` or ``{"action": "cancel"}``.
    ``approve``: ask whether a tool call may run; the approval policy says what it
    passes and what it expects back.
    """

    async def elicit(self, server: HostServer, elicitation: Elicitation) -> dict[str, Any]: ...

    async def approve(self, request: Any) -> Any: ...


class DenyAllUI:
    """The UI of a host that has no person to ask: every question is declined, with a
    warning that says how to answer instead."""

    async def elicit(self, server: HostServer, elicitation: Elicitation) -> dict[str, Any]:
        log.warning(
            "%s asked the user %r; declined, as this host has no UI (pass Host(ui=...) to answer)",
            server.name,
            elicitation.message,
        )
        return {"action": "decline"}

    async def approve(self, request: Any) -> Any:
        log.warning(
            "a tool call needs approval (%r); denied, as this host has no UI (pass Host(ui=...) to ask)",
            request,
        )
        return False
