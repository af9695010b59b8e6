# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""WireGuard interfaces: keys, validation of a desired state, state read-back, diff, and two backends.

Backends:
- ``kernel``: the Linux module, configured over generic netlink (pyroute2 ``WireGuard``);
- ``wireguard-go``: the userspace implementation, one ``wireguard-go -f <ifname>`` process per interface,
  configured over its UAPI socket ``/var/run/wireguard/<ifname>.sock`` with the cross-platform text
  protocol (``set=1`` / ``get=1``, hex keys). One socket exchange per apply, whatever the number of peers.

Everything goes through one model: ``InterfaceSpec`` (desired, validated) and ``DeviceState`` (read back),
``compute_change`` gives the minimal ``DeviceChange``, empty when nothing differs (then nothing is written).
No Ansible imports: the controller and the unit tests use this file directly.
Private keys live only in memory (bytes); nothing here returns or prints them.
"""
from __future__ import absolute_import, division, print_function

import base64
import contextlib
import fcntl
import importlib.util
import binascii
import ipaddress
import os
import signal
import socket
import struct
import subprocess
import time

from ansible_collections.liqo.fabric.plugins.module_utils.atomic_file import write_atomic

try:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives import serialization
    HAS_CRYPTOGRAPHY = True
except ImportError:
    HAS_CRYPTOGRAPHY = False

# pyroute2 is imported when a link is read or changed, not at import: it costs ~100 ms, and the modules that only
# plan or publish gateways (key generation, status) never need it.
HAS_PYROUTE2 = importlib.util.find_spec("pyroute2") is not None
PYROUTE2_IMPORT_ERROR = None if HAS_PYROUTE2 else "ImportError: No module named 'pyroute2'"


def IPRoute(*args, **kwargs):  # pylint: disable=invalid-name
    from pyroute2 import IPRoute as _IPRoute  # pylint: disable=import-outside-toplevel
    return _IPRoute(*args, **kwargs)


KEY_LEN = 32
ZERO_KEY = bytes(KEY_LEN)
DEFAULT_MTU = 1340
RUN_DIR = "/var/run/wireguard"
WIREGUARD_GO = "wireguard-go"
BACKEND_KERNEL = "kernel"
BACKEND_USERSPACE = "wireguard-go"
IFNAME_MAX = 15


class WireGuardError(Exception):
    """Any failure; the message is safe to show (never contains a private or preshared key)."""


class ValidationError(WireGuardError, ValueError):
    """Bad input, detected before anything is changed. The message names the field(s)."""


# --------------------------------------------------------------------------------------------- keys

def _clamp(raw):
    k = bytearray(raw)
    k[0] &= 248
    k[31] = (k[31] & 127) | 64
    return bytes(k)


def encode_key(raw):
    return base64.b64encode(raw).decode("ascii")


def key_to_hex(b64):
    return decode_key(b64, "key").hex()


def hex_to_key(hexstr):
    try:
        raw = bytes.fromhex(hexstr)
    except ValueError:
        raise ValidationError("not a hex key: %r" % (hexstr,))
    if len(raw) != KEY_LEN:
        raise ValidationError("hex key must encode %d bytes, got %d" % (KEY_LEN, len(raw)))
    return encode_key(raw)


def decode_key(value, field, secret=False):
    """Base64 WireGuard key -> 32 bytes. `secret` keys are never echoed in the error message."""
    shown = "" if secret else " %r" % (value,)
    if not isinstance(value, str):
        raise ValidationError("%s: expected a base64 key string, got %s" % (field, type(value).__name__))
    v = value.strip()
    if len(v) != 44 or not v.endswith("="):
        raise ValidationError("%s:%s is not a WireGuard key (44 base64 characters encoding 32 bytes)" % (field, shown))
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError("%s:%s is not valid base64" % (field, shown))
    if len(raw) != KEY_LEN or encode_key(raw) != v:
        raise ValidationError("%s:%s is not a canonical base64 encoding of 32 bytes" % (field, shown))
    return raw


def _require_cryptography():
    # X25519 only through `cryptography` (constant time); a host without it gets this, not a slower, leakier fallback
    if not HAS_CRYPTOGRAPHY:
        raise WireGuardError("WireGuard keys need the Python library 'cryptography' on this host (python3-cryptography "
                             "or pip install cryptography)")


def public_key_bytes(private_raw):
    _require_cryptography()
    pub = X25519PrivateKey.from_private_bytes(private_raw).public_key()
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


# A check-mode plan's stand-ins for the keys a real run generates (gateway_api.ensure_key_secret): they pass
# the PublicKey schema and read as what they are in a diff; never configured on an interface.
CHECK_MODE_PUBLIC_KEY = "CHECK+MODE+key+generated+by+the+real+run+xA="
CHECK_MODE_PRIVATE_KEY = "A" * 43 + "="


def public_key(private_key_b64):
    """Public key (base64) of a base64 private key, as `wg pubkey` prints it."""
    if private_key_b64 == CHECK_MODE_PRIVATE_KEY:
        return CHECK_MODE_PUBLIC_KEY
    return encode_key(public_key_bytes(decode_key(private_key_b64, "private_key", secret=True)))


def generate_private_key():
    """A new private key, base64, clamped like `wg genkey` output."""
    _require_cryptography()
    raw = X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    return encode_key(_clamp(raw))


def generate_keypair():
    """(private_key, public_key), both base64."""
    priv = generate_private_key()
    return priv, public_key(priv)


def read_private_key_file(path, field="private_key_file"):
    """Reads a key file; refuses files other users can read."""
    try:
        st = os.stat(path)
        with open(path, "r", encoding="ascii") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError("%s: cannot read %r: %s" % (field, path, getattr(e, "strerror", None) or e))
    if st.st_mode & 0o077:
        raise ValidationError("%s: %r is accessible by group/others (mode %04o); it must be 0600 or stricter"
                              % (field, path, st.st_mode & 0o777))
    return decode_key(text.strip(), field, secret=True)


def write_private_key_file(path, private_key_b64):
    """Creates `path` with mode 0600 and the key; never overwrites (O_EXCL). Returns False if it existed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(private_key_b64 + "\n")
    return True


# ----------------------------------------------------------------------------------------- model

class PeerSpec(object):
    __slots__ = ("public_key", "endpoint", "allowed_ips", "persistent_keepalive", "preshared_key")

    def __init__(self, public_key, endpoint=None, allowed_ips=(), persistent_keepalive=0, preshared_key=None):
        self.public_key = public_key              # base64
        self.endpoint = endpoint                  # "ip:port" / "[ip6]:port" or None (not managed)
        self.allowed_ips = list(allowed_ips)      # normalized CIDRs, sorted
        self.persistent_keepalive = persistent_keepalive
        self.preshared_key = preshared_key        # 32 bytes or None


class InterfaceSpec(object):
    __slots__ = ("name", "private_key", "listen_port", "fwmark", "mtu", "addresses", "peers", "exclusive")

    def __init__(self, name, private_key, listen_port=None, fwmark=None, mtu=DEFAULT_MTU, addresses=None,
                 peers=(), exclusive=False):
        self.name = name
        self.private_key = private_key            # 32 bytes
        self.listen_port = listen_port            # None: not managed
        self.fwmark = fwmark                      # None: not managed; 0 removes
        self.mtu = mtu
        self.addresses = addresses                # None: not managed; list of "ip/prefix"
        self.peers = list(peers)
        self.exclusive = exclusive


class PeerState(object):
    __slots__ = ("public_key", "endpoint", "allowed_ips", "persistent_keepalive", "preshared_key",
                 "last_handshake", "rx_bytes", "tx_bytes")

    def __init__(self, public_key, endpoint=None, allowed_ips=None, persistent_keepalive=0, preshared_key=None,
                 last_handshake=None, rx_bytes=0, tx_bytes=0):
        self.public_key = public_key
        self.endpoint = endpoint
        self.allowed_ips = allowed_ips if allowed_ips is not None else []
        self.persistent_keepalive = persistent_keepalive
        self.preshared_key = preshared_key        # bytes or None
        self.last_handshake = last_handshake      # epoch seconds (float) or None
        self.rx_bytes = rx_bytes
        self.tx_bytes = tx_bytes


class DeviceState(object):
    __slots__ = ("private_key", "listen_port", "fwmark", "peers")

    def __init__(self, private_key=None, listen_port=0, fwmark=0, peers=None):
        self.private_key = private_key            # bytes or None
        self.listen_port = listen_port
        self.fwmark = fwmark
        self.peers = peers if peers is not None else {}   # base64 public key -> PeerState, in device order


class PeerChange(object):
    __slots__ = ("public_key", "remove", "new", "preshared_key", "endpoint", "persistent_keepalive", "allowed_ips")

    def __init__(self, public_key, remove=False, new=False, preshared_key=None, endpoint=None,
                 persistent_keepalive=None, allowed_ips=None):
        self.public_key = public_key
        self.remove = remove
        self.new = new
        self.preshared_key = preshared_key        # None: unchanged; ZERO_KEY: removed
        self.endpoint = endpoint                  # None: unchanged
        self.persistent_keepalive = persistent_keepalive  # None: unchanged
        self.allowed_ips = allowed_ips            # None: unchanged; list: replaces


class DeviceChange(object):
    __slots__ = ("private_key", "listen_port", "fwmark", "peers")

    def __init__(self):
        self.private_key = None
        self.listen_port = None
        self.fwmark = None
        self.peers = []

    def empty(self):
        return self.private_key is None and self.listen_port is None and self.fwmark is None and not self.peers


# ------------------------------------------------------------------------------------ validation

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


def validate_interface(params, resolver=None):
    """Module-style params -> InterfaceSpec. Collects every error (each naming its field) into one
    ValidationError. `private_key` is a base64 string, or `private_key_file` a path."""
    errors = []

    def check(fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except ValidationError as e:
            errors.append(str(e))
            return None

    name = check(validate_ifname, params.get("name"))
    priv = None
    if params.get("private_key") is not None:
        priv = check(decode_key, params["private_key"], "private_key", secret=True)
    elif params.get("private_key_file") is not None:
        priv = check(read_private_key_file, params["private_key_file"])
    else:
        errors.append("private_key: one of private_key or private_key_file is required")
    own_pub = encode_key(public_key_bytes(priv)) if priv is not None else None

    listen_port = params.get("listen_port")
    if listen_port is not None:
        listen_port = check(_int_in, listen_port, "listen_port", 0, 65535, "a port (0-65535)")
    fwmark = params.get("fwmark")
    if fwmark is not None:
        fwmark = check(_int_in, fwmark, "fwmark", 0, 0xFFFFFFFF, "a 32-bit fwmark")
    mtu = params.get("mtu")
    mtu = DEFAULT_MTU if mtu is None else check(_int_in, mtu, "mtu", 576, 65535, "an MTU (576-65535)")

    addresses = params.get("addresses")
    if addresses is not None:
        norm = []
        for i, a in enumerate(addresses):
            n = check(normalize_interface_address, a, "addresses[%d]" % i)
            if n is not None and n in norm:
                errors.append("addresses[%d]: %r is listed twice" % (i, a))
            elif n is not None:
                norm.append(n)
        addresses = sorted(norm)

    peers = []
    seen_keys = {}
    owner_of = {}
    for i, p in enumerate(params.get("peers") or []):
        f = "peers[%d]" % i
        if not isinstance(p, dict):
            errors.append("%s: expected a dict" % f)
            continue
        pub = p.get("public_key")
        if pub is None:
            errors.append("%s.public_key: is required" % f)
        elif check(decode_key, pub, f + ".public_key") is not None:
            pub = pub.strip()
            if pub in seen_keys:
                errors.append("%s.public_key: %r is already used by peers[%d]" % (f, pub, seen_keys[pub]))
            elif pub == own_pub:
                errors.append("%s.public_key: %r is the interface's own public key" % (f, pub))
            seen_keys[pub] = i
        else:
            pub = None
        endpoint = None
        if p.get("endpoint") not in (None, ""):
            endpoint = check(resolve_endpoint, p["endpoint"], f + ".endpoint", resolver)
        allowed = []
        for j, cidr in enumerate(p.get("allowed_ips") or []):
            fj = "%s.allowed_ips[%d]" % (f, j)
            n = check(normalize_cidr, cidr, fj)
            if n is None:
                continue
            if n in owner_of:
                errors.append("%s: %r is already routed to %s (an allowed IP belongs to one peer)" % (fj, cidr, owner_of[n]))
                continue
            owner_of[n] = f
            allowed.append(n)
        keepalive = p.get("persistent_keepalive")
        keepalive = 0 if keepalive is None else check(_int_in, keepalive, f + ".persistent_keepalive", 0, 65535,
                                                      "a keepalive interval in seconds (0-65535)")
        psk = None
        if p.get("preshared_key") is not None:
            psk = check(decode_key, p["preshared_key"], f + ".preshared_key", secret=True)
        if pub is not None:
            peers.append(PeerSpec(pub, endpoint, sorted(allowed, key=_cidr_sort_key), keepalive or 0, psk))

    if errors:
        raise ValidationError("; ".join(errors))
    return InterfaceSpec(name, priv, listen_port, fwmark, mtu, addresses, peers, bool(params.get("exclusive")))


def _cidr_sort_key(cidr):
    n = ipaddress.ip_network(cidr)
    return (n.version, n.network_address.packed, n.prefixlen)


# ---------------------------------------------------------------------------------- diff / render

def compute_change(spec, current):
    """Minimal change that turns `current` (DeviceState, or None for a new device) into `spec`."""
    cur = current or DeviceState()
    ch = DeviceChange()
    if cur.private_key != spec.private_key:
        ch.private_key = spec.private_key
    if spec.listen_port is not None and spec.listen_port != cur.listen_port:
        ch.listen_port = spec.listen_port
    if spec.fwmark is not None and spec.fwmark != cur.fwmark:
        ch.fwmark = spec.fwmark
    wanted = set(p.public_key for p in spec.peers)
    if spec.exclusive:
        for pub in cur.peers:
            if pub not in wanted:
                ch.peers.append(PeerChange(pub, remove=True))
    inherited = replaced_peer_endpoint(spec, cur)
    for p in spec.peers:
        c = cur.peers.get(p.public_key)
        if c is None:
            ch.peers.append(PeerChange(p.public_key, new=True, preshared_key=p.preshared_key,
                                       endpoint=p.endpoint if p.endpoint is not None else inherited,
                                       persistent_keepalive=p.persistent_keepalive or None,
                                       allowed_ips=list(p.allowed_ips)))
            continue
        pc = PeerChange(p.public_key)
        if (p.preshared_key or ZERO_KEY) != (c.preshared_key or ZERO_KEY):
            pc.preshared_key = p.preshared_key or ZERO_KEY
        if p.endpoint is not None and p.endpoint != c.endpoint:
            pc.endpoint = p.endpoint
        if p.persistent_keepalive != (c.persistent_keepalive or 0):
            pc.persistent_keepalive = p.persistent_keepalive
        if sorted(p.allowed_ips, key=_cidr_sort_key) != sorted(c.allowed_ips, key=_cidr_sort_key):
            pc.allowed_ips = list(p.allowed_ips)
        if (pc.preshared_key is not None or pc.endpoint is not None or pc.persistent_keepalive is not None
                or pc.allowed_ips is not None):
            ch.peers.append(pc)
    return ch


def replaced_peer_endpoint(spec, current):
    """A key rotation of the remote side replaces an exclusive interface's only peer by one with a new public
    key. A peer without a configured endpoint (a server's) would start without one and could not handshake
    until the remote does; it gets the endpoint WireGuard learned for the peer it replaces, so this side
    handshakes at once (docs/key-rotation.md). Returns that endpoint, or None when not such a replacement."""
    if not spec.exclusive or len(spec.peers) != 1 or spec.peers[0].endpoint is not None:
        return None
    removed = [p for pub, p in current.peers.items() if pub != spec.peers[0].public_key]
    if len(removed) != 1 or spec.peers[0].public_key in current.peers:
        return None
    return removed[0].endpoint


def render_uapi_set(change):
    """DeviceChange -> the UAPI `set=1` request text, or '' when there is nothing to write."""
    if change.empty():
        return ""
    out = ["set=1"]
    if change.private_key is not None:
        out.append("private_key=" + change.private_key.hex())
    if change.listen_port is not None:
        out.append("listen_port=%d" % change.listen_port)
    if change.fwmark is not None:
        out.append("fwmark=%d" % change.fwmark)
    # removals first: an allowed IP that moves to another peer is then never briefly owned twice
    for pc in sorted(change.peers, key=lambda x: not x.remove):
        out.append("public_key=" + base64.b64decode(pc.public_key).hex())
        if pc.remove:
            out.append("remove=true")
            continue
        if pc.preshared_key is not None:
            out.append("preshared_key=" + pc.preshared_key.hex())
        if pc.endpoint is not None:
            out.append("endpoint=" + pc.endpoint)
        if pc.persistent_keepalive is not None:
            out.append("persistent_keepalive_interval=%d" % pc.persistent_keepalive)
        if pc.allowed_ips is not None:
            out.append("replace_allowed_ips=true")
            out.extend("allowed_ip=" + a for a in pc.allowed_ips)
    return "\n".join(out) + "\n\n"


def parse_uapi_get(text):
    """Response of `get=1` -> DeviceState. Raises WireGuardError on a non-zero errno."""
    dev = DeviceState()
    peer = None
    hs_sec = {}
    for line in text.split("\n"):
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise WireGuardError("UAPI: unexpected line %r" % line[:60])
        if key == "errno":
            if int(value) != 0:
                raise WireGuardError("UAPI get failed: errno %s" % value)
        elif key == "public_key":
            peer = PeerState(encode_key(bytes.fromhex(value)))
            dev.peers[peer.public_key] = peer
        elif peer is None:
            if key == "private_key":
                raw = bytes.fromhex(value)
                dev.private_key = None if raw == ZERO_KEY else raw
            elif key == "listen_port":
                dev.listen_port = int(value)
            elif key == "fwmark":
                dev.fwmark = int(value)
        elif key == "preshared_key":
            raw = bytes.fromhex(value)
            peer.preshared_key = None if raw == ZERO_KEY else raw
        elif key == "endpoint":
            peer.endpoint = value
        elif key == "allowed_ip":
            peer.allowed_ips.append(value)
        elif key == "persistent_keepalive_interval":
            peer.persistent_keepalive = int(value)
        elif key == "rx_bytes":
            peer.rx_bytes = int(value)
        elif key == "tx_bytes":
            peer.tx_bytes = int(value)
        elif key == "last_handshake_time_sec":
            hs_sec[peer.public_key] = int(value)
        elif key == "last_handshake_time_nsec":
            sec = hs_sec.get(peer.public_key, 0)
            if sec or int(value):
                peer.last_handshake = sec + int(value) / 1e9
    for pub, sec in hs_sec.items():
        p = dev.peers[pub]
        if p.last_handshake is None and sec:
            p.last_handshake = float(sec)
    return dev


# --------------------------------------------------------------------------- public views (no secrets)

def peer_view(p, now=None):
    """A peer as returned to users: never the preshared key itself, only whether one is set."""
    view = {
        "public_key": p.public_key,
        "endpoint": p.endpoint,
        "allowed_ips": list(p.allowed_ips),
        "persistent_keepalive": p.persistent_keepalive or 0,
        "preshared_key_set": bool(p.preshared_key),
    }
    if isinstance(p, PeerState):
        now = time.time() if now is None else now
        view["latest_handshake"] = int(p.last_handshake) if p.last_handshake else None
        view["latest_handshake_age"] = round(max(0.0, now - p.last_handshake), 3) if p.last_handshake else None
        view["rx_bytes"] = p.rx_bytes
        view["tx_bytes"] = p.tx_bytes
    return view


def config_view(name, dev, link, with_stats=False):
    """Comparable view of an interface (diff before/after): keys are public only."""
    if dev is None:
        return {"name": name, "state": "absent"}
    peers = []
    for p in dev.peers.values():
        v = peer_view(p)
        if not with_stats:
            for k in ("latest_handshake", "latest_handshake_age", "rx_bytes", "tx_bytes"):
                v.pop(k, None)
        v["allowed_ips"] = sorted(v["allowed_ips"], key=_cidr_sort_key)
        peers.append(v)
    return {
        "name": name,
        "state": "present",
        "public_key": encode_key(public_key_bytes(dev.private_key)) if dev.private_key else None,
        "listen_port": dev.listen_port,
        "fwmark": dev.fwmark,
        "mtu": link.mtu if link else None,
        "addresses": sorted(link.addresses) if link else [],
        "up": link.up if link else False,
        "peers": sorted(peers, key=lambda v: v["public_key"]),
    }


def apply_change_to_state(spec, current):
    """The DeviceState the device will have after `compute_change(spec, current)` is applied (check mode)."""
    cur = current or DeviceState()
    new = DeviceState(spec.private_key,
                      spec.listen_port if spec.listen_port is not None else cur.listen_port,
                      spec.fwmark if spec.fwmark is not None else cur.fwmark)
    if not spec.exclusive:
        wanted = set(p.public_key for p in spec.peers)
        claimed = set(a for p in spec.peers for a in p.allowed_ips)
        for pub, p in cur.peers.items():
            if pub not in wanted:  # kept, minus allowed IPs a listed peer takes over
                new.peers[pub] = PeerState(pub, p.endpoint, [a for a in p.allowed_ips if a not in claimed],
                                           p.persistent_keepalive, p.preshared_key, p.last_handshake,
                                           p.rx_bytes, p.tx_bytes)
    inherited = replaced_peer_endpoint(spec, cur)
    for p in spec.peers:
        c = cur.peers.get(p.public_key)
        new.peers[p.public_key] = PeerState(
            p.public_key, p.endpoint if p.endpoint is not None else (c.endpoint if c else inherited),
            list(p.allowed_ips), p.persistent_keepalive, p.preshared_key)
    return new


# ------------------------------------------------------------------------------------- links

class LinkState(object):
    __slots__ = ("index", "kind", "mtu", "up", "addresses")

    def __init__(self, index, kind, mtu, up, addresses):
        self.index = index
        self.kind = kind
        self.mtu = mtu
        self.up = up
        self.addresses = addresses


def _require_pyroute2():
    if not HAS_PYROUTE2:
        raise WireGuardError("pyroute2 is required: " + (PYROUTE2_IMPORT_ERROR or "").strip().splitlines()[-1])


def read_link(ipr, name):
    idx = ipr.link_lookup(ifname=name)
    if not idx:
        return None
    msg = ipr.get_links(idx[0])[0]
    kind = None
    info = msg.get_attr("IFLA_LINKINFO")
    if info is not None:
        kind = info.get_attr("IFLA_INFO_KIND")
    addrs = []
    for a in ipr.get_addr(index=idx[0]):
        ip = a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS")
        if ip is None:
            continue
        iface = ipaddress.ip_interface("%s/%d" % (ip, a["prefixlen"]))
        if iface.version == 6 and iface.ip.is_link_local:
            continue  # kernel-generated, not managed
        addrs.append(str(iface))
    return LinkState(idx[0], kind, msg.get_attr("IFLA_MTU"), bool(msg["flags"] & 1), sorted(addrs))


def link_changes(spec, link):
    """(mtu or None, addresses to add, addresses to delete, bring up?) for an existing link."""
    mtu = spec.mtu if link.mtu != spec.mtu else None
    add, delete = [], []
    if spec.addresses is not None:
        have = set(link.addresses)
        add = [a for a in spec.addresses if a not in have]
        delete = [a for a in link.addresses if a not in set(spec.addresses)]
    return mtu, add, delete, not link.up


def apply_link(ipr, link, spec):
    """Writes only what differs; returns True if anything was written. One netlink socket for all of it."""
    mtu, add, delete, up = link_changes(spec, link)
    for a in delete:
        i = ipaddress.ip_interface(a)
        ipr.addr("del", index=link.index, address=str(i.ip), prefixlen=i.network.prefixlen)
    for a in add:
        i = ipaddress.ip_interface(a)
        ipr.addr("add", index=link.index, address=str(i.ip), prefixlen=i.network.prefixlen)
    if mtu is not None:
        ipr.link("set", index=link.index, mtu=mtu)
    if up:
        ipr.link("set", index=link.index, state="up")
    return bool(mtu is not None or add or delete or up)


# ----------------------------------------------------------------------------------- backends

def kernel_has_wireguard():
    """True when the kernel module is loaded/built in (its generic netlink family is registered)."""
    if os.path.isdir("/sys/module/wireguard"):
        return True
    if not HAS_PYROUTE2:
        return False
    try:
        from pyroute2.netlink.generic import GenericNetlinkSocket
        s = GenericNetlinkSocket()
        try:
            s.bind("wireguard", None)
            return True
        finally:
            s.close()
    except Exception:  # family lookup fails with a netlink error when the module is absent
        return False


def _same_netns(pid):
    try:
        return os.stat("/proc/%d/ns/net" % pid).st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def _proc_alive(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def _is_wireguard_go(pid, ifname, binary=WIREGUARD_GO):
    """True if `pid` is a live wireguard-go serving `ifname` (guards against PID reuse)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    argv = [a.decode("utf-8", "replace") for a in argv if a]
    if len(argv) < 2 or argv[-1] != ifname:
        return False
    return os.path.basename(argv[0]) == os.path.basename(binary) and _proc_alive(pid)


class UserspaceBackend(object):
    """One `wireguard-go -f <ifname>` process per interface, started in the caller's netns, in its own
    session (survives the module's exit). Files in `run_dir`: <if>.sock (wireguard-go), <if>.pid and
    <if>.log (ours, 0600)."""

    name = BACKEND_USERSPACE

    def __init__(self, ifname, run_dir=RUN_DIR, binary=WIREGUARD_GO, timeout=5.0):
        self.ifname = ifname
        self.run_dir = run_dir
        self.binary = binary
        self.timeout = timeout
        self.sock_path = os.path.join(run_dir, ifname + ".sock")
        self.pid_path = os.path.join(run_dir, ifname + ".pid")
        self.log_path = os.path.join(run_dir, ifname + ".log")

    # -- socket
    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.sock_path)
        except OSError:
            s.close()
            raise
        return s

    def socket_live(self):
        try:
            self._connect().close()
            return True
        except OSError:
            return False

    def exchange(self, request):
        """One request on one connection; returns the response text (up to the blank line)."""
        s = self._connect()
        try:
            s.sendall(request.encode("ascii"))
            chunks = []
            tail = b""
            while True:
                data = s.recv(1 << 16)
                if not data:
                    break
                chunks.append(data)
                tail = (tail + data)[-2:]
                if tail == b"\n\n":
                    break
        finally:
            s.close()
        return b"".join(chunks).decode("ascii")

    def read(self):
        return parse_uapi_get(self.exchange("get=1\n\n"))

    def apply(self, change):
        text = render_uapi_set(change)
        if not text:
            return False
        resp = self.exchange(text)
        code = None
        for line in resp.split("\n"):
            if line.startswith("errno="):
                code = int(line[6:])
        if code != 0:
            raise WireGuardError("wireguard-go rejected the configuration of %s: errno %s (%s)" % (
                self.ifname, code, os.strerror(abs(code)) if code else "no answer"))
        return True

    @contextlib.contextmanager
    def config_lock(self):
        """Serializes our read-then-write changes of this interface (the modules, the health probe's session
        restart): an advisory lock on the interface's pid file, which exists exactly while we run it."""
        try:
            fd = os.open(self.pid_path, os.O_RDONLY)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # -- process
    def recorded_pid(self, same_netns=True):
        """PID of our wireguard-go for this interface: the pid file, else the socket's peer credentials;
        checked against /proc/<pid>/cmdline (PID reuse) and, by default, our network namespace."""
        pid = self._pid_from_file() or self._pid_from_socket()
        if pid is None or (same_netns and not _same_netns(pid)):
            return None
        return pid

    def _pid_from_file(self):
        try:
            with open(self.pid_path, "r", encoding="ascii") as f:
                pid = int(f.read().strip() or 0)
            if pid > 0 and _is_wireguard_go(pid, self.ifname, self.binary):
                return pid
        except (OSError, ValueError):
            pass
        return None

    def _pid_from_socket(self):
        try:
            s = self._connect()
        except OSError:
            return None
        try:
            cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid = struct.unpack("3i", cred)[0]
        finally:
            s.close()
        return pid if pid > 0 and _is_wireguard_go(pid, self.ifname, self.binary) else None

    def running(self, link):
        """True if this interface's wireguard-go serves `link` in this netns. Raises if the name is used by
        a wireguard-go of another network namespace (sockets are shared by all namespaces)."""
        live = self.socket_live()
        if live and link is None:
            pid = self.recorded_pid(same_netns=False)
            where = " (pid %d)" % pid if pid else ""
            raise WireGuardError("interface name %r is used by a wireguard-go%s in another network namespace: "
                                 "wireguard-go names must be unique per host" % (self.ifname, where))
        return live and link is not None

    def start(self):
        if not os.path.isdir(self.run_dir):
            os.makedirs(self.run_dir, 0o755)
        if os.path.exists(self.sock_path) and not self.socket_live():
            os.unlink(self.sock_path)  # stale: nobody listens
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LOG_LEVEL": "error"}
        try:
            proc = subprocess.Popen([self.binary, "-f", self.ifname], stdin=subprocess.DEVNULL, stdout=log_fd,
                                    stderr=log_fd, cwd="/", env=env, close_fds=True, start_new_session=True)
        except OSError as e:
            raise WireGuardError("cannot start %s: %s" % (self.binary, e))
        finally:
            os.close(log_fd)
        write_atomic(self.pid_path, "%d\n" % proc.pid)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise WireGuardError("%s %s exited with %s: %s" % (self.binary, self.ifname, proc.returncode,
                                                                   self._log_tail()))
            if self.socket_live():
                return proc.pid
            time.sleep(0.005)
        self._kill(proc.pid)
        raise WireGuardError("%s %s: no UAPI socket %s after %.0f s" % (self.binary, self.ifname, self.sock_path,
                                                                        self.timeout))

    def _log_tail(self):
        try:
            with open(self.log_path, "r", encoding="utf-8", errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-3:]) or "no output"
        except OSError:
            return "no log"

    def _kill(self, pid):
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not _proc_alive(pid):
                    return
                time.sleep(0.01)

    def stop(self, ipr=None):
        """Stops our process (by recorded PID), removes socket, pid and log files, and the link."""
        pid = self.recorded_pid()
        if pid is not None:
            self._kill(pid)
        elif ipr is not None:
            # Not ours to signal (started by someone else, daemonized): deleting the TUN link ends it.
            idx = ipr.link_lookup(ifname=self.ifname)
            if idx:
                ipr.link("del", index=idx[0])
        deadline = time.monotonic() + 3.0
        while os.path.exists(self.sock_path) and self.socket_live() and time.monotonic() < deadline:
            time.sleep(0.01)
        for path in (self.sock_path, self.pid_path, self.log_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        if ipr is not None:
            idx = ipr.link_lookup(ifname=self.ifname)
            if idx:
                ipr.link("del", index=idx[0])
        return pid


class KernelBackend(object):
    """The Linux module over generic netlink (pyroute2). One netlink socket per apply; pyroute2 sends one
    message per changed peer. Not exercised on kernels without the module."""

    name = BACKEND_KERNEL

    def __init__(self, ifname):
        self.ifname = ifname

    def running(self, link):
        return link is not None and link.kind == "wireguard"

    def config_lock(self):
        """No cross-process lock for the kernel module (not exercised here); see UserspaceBackend.config_lock."""
        return contextlib.ExitStack()

    def start(self, ipr):
        ipr.link("add", ifname=self.ifname, kind="wireguard")
        return None

    def stop(self, ipr):
        idx = ipr.link_lookup(ifname=self.ifname)
        if idx:
            ipr.link("del", index=idx[0])
        return None

    def read(self):
        from pyroute2 import WireGuard
        dev = DeviceState()
        wg = WireGuard()
        try:
            msgs = wg.info(self.ifname)
        finally:
            wg.close()
        for msg in msgs:
            k = msg.get_attr("WGDEVICE_A_PRIVATE_KEY")
            if k is not None:
                raw = base64.b64decode(k["value"] if isinstance(k, dict) else k)
                dev.private_key = None if raw == ZERO_KEY else raw
            dev.listen_port = msg.get_attr("WGDEVICE_A_LISTEN_PORT") or dev.listen_port
            dev.fwmark = msg.get_attr("WGDEVICE_A_FWMARK") or dev.fwmark
            for p in msg.get_attr("WGDEVICE_A_PEERS") or []:
                pk = p.get_attr("WGPEER_A_PUBLIC_KEY")
                pub = (pk["value"] if isinstance(pk, dict) else pk)
                pub = pub.decode("ascii") if isinstance(pub, bytes) else pub
                peer = dev.peers.get(pub) or PeerState(pub)
                dev.peers[pub] = peer
                psk = p.get_attr("WGPEER_A_PRESHARED_KEY")
                if psk is not None:
                    raw = base64.b64decode(psk["value"] if isinstance(psk, dict) else psk)
                    peer.preshared_key = None if raw == ZERO_KEY else raw
                ep = p.get_attr("WGPEER_A_ENDPOINT")
                if ep is not None and ep.get("port"):
                    peer.endpoint = format_endpoint(ep["addr"], ep["port"])
                peer.persistent_keepalive = p.get_attr("WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL") or 0
                hs = p.get_attr("WGPEER_A_LAST_HANDSHAKE_TIME")
                if hs is not None and (hs.get("tv_sec") or hs.get("tv_nsec")):
                    peer.last_handshake = hs["tv_sec"] + hs["tv_nsec"] / 1e9
                peer.rx_bytes = p.get_attr("WGPEER_A_RX_BYTES") or 0
                peer.tx_bytes = p.get_attr("WGPEER_A_TX_BYTES") or 0
                for a in p.get_attr("WGPEER_A_ALLOWEDIPS") or []:
                    if a.get("addr"):
                        peer.allowed_ips.append(str(ipaddress.ip_network(a["addr"], strict=False)))
        return dev

    def apply(self, change):
        if change.empty():
            return False
        from pyroute2 import WireGuard
        wg = WireGuard()
        try:
            dev = {}
            if change.private_key is not None:
                dev["private_key"] = encode_key(change.private_key)
            if change.listen_port is not None:
                dev["listen_port"] = change.listen_port
            if change.fwmark is not None:
                dev["fwmark"] = change.fwmark
            if dev:
                wg.set(self.ifname, **dev)
            for pc in sorted(change.peers, key=lambda x: not x.remove):
                peer = {"public_key": pc.public_key}
                if pc.remove:
                    peer["remove"] = True
                else:
                    if pc.preshared_key is not None:
                        peer["preshared_key"] = encode_key(pc.preshared_key)
                    if pc.endpoint is not None:
                        host, port = split_endpoint(pc.endpoint, "endpoint")
                        peer["endpoint_addr"], peer["endpoint_port"] = host, port
                    if pc.persistent_keepalive is not None:
                        peer["persistent_keepalive"] = pc.persistent_keepalive
                    if pc.allowed_ips is not None:
                        peer["replace_allowed_ips"] = True
                        peer["allowed_ips"] = list(pc.allowed_ips)
                wg.set(self.ifname, peer=peer)
        finally:
            wg.close()
        return True


def choose_backend(ifname, link, preference="auto", kernel_available=None, run_dir=RUN_DIR, binary=WIREGUARD_GO):
    """An existing interface keeps its backend; otherwise `preference`, where auto = kernel if the module
    is there, else wireguard-go. Raises if the name is taken by something that is not WireGuard."""
    if link is not None:
        if link.kind == "wireguard":
            return KernelBackend(ifname)
        us = UserspaceBackend(ifname, run_dir, binary)
        if link.kind == "tun" and us.socket_live():
            return us
        raise WireGuardError("%s: a %s link with this name exists and is not a WireGuard interface"
                             % (ifname, link.kind or "non-WireGuard"))
    if preference == "auto":
        if kernel_available is None:
            kernel_available = kernel_has_wireguard()
        preference = BACKEND_KERNEL if kernel_available else BACKEND_USERSPACE
    if preference == BACKEND_KERNEL:
        return KernelBackend(ifname)
    if preference in (BACKEND_USERSPACE, "userspace"):
        return UserspaceBackend(ifname, run_dir, binary)
    raise ValidationError("backend: %r is not one of auto, kernel, wireguard-go" % (preference,))


# ------------------------------------------------------------------------------- operations

def ensure_present(spec, check_mode=False, backend="auto", run_dir=RUN_DIR, binary=WIREGUARD_GO):
    """Makes the interface match `spec`. Returns a result dict: changed, backend, pid, interface (public view),
    diff {before, after}, and `writes` (number of UAPI/netlink write exchanges, 0 when unchanged)."""
    _require_pyroute2()
    with IPRoute() as ipr, contextlib.ExitStack() as held:
        link = read_link(ipr, spec.name)
        be = choose_backend(spec.name, link, backend, run_dir=run_dir, binary=binary)
        if isinstance(be, UserspaceBackend) and link is None and not _has_binary(binary):
            raise WireGuardError("kernel has no wireguard module and %r is not installed" % binary)
        exists = be.running(link)
        if exists:  # read, compare and write as one step against our other writers (wireguard_session)
            held.enter_context(be.config_lock())
        current = be.read() if exists else None
        change = compute_change(spec, current)
        before = config_view(spec.name, current, link)
        after_link = LinkState(link.index if link else 0, link.kind if link else None, spec.mtu, True,
                               sorted(spec.addresses) if spec.addresses is not None else (link.addresses if link else []))
        after = config_view(spec.name, apply_change_to_state(spec, current), after_link)
        link_dirty = exists and any(link_changes(spec, link))
        changed = (not exists) or (not change.empty()) or bool(link_dirty)
        result = {"changed": changed, "backend": be.name, "created": not exists, "writes": 0,
                  "diff": {"before": before, "after": after}, "interface": after}
        if check_mode or not changed:
            result["pid"] = be.recorded_pid() if exists and isinstance(be, UserspaceBackend) else None
            if not changed:
                result["interface"] = before
            return result
        pid = None
        try:
            if not exists:
                pid = be.start() if isinstance(be, UserspaceBackend) else be.start(ipr)
                link = read_link(ipr, spec.name)
                if link is None:
                    raise WireGuardError("%s: link did not appear after starting the %s backend" % (spec.name, be.name))
            if be.apply(change):
                result["writes"] += 1
            if apply_link(ipr, link, spec):
                result["writes"] += 1
        except Exception:
            if not exists:  # leave nothing half-made behind
                try:
                    be.stop(ipr)
                except Exception:
                    pass
            raise
        result["pid"] = pid if pid is not None else (be.recorded_pid() if isinstance(be, UserspaceBackend) else None)
        return result


def ensure_absent(name, check_mode=False, run_dir=RUN_DIR, binary=WIREGUARD_GO):
    """Removes the interface: wireguard-go process (by recorded PID), socket, pid/log files, link."""
    _require_pyroute2()
    validate_ifname(name)
    with IPRoute() as ipr:
        link = read_link(ipr, name)
        us = UserspaceBackend(name, run_dir, binary)
        if link is None:
            gone = {"name": name, "state": "absent"}
            if us.socket_live():
                # a live interface of this name in another network namespace: absent here, and not ours to
                # touch (a gateway that moved to another host of the same machine keeps its name)
                return {"changed": False, "backend": None, "elsewhere": True,
                        "diff": {"before": dict(gone), "after": dict(gone)}}
            leftovers = [p for p in (us.pid_path, us.log_path, us.sock_path) if os.path.exists(p)]
            if leftovers and not check_mode:
                for p in leftovers:
                    os.unlink(p)
            return {"changed": bool(leftovers), "backend": None, "diff": {"before": dict(gone), "after": dict(gone)}}
        be = choose_backend(name, link, run_dir=run_dir, binary=binary)
        current = be.read() if be.running(link) else None
        result = {"changed": True, "backend": be.name, "pid": be.recorded_pid() if isinstance(be, UserspaceBackend) else None,
                  "diff": {"before": config_view(name, current, link), "after": {"name": name, "state": "absent"}}}
        if not check_mode:
            be.stop(ipr)
        return result


def read_interface(name, run_dir=RUN_DIR, binary=WIREGUARD_GO, now=None):
    """Public view of an interface with per-peer stats (handshake age, rx/tx) or {'state': 'absent'}."""
    _require_pyroute2()
    validate_ifname(name)
    with IPRoute() as ipr:
        link = read_link(ipr, name)
        if link is None:
            us = UserspaceBackend(name, run_dir, binary)
            us.running(None)  # raises when the name lives in another netns
            return {"name": name, "state": "absent", "backend": None}
        be = choose_backend(name, link, run_dir=run_dir, binary=binary)
        dev = be.read()
    view = config_view(name, dev, link, with_stats=True)
    now = time.time() if now is None else now
    view["peers"] = sorted((peer_view(p, now) for p in dev.peers.values()), key=lambda v: v["public_key"])
    view["backend"] = be.name
    view["pid"] = be.recorded_pid() if isinstance(be, UserspaceBackend) else None
    return view


def _has_binary(binary):
    if os.path.sep in binary:
        return os.access(binary, os.X_OK)
    from shutil import which
    return which(binary) is not None


__all__ = [
    "WireGuardError", "ValidationError", "generate_keypair", "generate_private_key", "public_key", "decode_key",
    "key_to_hex", "hex_to_key", "validate_interface", "compute_change", "render_uapi_set", "parse_uapi_get",
    "ensure_present", "ensure_absent", "read_interface", "kernel_has_wireguard", "choose_backend",
]
