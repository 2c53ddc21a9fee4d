"""The SSRF guard: where a URL the client did not choose itself may lead.

security_best_practices.mdx, "Server-Side Request Forgery": a server can name URLs the
client then fetches (a redirect, ``resource_metadata``, ``authorization_servers``...) and
so point it at the client's own network: ``169.254.169.254`` (cloud credentials),
``localhost:6379``, ``10.0.0.1/admin``.

Theory of operation. A URL is admitted in three steps, before any connection:

1. its scheme: ``https``; ``http`` only to loopback, and only when loopback is admitted
   (OAuth 2.1 §1.5, as the spec page asks);
2. its host resolved once, by ``getaddrinfo`` with a deadline. No parser of our own reads
   the host: odd spellings of an address (``2130706433``, ``0177.0.0.1``, ``127.1``,
   ``0x7f.1``) come back from the resolver as the address they reach;
3. every address classified by ``ipaddress`` into a ``Zone`` (an IPv6 form that carries an
   IPv4 address, ``::ffff:a.b.c.d``, ``::a.b.c.d``, 6to4 and NAT64, counts as that
   address). One address in a zone the policy does not admit refuses the URL.

The connection then goes to the addresses that were checked, never to the name again
(DNS rebinding: a second lookup could answer differently); ``Host`` and TLS SNI still
carry the URL's host. Through an HTTP proxy the proxy resolves the name itself: the
check is then made on our lookup (a name this machine cannot resolve is refused), and
an egress proxy is where to enforce it; ``url_policy=None`` leaves it all to the proxy.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass, field

from ..errors import UrlRefused as _PublicUrlRefused
from ._http11 import ConnectError, ConnectTimeout, HttpError

__all__ = [
    "NO_TRUST",
    "Trust",
    "UrlPolicy",
    "UrlRefused",
    "Zone",
    "admit",
    "check_scheme",
    "resolve",
    "trust_of",
    "zone_of",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.ip_network("100.64.0.0/10")  # shared address space (RFC 6598): not public
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class UrlRefused(_PublicUrlRefused, HttpError):
    """``modelctx.errors.UrlRefused`` as the HTTP client raises it: an ``HttpError`` too,
    so a transport reports a refused redirect as it reports any failed exchange."""


class Zone(enum.Enum):
    """Where an address leads, as the guard sees it."""

    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private (RFC 1918, ULA, shared or documentation)"
    LINK_LOCAL = "link-local (cloud metadata lives here)"
    NON_ROUTABLE = "unspecified, multicast or reserved"


@dataclass(frozen=True)
class UrlPolicy:
    """Which URLs the client may fetch on a server's word (redirects, metadata documents).

    By default only ``https://`` URLs whose host resolves to public addresses.
    ``allow_loopback`` admits loopback addresses (and ``http://`` to them: development);
    ``allow_private`` admits RFC 1918, ULA (``fc00::/7``) and shared (``100.64/10``)
    addresses. Link-local (``169.254/16``, ``fe80::/10``) and unspecified, multicast or
    reserved addresses are never admitted by a flag: name such a host in
    ``allowed_hosts`` (``"host"`` or ``"host:port"``), which admits it whatever it
    resolves to. ``resolve_timeout`` bounds each DNS lookup, in seconds.
    """

    allow_loopback: bool = False
    allow_private: bool = False
    allowed_hosts: tuple[str, ...] = ()
    resolve_timeout: float = 5.0
    _named: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.allowed_hosts, str):
            raise TypeError("allowed_hosts is a tuple of host names, e.g. ('auth.internal',)")
        object.__setattr__(self, "_named", frozenset(h.strip().lower().rstrip(".") for h in self.allowed_hosts))

    def names(self, host: str, port: int) -> bool:
        """Whether ``allowed_hosts`` names ``host`` (or ``host:port``)."""
        shown = f"[{host}]" if ":" in host else host
        host = host.lower().rstrip(".")
        return host in self._named or shown.lower() in self._named or f"{shown.lower()}:{port}" in self._named

    def zones(self) -> frozenset[Zone]:
        """The zones admitted by the flags."""
        admitted = {Zone.PUBLIC}
        if self.allow_loopback:
            admitted.add(Zone.LOOPBACK)
        if self.allow_private:
            admitted.add(Zone.PRIVATE)
        return frozenset(admitted)


@dataclass(frozen=True)
class Trust:
    """What the URL a user chose vouches for: a redirect may lead back into the zones
    its own addresses are in (and over ``http`` when it was ``http``)."""

    zones: frozenset[Zone] = frozenset()
    http: bool = False


NO_TRUST = Trust()


def zone_of(address: IPAddress) -> Zone:
    """The zone of one address; IPv6 forms that carry an IPv4 address count as that."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return zone_of(embedded)
    if address.is_unspecified or address.is_multicast:
        return Zone.NON_ROUTABLE
    if address.is_loopback:
        return Zone.LOOPBACK
    if address.is_link_local:
        return Zone.LINK_LOCAL
    if address.is_reserved:
        return Zone.NON_ROUTABLE
    if address.is_private or address in _CGNAT:
        return Zone.PRIVATE
    return Zone.PUBLIC if address.is_global else Zone.NON_ROUTABLE


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:  # ::ffff:a.b.c.d
        return address.ipv4_mapped
    if address.sixtofour is not None:  # 2002:AABB:CCDD::/48
        return address.sixtofour
    value = int(address)
    if 1 < value < 1 << 32:  # ::a.b.c.d, the deprecated IPv4-compatible form (not :: or ::1)
        return ipaddress.IPv4Address(value)
    if address in _NAT64:
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return None


async def resolve(host: str, port: int, timeout: float) -> tuple[str, ...]:
    """The addresses ``host`` resolves to (TCP), in the resolver's order, each once."""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
    except TimeoutError:
        raise ConnectTimeout(f"resolving {host} took longer than {timeout:g}s") from None
    except OSError as exc:  # socket.gaierror: no such name
        raise ConnectError(f"cannot resolve {host}: {exc}") from exc
    except UnicodeError:  # the IDNA codec: an empty label, one over 63 characters
        raise ConnectError(f"cannot resolve {host[:100]!r}: it is not a well-formed host name") from None
    found: dict[str, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        found[str(sockaddr[0])] = None
    return tuple(found)


async def admit(
    shown_url: str, scheme: str, host: str, port: int, policy: UrlPolicy, trust: Trust = NO_TRUST
) -> tuple[str, ...]:
    """The checked addresses to connect to for a URL (see the module doc);
    ``UrlRefused`` when the policy does not admit it; ``shown_url`` goes in messages."""
    check_scheme(shown_url)
    addresses = await resolve(host, port, policy.resolve_timeout)
    named = policy.names(host, port)
    zones = {address: zone_of(ipaddress.ip_address(address)) for address in addresses}
    if not named:
        admitted = policy.zones() | trust.zones
        for address, zone in zones.items():
            if zone not in admitted:
                raise UrlRefused(
                    f"{shown_url}: {host} resolves to {address}, a {zone.value} address; the URL policy "
                    f"refuses it (admit it with {_remedy(zone)})"
                )
    if scheme == "http" and not trust.http:
        loopback = all(zone is Zone.LOOPBACK for zone in zones.values())
        if not (loopback and (named or policy.allow_loopback or Zone.LOOPBACK in trust.zones)):
            raise UrlRefused(
                f"{shown_url}: http:// is refused: use https:// (http:// reaches only loopback "
                "addresses, when UrlPolicy(allow_loopback=True) admits them)"
            )
    return addresses


def check_scheme(shown_url: str) -> None:
    """``UrlRefused`` unless the URL is ``https://`` or ``http://`` (the latter is checked
    again once its addresses are known)."""
    scheme = urllib.parse.urlsplit(shown_url).scheme.lower()
    if scheme not in ("http", "https"):
        raise UrlRefused(f"{shown_url}: only https:// URLs are fetched, not {scheme or 'a relative'}:// ones")


async def trust_of(scheme: str, host: str, port: int, timeout: float) -> Trust:
    """What a URL the user chose vouches for: the zones its host resolves to (none,
    when this machine cannot resolve it: a host only a proxy knows vouches for nothing)."""
    try:
        addresses = await resolve(host, port, timeout)
    except HttpError:
        addresses = ()
    return Trust(frozenset(zone_of(ipaddress.ip_address(a)) for a in addresses), scheme == "http")


def _remedy(zone: Zone) -> str:
    if zone is Zone.LOOPBACK:
        return "UrlPolicy(allow_loopback=True) or allowed_hosts"
    if zone is Zone.PRIVATE:
        return "UrlPolicy(allow_private=True) or allowed_hosts"
    return "UrlPolicy(allowed_hosts=(host,)), if you mean it"
