"""Whether a URL's host is this machine: the one rule the redirect listener, client
registration, the issuer's fetch policy and the development server's redirect URIs share
(RFC 8252 section 7.3: ``localhost`` or a loopback address)."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's hostname, as ``urlsplit`` gives it: lowercase, no
    brackets) is ``localhost`` or a loopback address (127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
