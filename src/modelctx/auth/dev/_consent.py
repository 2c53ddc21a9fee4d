"""The development server's consent page, for when it does not auto-approve.

A pending consent is held server side under a random ticket and bound to the browser
that asked by a second secret in an HttpOnly, SameSite=Strict cookie: the form's POST
must carry both (a page on another origin can make the browser post the form, but
cannot read the ticket, and a ticket stolen from the page is useless without the
cookie). Each ticket is used once and lasts ten minutes. The page cannot be framed
(``X-Frame-Options``, CSP ``frame-ancestors``), against clickjacking.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import secrets
import time
from dataclasses import dataclass

__all__ = ["COOKIE", "PAGE_HEADERS", "Consents", "render_page"]

COOKIE = "modelctx_consent"
TICKET_LIFETIME = 600.0
MAX_PENDING = 1000
PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    # No form-action: a browser would then refuse the redirect to the client's URI.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "Cache-Control": "no-store",
    # Not no-referrer: with it a browser sends "Origin: null" on the form's own POST,
    # and the origin check would refuse the user's answer.
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


@dataclass(frozen=True)
class _Pending:
    pairs: tuple[tuple[str, str], ...]
    browser_digest: bytes
    expires_at: float


class Consents:
    """Authorization requests waiting for the user's decision."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}

    def open(self, pairs: list[tuple[str, str]]) -> tuple[str, str]:
        """Hold ``pairs`` (the authorization request); returns (ticket, browser secret)."""
        now = time.time()
        for ticket, pending in list(self._pending.items()):
            if pending.expires_at <= now:
                del self._pending[ticket]
        if len(self._pending) >= MAX_PENDING:  # the oldest goes: memory stays bounded
            del self._pending[next(iter(self._pending))]
        ticket, browser = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self._pending[ticket] = _Pending(tuple(pairs), _digest(browser), now + TICKET_LIFETIME)
        return ticket, browser

    def take(self, ticket: str, browser: str) -> list[tuple[str, str]] | None:
        """The request held under ``ticket`` if ``browser`` is the secret it was bound
        to and it has not expired; the ticket is spent either way."""
        pending = self._pending.pop(ticket, None)
        if pending is None or pending.expires_at <= time.time():
            return None
        if not hmac.compare_digest(pending.browser_digest, _digest(browser)):
            return None
        return list(pending.pairs)


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def render_page(
    *, action: str, ticket: str, client: str, redirect_uri: str, scope: str, resource: str, subject: str
) -> str:
    """The consent page: who asks, for what, where the answer goes; approve or deny."""
    e = html.escape
    scope_text = e(scope) if scope else "(no scope named)"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorize {e(client)}</title>
<style>body{{font-family:sans-serif;max-width:40em;margin:3em auto}}dt{{font-weight:bold}}</style></head>
<body><h1>Authorize {e(client)}?</h1>
<p>A development authorization server asks whether <b>{e(client)}</b> may act as <b>{e(subject)}</b>.</p>
<dl><dt>Resource</dt><dd>{e(resource)}</dd><dt>Scope</dt><dd>{scope_text}</dd>
<dt>The answer goes to</dt><dd>{e(redirect_uri)}</dd></dl>
<form method="post" action="{e(action)}">
<input type="hidden" name="ticket" value="{e(ticket)}">
<button type="submit" name="decision" value="approve">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>
"""
