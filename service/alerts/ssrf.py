"""Where a webhook may point: public http(s) addresses only (unless explicitly allowed).

Checked when a subscription is created and again before every delivery (DNS can change);
delivery then connects to the address that was checked, so a second lookup cannot swap it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)


class UnsafeUrl(ValueError):
    """The URL may not be used as a webhook target; the message says why."""


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[IPAddress, ...]


def parse_url(url: str) -> tuple[str, str, int]:
    """Scheme, host and port of a webhook URL, or :class:`UnsafeUrl`.

    The URL must also be one that delivery (httpx) can send: ``urlsplit`` quietly drops
    tabs and newlines and strips leading spaces, which httpx refuses or reads as a
    relative URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
        sent = httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise UnsafeUrl(f"invalid URL: {exc}") from None
    if sent.is_relative_url:
        raise UnsafeUrl("invalid URL: not an absolute URL (leading spaces?)")
    if port == 0:
        raise UnsafeUrl("invalid URL: port 0")
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UnsafeUrl("only http and https URLs are allowed")
    if parts.username or parts.password:
        raise UnsafeUrl("credentials in the URL are not allowed")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise UnsafeUrl("the URL has no host")
    return scheme, host, port or (443 if scheme == "https" else 80)


def refusal(address: IPAddress) -> str | None:
    """Why an address is not a public one, or None."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return refusal(address.ipv4_mapped)
        # 6to4 (2002::/16) carries an IPv4 address that a relay delivers to; Python calls
        # the prefix global whatever it carries
        embedded = address.sixtofour
        reason = refusal(embedded) if embedded is not None else None
        if reason:
            return f"a 6to4 address of {embedded}, {reason}"
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    checks = (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not globally routable", not address.is_global),
    )
    return next((f"a {name} address" for name, hit in checks if hit), None)


def _check(url: str, host: str, addresses: list[IPAddress], allow_private: bool) -> None:
    if not addresses:
        raise UnsafeUrl(f"{host} does not resolve")
    if allow_private:
        return
    for address in addresses:
        reason = refusal(address)
        if reason:
            raise UnsafeUrl(f"{host} resolves to {address}, {reason}: refused")


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _addresses(infos: list[tuple[object, ...]]) -> list[IPAddress]:
    seen: dict[IPAddress, None] = {}
    for info in infos:
        sockaddr = info[4]
        assert isinstance(sockaddr, tuple)
        seen[ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])] = None
    return list(seen)


def check_url(url: str, *, allow_private: bool = False) -> Target:
    """Resolve and vet a webhook URL (blocking DNS): every address must be public."""
    scheme, host, port = parse_url(url)
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise UnsafeUrl(f"{host} does not resolve: {exc}") from None
        addresses = _addresses(list(infos))
    _check(url, host, addresses, allow_private)
    return Target(url, scheme, host, port, tuple(addresses))


async def check_url_async(url: str, *, allow_private: bool = False) -> Target:
    """:func:`check_url` with the event loop's resolver (delivery time)."""
    scheme, host, port = parse_url(url)
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except (socket.gaierror, UnicodeError) as exc:
            raise UnsafeUrl(f"{host} does not resolve: {exc}") from None
        addresses = _addresses(list(infos))
    _check(url, host, addresses, allow_private)
    return Target(url, scheme, host, port, tuple(addresses))
