"""Which hosts a model profile's base URL may name (issue 25 item 9).

The worker asks the URL from inside the deployment's network, so a URL naming the cloud's
metadata address, the broker's Redis or another internal service would have the worker
send it requests. The rule, checked when a profile is saved and again before every request:

- http and https only (agents.config.url_shape_problem);
- every address the host resolves to must be allowed by the host list, whose entries are
  `public` (globally routable addresses, for every profile), `private` (loopback and
  private ranges, for every profile), `local` (loopback and private ranges, only for a
  profile marked local), a host name (`llm.internal`, `llm.internal:8000`: that name,
  whatever it resolves to) or an address or network (`10.1.2.3`, `10.0.0.0/8`,
  `[fd00::1]:8000`);
- link-local addresses (169.254.0.0/16, fe80::/10, where the clouds' metadata services
  live) and the metadata addresses outside that range are neither public nor private:
  only an entry naming them allows them;
- the refused endpoints (the broker's and the database's host:port) stay refused even
  when listed: they never answer as a model and a request to them is a request to
  TaskOS's own services.

A name is resolved here and every address it resolves to is checked (a name pointing at a
private address is private); `resolve` is injectable so tests need no DNS. The HTTP client
resolves the name again when it connects, so a name whose answer changes in between is
caught only at the next request.
"""
from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Callable, Iterable
from urllib.parse import urlsplit

from agents.config import url_shape_problem

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

TOKENS = ("public", "private", "local")
DEFAULT_HOSTS = ("public", "local")  # what TaskOS allows when the operator lists nothing
# Metadata services outside the link-local range: AWS's IPv6 one, Alibaba's.
METADATA = frozenset(ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200"))
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: private in practice
THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")


class UrlRefused(ValueError):
    """The base URL may not be asked; the message says why and what would allow it."""


class HostUnresolved(OSError):
    """The URL's host name does not resolve (here and now): nothing to check yet."""


@dataclass(frozen=True)
class HostEntry:
    """One entry of the host list."""

    token: str = ""  # public | private | local
    name: str = ""  # a host name, lower case
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None
    port: int | None = None

    def names(self, host: str, port: int) -> bool:
        return bool(self.name) and self.name == host and self.port in (None, port)

    def covers(self, address: Address, port: int) -> bool:
        return (self.network is not None and address.version == self.network.version
                and address in self.network and self.port in (None, port))


def split_host_port(text: str) -> tuple[str, int | None]:
    """"host:8000" → ("host", 8000), "[fd00::1]:80" → ("fd00::1", 80), "fd00::1" → (it, None)."""
    text = text.strip().lower()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"{port!r} is not a port")
    return host.rstrip("."), int(port) if port else None


def parse_entry(text: str) -> HostEntry:
    """One entry of the host list, or UrlRefused saying what is wrong with it."""
    entry = text.strip().lower()
    if entry in TOKENS:
        return HostEntry(token=entry)
    try:
        if "/" in entry:
            return HostEntry(network=ipaddress.ip_network(entry, strict=False))
        host, port = split_host_port(entry)
        if not host:
            raise ValueError("no host")
        try:
            return HostEntry(network=ipaddress.ip_network(host), port=port)
        except ValueError:
            return HostEntry(name=host, port=port)
    except ValueError as exc:
        raise UrlRefused(f"The allowed hosts (TASKOS_MODEL_HOSTS) hold {text!r}, which is not "
                         f"{', '.join(TOKENS)}, a host name, an address or a network "
                         f"({exc}).") from None


def address_kind(address: Address) -> str:
    """public, private (loopback included), link-local (metadata included) or special."""
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA or address.is_link_local:
        return "link-local"
    if address.is_unspecified or address.is_multicast or (
            address.version == 4 and address in THIS_NETWORK):
        return "special"
    if address.is_loopback or address.is_private or (address.version == 4
                                                       and address in SHARED):
        return "private"
    return "public" if address.is_global else "special"


def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, or HostUnresolved."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise HostUnresolved(f"cannot resolve {host!r}: {exc}") from None
    return sorted({info[4][0] for info in infos})


def addresses_of(host: str, port: int, resolve: Resolver | None) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    found = (resolve or resolve_host)(host, port)
    if not found:
        raise HostUnresolved(f"{host!r} resolves to no address")
    return [ipaddress.ip_address(a.split("%")[0]) for a in found]


def _same_endpoint(host: str, addresses: list[Address] | None, endpoint: str,
                   resolve: Resolver | None) -> bool:
    other, _ = split_host_port(endpoint)
    if other == host:
        return True
    if addresses is None:
        return False
    try:
        theirs = addresses_of(other, 0, resolve)
    except HostUnresolved:
        return False
    # Every loopback address (and the unspecified one) reaches this machine's services.
    def here(found: list[Address]) -> bool:
        return any(a.is_loopback or a.is_unspecified for a in found)

    return (here(addresses) and here(theirs)) or bool(set(addresses) & set(theirs))


def check_model_url(url: str, *, local: bool = False, hosts: Iterable[str] = DEFAULT_HOSTS,
                    refused: Iterable[str] = (), resolve: Resolver | None = None) -> None:
    """Return when the worker may send model requests to `url` (blank: the simulated
    model); raise UrlRefused saying why not, or HostUnresolved when the name does not
    resolve (nothing can be said of it until it does)."""
    problem = url_shape_problem(url)
    if problem:
        raise UrlRefused(problem)
    if not url:
        return
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    entries = [parse_entry(e) for e in hosts]
    try:
        addresses: list[Address] | None = addresses_of(host, port, resolve)
    except HostUnresolved:
        addresses = None
    for endpoint in refused:
        if split_host_port(endpoint)[1] == port and _same_endpoint(host, addresses, endpoint,
                                                                   resolve):
            raise UrlRefused(f"The base URL {url!r} names {endpoint}, one of TaskOS's own "
                             "services (the broker or the database), never a model endpoint.")
    if any(entry.names(host, port) for entry in entries):
        return
    tokens = {entry.token for entry in entries if entry.token}
    networks = [entry for entry in entries if entry.network is not None]
    listed = ",".join(hosts) or "nothing"
    if not tokens and not networks:
        raise UrlRefused(f"The base URL {url!r} names {host}, which the allowed hosts "
                         f"(TASKOS_MODEL_HOSTS={listed}) do not list.")
    if addresses is None:
        addresses = addresses_of(host, port, resolve)  # raises HostUnresolved again
    for address in addresses:
        if any(entry.covers(address, port) for entry in networks):
            continue
        kind = address_kind(address)
        if kind == "public" and "public" in tokens:
            continue
        if kind == "private" and ("private" in tokens or ("local" in tokens and local)):
            continue
        named = host if host == str(address) else f"{host} ({address})"
        if kind == "link-local":
            why = ("a link-local address, where cloud metadata services answer: only an "
                   "entry naming it in the allowed hosts (TASKOS_MODEL_HOSTS) allows it")
        elif kind == "special":
            why = "not an address a model server answers on (unspecified, multicast or reserved)"
        elif kind == "private" and "local" in tokens:
            why = ("a loopback or private address, allowed only for a profile marked local "
                   "(a model server on this machine or your network) or when listed in the "
                   f"allowed hosts (TASKOS_MODEL_HOSTS={listed})")
        else:
            why = (f"a {kind} address, which the allowed hosts (TASKOS_MODEL_HOSTS={listed}) "
                   "do not allow")
        raise UrlRefused(f"The base URL {url!r} names {named}: {why}.")
