"""Where fetch_url may connect: a host is resolved once, and every address is checked.

    resolved = await addresses(host, port, allow_private, resolve)   # or ToolFailure

fetch_url then connects to one of these addresses itself (see `web`), never to the name, so a
DNS answer that changes between the check and the connection (rebinding) cannot lead it
elsewhere. An address is refused when it is private, loopback, link-local, multicast or
otherwise not globally reachable, and so is an IPv6 address that carries an IPv4 address
which is: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), IPv4-translated
(`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::/96` and the local-use `64:ff9b:1::/48`), 6to4
(`2002::/16`) and Teredo (`2001::/32`, its server and its client). A NAT64 gateway or a 6to4
relay would turn `64:ff9b::7f00:1` into 127.0.0.1 on its side of the network.

`resolve` is the seam for the lookup (host, port -> address strings); the default asks the
system's resolver, the same one the rest of the machine uses.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

from acp_server.tools.base import ToolFailure

Resolve = Callable[[str, int], Awaitable[list[str]]]
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: never globally reachable
_COMPATIBLE = ipaddress.ip_network("::/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_LOW_32 = 0xFFFFFFFF


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system's resolver gives for `host` (ToolFailure when none)."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolFailure(f"Cannot find the host {host} ({exc.strerror}).") from exc
    return [str(info[4][0]) for info in infos]


async def addresses(host: str, port: int, allow_private: bool, resolve: Resolve) -> list[str]:
    """The addresses to connect to for `host`, each one checked; ToolFailure when the host has
    none, or when any of them is private or local (unless `allow_private`)."""
    try:
        found = [ipaddress.ip_address(host)]
    except ValueError:
        found = [ipaddress.ip_address(a.split("%")[0]) for a in await resolve(host, port)]
    if not found:
        raise ToolFailure(f"Cannot find the host {host}: it has no address.")
    for address in found:
        if not allow_private and not reachable(address):
            raise ToolFailure(
                f"Refused: {host} is a private or local address ({address}). The user can "
                "allow such addresses with `allow_private = true` in the [fetch] table of the "
                "configuration file, or ACP_SERVER_FETCH_ALLOW_PRIVATE=1."
            )
    return list(dict.fromkeys(str(a) for a in found))  # in the resolver's order, once each


def reachable(address: Address) -> bool:
    """True when the address, and every IPv4 address it carries, is a public unicast one."""
    if address in _LOCAL_NAT64:
        return False
    return all(_public(a) for a in (address, *embedded_ipv4(address)))


def _public(address: Address) -> bool:
    return address.is_global and not address.is_multicast


def embedded_ipv4(address: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries (none for an IPv4 address, `::` or `::1`)."""
    if isinstance(address, ipaddress.IPv4Address):
        return ()
    low = ipaddress.IPv4Address(int(address) & _LOW_32)
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo  # (server, client)
    if address in _NAT64 or address in _TRANSLATED:
        return (low,)
    if address in _COMPATIBLE and int(address) > 1:
        return (low,)
    return ()
