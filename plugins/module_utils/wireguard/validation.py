# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation of a desired WireGuard interface: module-style parameters -> `InterfaceSpec`, every error collected,
each naming its field; bad input is refused before anything is changed."""
from __future__ import absolute_import, division, print_function

import ipaddress
import socket

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import ValidationError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (
    decode_key, encode_key, public_key_bytes, read_private_key_file)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import (
    DEFAULT_MTU, InterfaceSpec, PeerSpec, _cidr_sort_key)

IFNAME_MAX = 15


def validate_ifname(name, field="name"):
    if not isinstance(name, str) or not name:
        raise ValidationError("%s: an interface name is required" % field)
    if len(name) > IFNAME_MAX:
        raise ValidationError("%s: %r is longer than %d characters" % (field, name, IFNAME_MAX))
    if name in (".", "..") or any(c in name for c in "/:% \t\n") or not name.isprintable():
        raise ValidationError("%s: %r is not a valid interface name" % (field, name))
    return name


def normalize_cidr(value, field):
    """'10.0.0.1/24' -> '10.0.0.0/24' (host bits dropped, as WireGuard stores them); bare IP -> /32 or /128."""
    try:
        return str(ipaddress.ip_network(str(value).strip(), strict=False))
    except ValueError:
        raise ValidationError("%s: %r is not a valid CIDR" % (field, value))


def normalize_interface_address(value, field):
    """'10.80.0.1/30' stays an interface address (host bits kept)."""
    try:
        iface = ipaddress.ip_interface(str(value).strip())
    except ValueError:
        raise ValidationError("%s: %r is not a valid address with prefix length (e.g. 10.80.0.1/30)" % (field, value))
    if "/" not in str(value):
        raise ValidationError("%s: %r needs a prefix length (e.g. 10.80.0.1/30)" % (field, value))
    return str(iface)


def split_endpoint(value, field):
    """'host:port' / '[v6]:port' -> (host, port). Hosts may be names; see resolve_endpoint."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("%s: %r is not an endpoint (host:port)" % (field, value))
    v = value.strip()
    if v.startswith("["):
        host, sep, rest = v[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValidationError("%s: %r is not an endpoint ([ipv6]:port)" % (field, value))
        port_s = rest[1:]
    else:
        host, sep, port_s = v.rpartition(":")
        if not sep or not host or ":" in host:
            raise ValidationError("%s: %r is not an endpoint (host:port; IPv6 as [addr]:port)" % (field, value))
    if not port_s.isdigit() or not 1 <= int(port_s) <= 65535:
        raise ValidationError("%s: %r has no valid port (1-65535)" % (field, value))
    if not host or any(c.isspace() for c in host):
        raise ValidationError("%s: %r has no valid host" % (field, value))
    return host, int(port_s)


def format_endpoint(ip, port):
    return "[%s]:%d" % (ip, port) if ":" in ip else "%s:%d" % (ip, port)


def resolve_endpoint(value, field, resolver=None):
    """Endpoint -> canonical 'ip:port' as WireGuard reports it; names are resolved once (first address)."""
    host, port = split_endpoint(value, field)
    try:
        return format_endpoint(str(ipaddress.ip_address(host)), port)
    except ValueError:
        pass
    resolver = resolver or socket.getaddrinfo
    try:
        infos = resolver(host, port, 0, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as e:
        raise ValidationError("%s: cannot resolve host %r: %s" % (field, host, e))
    if not infos:
        raise ValidationError("%s: host %r has no address" % (field, host))
    return format_endpoint(str(ipaddress.ip_address(infos[0][4][0])), port)


def _int_in(value, field, lo, hi, what):
    if isinstance(value, bool):
        raise ValidationError("%s: %r is not %s" % (field, value, what))
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValidationError("%s: %r is not %s" % (field, value, what))
    if not lo <= n <= hi:
        raise ValidationError("%s: %r is not %s" % (field, value, what))
    return n


class _Errors(object):
    """The validation errors of one input, each naming its field, raised together at the end."""

    def __init__(self):
        self.messages = []

    def add(self, message):
        self.messages.append(message)

    def check(self, fn, *a, **kw):
        """fn(*a, **kw), or None with its ValidationError kept."""
        try:
            return fn(*a, **kw)
        except ValidationError as e:
            self.messages.append(str(e))
            return None


def validate_interface(params, resolver=None):
    """Module-style params -> InterfaceSpec. Collects every error (each naming its field) into one
    ValidationError. `private_key` is a base64 string, or `private_key_file` a path."""
    errors = _Errors()
    name = errors.check(validate_ifname, params.get("name"))
    priv = _private_key(params, errors)
    own_pub = encode_key(public_key_bytes(priv)) if priv is not None else None

    listen_port = params.get("listen_port")
    if listen_port is not None:
        listen_port = errors.check(_int_in, listen_port, "listen_port", 0, 65535, "a port (0-65535)")
    fwmark = params.get("fwmark")
    if fwmark is not None:
        fwmark = errors.check(_int_in, fwmark, "fwmark", 0, 0xFFFFFFFF, "a 32-bit fwmark")
    mtu = params.get("mtu")
    mtu = DEFAULT_MTU if mtu is None else errors.check(_int_in, mtu, "mtu", 576, 65535, "an MTU (576-65535)")
    addresses = _addresses(params.get("addresses"), errors)
    peers = _peers(params.get("peers") or [], own_pub, resolver, errors)

    if errors.messages:
        raise ValidationError("; ".join(errors.messages))
    return InterfaceSpec(name, priv, listen_port, fwmark, mtu, addresses, peers, bool(params.get("exclusive")))


def _private_key(params, errors):
    """The private key (32 bytes) from `private_key` (base64) or `private_key_file` (a path), else None."""
    if params.get("private_key") is not None:
        return errors.check(decode_key, params["private_key"], "private_key", secret=True)
    if params.get("private_key_file") is not None:
        return errors.check(read_private_key_file, params["private_key_file"])
    errors.add("private_key: one of private_key or private_key_file is required")
    return None


def _addresses(addresses, errors):
    """The interface's addresses normalized and sorted; None (not managed) stays None."""
    if addresses is None:
        return None
    norm = []
    for i, a in enumerate(addresses):
        n = errors.check(normalize_interface_address, a, "addresses[%d]" % i)
        if n is not None and n in norm:
            errors.add("addresses[%d]: %r is listed twice" % (i, a))
        elif n is not None:
            norm.append(n)
    return sorted(norm)


def _peers(peers, own_pub, resolver, errors):
    """PeerSpecs of the `peers` entries. A public key is used once and is not the interface's own; an allowed IP
    belongs to one peer."""
    out = []
    seen_keys = {}
    owner_of = {}
    for i, p in enumerate(peers):
        f = "peers[%d]" % i
        if not isinstance(p, dict):
            errors.add("%s: expected a dict" % f)
            continue
        pub = _peer_key(p.get("public_key"), f, i, own_pub, seen_keys, errors)
        endpoint = None
        if p.get("endpoint") not in (None, ""):
            endpoint = errors.check(resolve_endpoint, p["endpoint"], f + ".endpoint", resolver)
        allowed = _allowed_ips(p.get("allowed_ips") or [], f, owner_of, errors)
        keepalive = p.get("persistent_keepalive")
        keepalive = 0 if keepalive is None else errors.check(_int_in, keepalive, f + ".persistent_keepalive", 0, 65535,
                                                             "a keepalive interval in seconds (0-65535)")
        psk = None
        if p.get("preshared_key") is not None:
            psk = errors.check(decode_key, p["preshared_key"], f + ".preshared_key", secret=True)
        if pub is not None:
            out.append(PeerSpec(pub, endpoint, sorted(allowed, key=_cidr_sort_key), keepalive or 0, psk))
    return out


def _peer_key(pub, f, i, own_pub, seen_keys, errors):
    """Peer `i`'s public key (base64, stripped), or None when it is missing or not a key."""
    if pub is None:
        errors.add("%s.public_key: is required" % f)
        return None
    if errors.check(decode_key, pub, f + ".public_key") is None:
        return None
    pub = pub.strip()
    if pub in seen_keys:
        errors.add("%s.public_key: %r is already used by peers[%d]" % (f, pub, seen_keys[pub]))
    elif pub == own_pub:
        errors.add("%s.public_key: %r is the interface's own public key" % (f, pub))
    seen_keys[pub] = i
    return pub


def _allowed_ips(cidrs, f, owner_of, errors):
    """The peer's allowed IPs normalized; one routed to an earlier peer (`owner_of`) is an error."""
    allowed = []
    for j, cidr in enumerate(cidrs):
        fj = "%s.allowed_ips[%d]" % (f, j)
        n = errors.check(normalize_cidr, cidr, fj)
        if n is None:
            continue
        if n in owner_of:
            errors.add("%s: %r is already routed to %s (an allowed IP belongs to one peer)" % (fj, cidr, owner_of[n]))
            continue
        owner_of[n] = f
        allowed.append(n)
    return allowed
