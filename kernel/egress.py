"""Egress rules for requests the studio makes on a user's behalf (the judge's endpoint, webhooks):
which hosts may be called and which addresses may be connected to. Pure (no Django); the settings
are passed in (``docs/security.md``, "Outbound requests").

* **Allow-list.** ``allowed`` is a list of host names (lower case); an entry ``*`` allows every
  host, ``.example.org`` a domain and its subdomains. An empty list allows nothing.
* **Addresses.** Every address a host resolves to must be global (not loopback, link-local,
  private, multicast, reserved or unspecified: :func:`address_problem`) unless the host is named
  in ``private_ok`` — a deliberate, per-host permission (a CI server on the LAN, a test receiver on
  127.0.0.1); ``*`` there allows every address.
* **Redirects** are the client's business: both clients refuse to follow them.

Connecting to the address that was checked (not resolving again) closes the DNS-rebinding window:
:func:`resolve_checked` returns it and the webhook sender connects to it.
"""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

__all__ = ["host_allowed", "address_problem", "url_problem", "resolve_checked"]


def _listed(host: str, entries) -> bool:
    host = host.lower().rstrip(".")
    for e in entries:
        e = e.strip().lower()
        if e == "*" or e == host or (e.startswith(".") and (host == e[1:] or host.endswith(e))):
            return True
    return False


def host_allowed(host: str, allowed) -> bool:
    """Whether ``host`` is on the allow-list ``allowed`` (entries as in the module docstring)."""
    return bool(host) and _listed(host, allowed)


def address_problem(ip: str) -> str | None:
    """Why ``ip`` (an IPv4/IPv6 literal) may not be connected to without a per-host permission, or
    None when it is a global address. IPv4-mapped IPv6 addresses are judged as their IPv4 address."""
    addr = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    for label, bad in (("loopback", addr.is_loopback), ("link-local", addr.is_link_local),
                       ("private", addr.is_private), ("multicast", addr.is_multicast),
                       ("unspecified", addr.is_unspecified), ("reserved", addr.is_reserved)):
        if bad:
            return f"{ip} is a {label} address"
    if not addr.is_global:
        return f"{ip} is not a global address"
    return None


def url_problem(url: str, allowed, *, schemes=("https", "http")) -> str | None:
    """Why ``url`` may not be called, without resolving it, or None: its scheme must be one of
    ``schemes``, it must name a host, carry no user:password, and the host be on ``allowed``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"url: not a URL ({exc})"
    if parts.scheme.lower() not in schemes:
        return f"url: scheme {parts.scheme or '(none)'!r} is not one of {', '.join(schemes)}"
    host = (parts.hostname or "").lower()
    if not host:
        return "url: names no host"
    if parts.username or parts.password:
        return "url: credentials in the URL are refused (use the secret)"
    if port == 0:
        return "url: port 0"
    if not host_allowed(host, allowed):
        return f"url: host {host!r} is not an allowed host"
    return None


def resolve_checked(host: str, port: int, private_ok) -> tuple[str | None, str | None]:
    """``(address, None)``: the first address ``host`` resolves to, every one of them allowed
    (global, or the host named in ``private_ok``); or ``(None, problem)``. Resolution errors are a
    problem too (``host: cannot be resolved``)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        return None, f"host {host!r} cannot be resolved ({exc})"
    addrs = [i[4][0] for i in infos]
    if not addrs:
        return None, f"host {host!r} has no address"
    if not _listed(host, private_ok):
        for a in addrs:
            problem = address_problem(a)
            if problem:
                return None, f"host {host!r}: {problem} (only hosts in the private-address allow-list may)"
    return addrs[0], None
