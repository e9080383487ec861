"""Where the service may send requests: public addresses, plus what an operator allows.

Alert receivers (:mod:`alerts.delivery`) and the dashboard's Capacity page fetch URLs that a
tenant admin or a dashboard user typed. Without a policy those reach loopback admin ports,
cloud metadata (169.254.169.254) and private networks (SSRF). :class:`EgressPolicy` allows
globally routable unicast addresses only, unless ``DRIFTLINE_EGRESS_ALLOW`` lists more::

    DRIFTLINE_EGRESS_ALLOW=127.0.0.1/32,10.1.0.0/16,hooks.internal:8443,[::1]:9099

An entry is a network (CIDR or one address: every port), an address with a port
(``127.0.0.1:9099``, ``[::1]:9099``), or a host name with or without a port (``hooks.internal``:
whatever that name resolves to, on any port or on the one given).

The guarantee is at connect time (:func:`client`): the transport resolves the host once,
checks every address it got, and connects to a checked address (TLS still verifies the
certificate for the name), so a name that resolves to a public address when configured and to
``127.0.0.1`` when used (DNS rebinding) is refused. :meth:`EgressPolicy.check_url` is the
early, friendlier check at configuration time. Redirects are never followed and proxies from
the environment are ignored (a proxy would fetch the address for us).

A request of such a client made inside :func:`deadline` has a total time limit: connect, send
and every read of the answer share it (httpx's own timeouts are per operation, so a server
trickling one byte a second would otherwise hold a request for ever).
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import math
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from collector.errors import CollectorError

#: the setting that lists allowed hosts and networks
ENV_VAR = "DRIFTLINE_EGRESS_ALLOW"
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: IPv6 ranges whose last 32 bits are an IPv4 address: IPv4-compatible (deprecated), NAT64
#: well-known prefix (RFC 6052) and NAT64 local-use prefix (RFC 8215, in its /96 form)
_EMBEDS_V4 = tuple(ipaddress.IPv6Network(n) for n in ("::/96", "64:ff9b::/96", "64:ff9b:1::/48"))
#: IPv6 ranges that are not globally reachable, from the IANA IPv6 Special-Purpose Address
#: Registry (https://www.iana.org/assignments/iana-ipv6-special-registry), written out here
#: because :attr:`ipaddress.IPv6Address.is_global` varies with the Python version (3.11.7
#: calls 64:ff9b:1::/48, 3fff::/20 and 5f00::/16 global). Deprecated ranges (site-local
#: fec0::/10, ORCHID) and every registry entry whose reachability is "False" or "N/A" are in;
#: those that embed an IPv4 address (mapped, 6to4, Teredo, NAT64 well-known) are judged by it.
_NOT_GLOBAL_V6 = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/128",  # unspecified
        "::1/128",  # loopback
        "64:ff9b:1::/48",  # NAT64 local use (RFC 8215)
        "100::/64",  # discard-only (RFC 6666)
        "100:0:0:1::/64",  # dummy prefix (RFC 9780)
        "2001:2::/48",  # benchmarking (RFC 5180)
        "2001:10::/28",  # ORCHID, deprecated (RFC 4843)
        "2001:db8::/32",  # documentation (RFC 3849)
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # segment routing SIDs (RFC 9602)
        "fc00::/7",  # unique local (RFC 4193)
        "fe80::/10",  # link-local (RFC 4291)
        "fec0::/10",  # site-local, deprecated (RFC 3879)
        "ff00::/8",  # multicast
    )
)


class EgressDenied(CollectorError):
    """A URL or a resolved address the egress policy does not allow (an HTTP 400 when the URL
    comes from a request; a permanent delivery failure at send time)."""


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _unmapped(ip: IPAddress) -> IPAddress:
    """``::ffff:127.0.0.1`` and other IPv6 forms that embed an IPv4 address (mapped, 6to4,
    Teredo, IPv4-compatible, NAT64), as that address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if int(ip) > 1 and any(ip in net for net in _EMBEDS_V4):  # not :: or ::1
            return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip.teredo is not None:
            return ip.teredo[1]
    return ip


def is_public(ip: IPAddress) -> bool:
    """True for a globally routable unicast address (not loopback, private, link-local
    (cloud metadata), shared (100.64/10), multicast, reserved or unspecified); an IPv6
    address must be outside every not-globally-reachable range of the IANA registry
    (:data:`_NOT_GLOBAL_V6`, e.g. the NAT64 local-use 64:ff9b:1::/48), and one embedding an
    IPv4 address (mapped, 6to4, Teredo, NAT64) is public only when that address is."""
    if isinstance(ip, ipaddress.IPv6Address) and any(ip in net for net in _NOT_GLOBAL_V6):
        return False
    ip = _unmapped(ip)
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class EgressPolicy:
    """Allowed destinations besides public addresses (see the module docs).

    ``networks``: every port of these; ``addr_ports``: (address, port) pairs; ``hosts``: host
    names (lower case) mapped to their allowed port, None = any port.
    """

    networks: tuple[IPNetwork, ...] = ()
    addr_ports: frozenset[tuple[IPAddress, int]] = frozenset()
    hosts: tuple[tuple[str, int | None], ...] = ()

    @classmethod
    def parse(cls, value: str | Iterable[str] | None) -> EgressPolicy:
        """Parse ``DRIFTLINE_EGRESS_ALLOW`` (a comma list, or a list of entries).

        Raises:
            ValueError: an entry that is not a network, address[:port] or host[:port] (names it).
        """
        items = value.split(",") if isinstance(value, str) else list(value or ())
        networks: list[IPNetwork] = []
        addr_ports: set[tuple[IPAddress, int]] = set()
        hosts: list[tuple[str, int | None]] = []
        for raw in items:
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            host, port = _split_host_port(entry)
            ip = _address(host)
            if ip is not None and port is not None:
                addr_ports.add((ip, port))
            elif ip is None and _is_host_name(host):
                hosts.append((host.lower().rstrip("."), port))
            else:
                raise ValueError(
                    f"{entry!r} is not a network (10.0.0.0/8), address:port (127.0.0.1:9099) "
                    "or host name[:port] (hooks.internal:8443)"
                )
        return cls(tuple(networks), frozenset(addr_ports), tuple(hosts))

    def _host_listed(self, host: str, port: int) -> bool:
        name = host.lower().rstrip(".")
        return any(h == name and p in (None, port) for h, p in self.hosts)

    def allows(self, host: str, ip: IPAddress, port: int) -> bool:
        """True when connecting to ``ip``:``port`` for the URL host ``host`` is allowed: ``ip``
        is public, or in an allowed network, or the (address, port) or host name is listed."""
        listed = (ip, port) in self.addr_ports or (_unmapped(ip), port) in self.addr_ports
        if listed or self._host_listed(host, port):
            return True
        plain = _unmapped(ip)
        if any(plain in net or ip in net for net in self.networks):
            return True
        return is_public(ip)

    def resolve(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` once and return its addresses (text), each checked.

        Raises:
            EgressDenied: any address is not allowed (then none is used), or no address.
            OSError: the name does not resolve (``socket.gaierror``).
        """
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        out: list[str] = []
        for *_, sockaddr in infos:
            addr = str(sockaddr[0])
            ip = _address(addr)
            if ip is None or not self.allows(host, ip, port):
                # the address itself is not named: the message reaches tenant admins, who
                # should not learn the internal network's names and addresses from it
                raise EgressDenied(
                    f"{host}:{port} resolves to an address that is not public; "
                    f"an operator may allow it with {ENV_VAR}"
                )
            if addr not in out:
                out.append(addr)
        if not out:
            raise EgressDenied(f"{host}:{port} resolves to no address")
        return out

    def check_url(self, url: str, *, resolve: bool = True) -> None:
        """The configuration-time check of ``url`` (http/https, no user info, an allowed
        host); with ``resolve`` a host name is looked up too (a name that does not resolve
        yet passes: the connect-time check in :func:`client` is the guarantee).

        Raises:
            EgressDenied: the URL is not allowed; the message names the rule.
        """
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise EgressDenied(f"url is not a valid URL: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise EgressDenied("url must start with http:// or https://")
        if parts.username is not None or parts.password is not None:
            raise EgressDenied("url must not carry user:password@ (use a header or the secret)")
        host = parts.hostname or ""
        if not host:
            raise EgressDenied("url has no host")
        ip = _address(host)
        if ip is not None:
            if not self.allows(host, ip, port):
                raise EgressDenied(
                    f"url: {host} is not a public address (loopback, private, link-local and "
                    f"reserved addresses need {ENV_VAR})"
                )
            return
        if self._host_listed(host, port):
            return
        if host.lower().rstrip(".") == "localhost" or host.lower().endswith(".localhost"):
            raise EgressDenied(f"url: {host} is loopback; an operator may allow it with {ENV_VAR}")
        if resolve:
            try:
                self.resolve(host, port)
            except OSError:
                return


def _is_host_name(text: str) -> bool:
    labels = text.rstrip(".").split(".")
    return (
        bool(text)
        and len(text) <= 253
        and all(
            0 < len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
            for label in labels
        )
    )


def _split_host_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port_text = rest.removeprefix(":") if rest.startswith(":") else None
        if rest and port_text is None:
            raise ValueError(f"{entry!r}: expected [address]:port")
    elif entry.count(":") == 1:
        host, port_text = entry.split(":")
    else:
        host, port_text = entry, None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{entry!r}: port must be 1..65535")
    return host, int(port_text)


_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "driftline_egress_deadline", default=None
)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Give the :func:`client` requests made in this block (this thread or task) a total time
    limit of ``seconds`` from now, on the monotonic clock: past it, a connect raises
    :class:`httpx.ConnectTimeout`, a send :class:`httpx.WriteTimeout` and a read
    :class:`httpx.ReadTimeout`, however slowly the server trickles.

    Raises:
        ValueError: ``seconds`` is not a finite number > 0.
    """
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"deadline seconds must be finite and > 0, got {seconds!r}")
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _within(timeout: float | None, exc: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the current :func:`deadline` (raises ``exc`` when
    nothing is left)."""
    end = _DEADLINE.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise exc("the request's total deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose reads and writes end by the current :func:`deadline`."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _within(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _within(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(
            ssl_context, server_hostname, _within(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _CheckedBackend(httpcore.NetworkBackend):
    """httpcore's sync network backend, connecting only to addresses the policy allows."""

    def __init__(self, policy: EgressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self._policy.resolve(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        last: Exception | None = None
        for addr in addresses:  # the checked addresses, never a second lookup
            try:
                limit = _within(timeout, httpcore.ConnectTimeout)
                stream = self._inner.connect_tcp(addr, port, limit, local_address, socket_options)
                return _DeadlineStream(stream)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        raise EgressDenied("unix sockets are not an egress destination")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _CheckedTransport(httpx.HTTPTransport):
    """:class:`httpx.HTTPTransport` whose connection pool dials through :class:`_CheckedBackend`."""

    def __init__(self, policy: EgressPolicy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # httpx does not take a network backend; its pool does (httpcore's documented hook).
        # Fail loudly if an httpx upgrade moves it, rather than dial unchecked.
        if not hasattr(self._pool, "_network_backend"):
            raise RuntimeError("httpx/httpcore changed: cannot install the egress check")
        self._pool._network_backend = _CheckedBackend(policy)


def client(policy: EgressPolicy, **kwargs: Any) -> httpx.Client:
    """An :class:`httpx.Client` that connects only where ``policy`` allows (checked on the
    resolved address at connect time), never follows redirects and ignores proxy variables.
    ``kwargs`` go to :class:`httpx.Client` (e.g. ``timeout``).

    A denied destination raises :class:`EgressDenied` from the request call.
    """
    return httpx.Client(
        transport=_CheckedTransport(policy),
        follow_redirects=False,
        trust_env=False,
        **kwargs,
    )
