# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dedicated nftables NAT table built from structured input and replaced atomically.

Desired state (a dict, as the `liqo.fabric.nat_table` module and the controller pass it):

    family: ip | inet, name: table name,
    remaps:  [{original: CIDR, remapped: CIDR, translate: both|source|destination, iifname, oifname}]
    dnat:    [{daddr: IP, to: IP, saddr: CIDR, iifname}]
    snat:    [{saddr: CIDR, to: IP, daddr: CIDR, iifname, oifname}]
    bypass:  [{saddr: CIDR, daddr: CIDR, oifname}]
    mss:     [{oifname, iifname, size}]
    tunnels: [{interface, mark, remote_original: CIDR, remote_remapped: CIDR, output: bool}]

A remap is a 1:1 prefix translation, host bits preserved: packets to `remapped` (optionally arriving on
`iifname`) get their destination rewritten into `original` (prerouting, dstnat); packets from
`original` (optionally leaving through `oifname`) get their source rewritten into `remapped`
(postrouting, srcnat). Remaps sharing the interface become one rule with an interval map
(`snat ip prefix to ip saddr map { a/16 : b/16, ... }`): one lookup per packet, whatever their count.

A bypass keeps the source of matching traffic unchanged in spite of a masquerade in another table (e.g.
the CNI's): an `accept` only ends our own chain, the next NAT chain of the hook still runs, but once a
NAT binding exists the kernel skips later NAT chains; so the bypass is an identity 1:1 SNAT of `saddr`
onto itself, in a chain with a priority lower than srcnat.

A tunnel is policy routing by mark for a remote cluster whose pod CIDR `remote_original` (O) may equal
a local one: local pods reach it at `remote_remapped` (R). Packets to R (and replies of connections that
came in through the tunnel, recognised by their ct mark) get the fwmark `mark` in a mangle chain, before
the DNAT R -> O, so that an `ip rule fwmark M lookup T` (set up elsewhere) routes them into the tunnel
instead of to the local pods of O; connections arriving from the tunnel get the ct mark and their source
O rewritten into R (postrouting, `iifname` = the input interface of forwarded packets). With `output`,
packets of the host itself get the same treatment in a `type route` chain, so the kernel re-routes them
after the mark is set.

Everything is validated before the kernel is touched. The canonical form (`Table`) is built both from
the desired state and from the kernel's JSON listing, so idempotence is a structural comparison; the
rendering of a `Table` is the nft text applied and the text shown in diffs.
"""
from __future__ import annotations

import json
import re
import socket
import threading
from dataclasses import dataclass, field

from ansible_collections.liqo.fabric.plugins.module_utils.nft.client import Nft

DEFAULT_TABLE_NAME = "liqo_fabric_nat"
FAMILIES = ("ip", "inet")
TRANSLATE_CHOICES = ("both", "source", "destination")
MSS_MIN, MSS_MAX = 536, 65495

# chain name -> (type, hook, priority): dstnat - 10 / srcnat - 10 run before the usual NAT chains
# (kube-proxy, CNI masquerade at dstnat / srcnat); mangle for the MSS clamp and the tunnel marks (before
# the DNAT, so the mark sees the destination the pod chose). The host's own packets: `type route` so the
# kernel routes them again once the mark is set; nat output at dstnat - 10 like prerouting.
CHAIN_PRE, CHAIN_POST, CHAIN_FWD = "prerouting", "postrouting", "forward"
CHAIN_MANGLE_PRE, CHAIN_MANGLE_OUT, CHAIN_OUT = "mangle_prerouting", "mangle_output", "output"
CHAIN_SPECS = {
    CHAIN_PRE: ("nat", "prerouting", -110),
    CHAIN_POST: ("nat", "postrouting", 90),
    CHAIN_FWD: ("filter", "forward", -150),
    CHAIN_MANGLE_PRE: ("filter", "prerouting", -150),
    CHAIN_MANGLE_OUT: ("route", "output", -150),
    CHAIN_OUT: ("nat", "output", -110),
}
CHAIN_ORDER = (CHAIN_MANGLE_PRE, CHAIN_PRE, CHAIN_MANGLE_OUT, CHAIN_OUT, CHAIN_POST, CHAIN_FWD)  # render order: packet path
_PRIORITY_NAMES = {-150: "mangle", -100: "dstnat", 0: "filter", 100: "srcnat"}
# nft accepts dstnat / srcnat only on these hooks (1.0.6: "invalid priority expression value in this context")
_PRIORITY_HOOKS = {"dstnat": ("prerouting",), "srcnat": ("postrouting",)}
MARK_MIN, MARK_MAX = 1, 0xFFFFFFFF

_TABLE_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,15}$")
IFNAMSIZ = 16
MAP_MIN_ENTRIES = 2  # remaps of one direction and interface: from this count on, one map rule


class NatTableError(ValueError):
    """Invalid desired state; `.errors` lists one message per problem, each naming its field."""

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


# ---------------------------------------------------------------- canonical model
# A rule is a tuple of terms, each a tuple starting with its kind:
#   ("iifname", name) ("oifname", name) ("saddr", net) ("daddr", net) ("tcp_syn",)
#   ("nat", "snat"|"dnat", "prefix", net)     1:1 prefix translation (netmap)
#   ("nat", "snat"|"dnat", "addr", ip)        single address
#   ("natmap", "snat"|"dnat", "saddr"|"daddr", version, ((key_net, data_net), ...))
#   ("mss", "rt mtu" | int) ("verdict", "accept"|...) ("raw", json)
#   ("iifname_ne", name) ("oifname_ne", name)  interface is not `name`
#   ("ct_mark", int) ("ct_state", "new") ("ct_direction", "original"|"reply")   conntrack matches
#   ("mark_set", "meta"|"ct", int)            meta mark set / ct mark set
# Networks are canonical strings "addr/len" (len always present), addresses bare strings.


@dataclass(frozen=True)
class Chain:
    name: str
    type: str
    hook: str
    priority: int
    policy: str = "accept"
    rules: tuple = ()


@dataclass(frozen=True)
class Table:
    family: str
    name: str
    chains: tuple = ()
    extras: tuple = field(default=())  # objects we never create (sets, other chains' kinds...): JSON text

    @property
    def rule_count(self) -> int:
        return sum(len(c.rules) for c in self.chains)


def _net_key(net: str) -> tuple:
    """Sort key of a canonical network: (version, address as int, prefix length)."""
    addr, _sep, plen = net.partition("/")
    if ":" in addr:
        return (6, int.from_bytes(socket.inet_pton(socket.AF_INET6, addr), "big"), int(plen))
    return (4, int.from_bytes(socket.inet_pton(socket.AF_INET, addr), "big"), int(plen))


def _sorted_pairs(pairs, keyf=_net_key) -> tuple:
    return tuple(sorted(pairs, key=lambda kv: keyf(kv[0])))


# ---------------------------------------------------------------- validation of the desired state
_VALID_IFNAMES: set = set()


def _check_ifname(errors, where, value):
    if value is None or value in _VALID_IFNAMES:
        return value
    text = str(value)
    base = text[:-1] if text.endswith("*") else text
    if (not base and text != "*") or text in (".", "..") or len(text) >= IFNAMSIZ or (base and not _IFNAME_RE.match(base)):
        errors.append(f"{where}: {text!r} is not a valid interface name "
                      f"(1-{IFNAMSIZ - 1} characters from A-Z a-z 0-9 . _ -, optionally ending in * as a wildcard)")
        return None
    if len(_VALID_IFNAMES) < 4096:
        _VALID_IFNAMES.add(text)
    return text


class _BadCidr(ValueError):
    pass


class _HostBits(ValueError):
    pass


def _parse_cidr(text: str) -> tuple[int, int, int, str]:
    """'10.1.0.0/16' -> (version, int address, prefix length, canonical 'addr/len'); a bare address
    is a /32 (/128). socket.inet_pton, not ipaddress: tables hold tens of thousands of entries."""
    addr, sep, plen_s = text.partition("/")
    fam, bits = (socket.AF_INET6, 128) if ":" in addr else (socket.AF_INET, 32)
    try:
        packed = socket.inet_pton(fam, addr)
    except (OSError, ValueError):
        raise _BadCidr(text) from None
    if sep:
        if not (plen_s.isascii() and plen_s.isdigit()) or int(plen_s) > bits:
            raise _BadCidr(text)
        plen = int(plen_s)
    else:
        plen = bits
    value = int.from_bytes(packed, "big")
    host = value & ((1 << (bits - plen)) - 1)
    if host:
        raise _HostBits(f"{socket.inet_ntop(fam, (value - host).to_bytes(bits // 8, 'big'))}/{plen}")
    return (4 if bits == 32 else 6), value, plen, f"{socket.inet_ntop(fam, packed)}/{plen}"


def _check_net(errors, where, value, family, required=True, keys=None):
    if value is None or value == "":
        if required:
            errors.append(f"{where}: is required")
        return None
    try:
        ver, num, plen, canonical = _parse_cidr(str(value))
    except _HostBits as e:
        errors.append(f"{where}: {value!r} has host bits set (the network is {e})")
        return None
    except _BadCidr:
        errors.append(f"{where}: {value!r} is not a valid CIDR")
        return None
    if ver == 6 and family == "ip":
        errors.append(f"{where}: {value!r} is IPv6, which needs family inet")
        return None
    if keys is not None:
        keys[canonical] = (ver, num, plen)
    return canonical


def _check_addr(errors, where, value, family):
    if value is None or value == "":
        errors.append(f"{where}: is required")
        return None
    text = str(value)
    try:
        if "/" in text:
            raise _BadCidr(text)
        ver, _num, _plen, canonical = _parse_cidr(text)
    except ValueError:
        errors.append(f"{where}: {value!r} is not a valid IP address")
        return None
    if ver == 6 and family == "ip":
        errors.append(f"{where}: {value!r} is IPv6, which needs family inet")
        return None
    return canonical.partition("/")[0]


def _version(net_or_addr: str) -> int:
    return 6 if ":" in net_or_addr else 4


def _same_version(errors, where, *values):
    versions = {_version(v) for v in values if v}
    if len(versions) > 1:
        errors.append(f"{where}: mixes IPv4 and IPv6 ({', '.join(repr(v) for v in values if v)})")
        return False
    return True


def _check_overlaps(errors, entries, what, keyf=_net_key):
    """entries: [(net, where)] of one lookup (one map or one chain position): no two may overlap."""
    spans = []
    for net, where in entries:
        ver, start, plen = keyf(net)
        bits = 32 if ver == 4 else 128
        spans.append((ver, start, start + (1 << (bits - plen)) - 1, net, where))
    spans.sort()
    prev = None
    for span in spans:
        if prev is not None and span[0] == prev[0] and span[1] <= prev[2]:
            errors.append(f"{span[4]}: {what} {span[3]!r} overlaps {prev[3]!r} of {prev[4]}")
        if prev is None or span[0] != prev[0] or span[2] > prev[2]:
            prev = span


def _entries(spec, key, errors):
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        errors.append(f"{key}: must be a list, got {type(value).__name__}")
        return []
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            errors.append(f"{key}[{i}]: must be a dictionary, got {type(item).__name__}")
            continue
        out.append((i, item))
    return out


# ---------------------------------------------------------------- desired state -> Table
@dataclass
class _Build:
    """One desired state being validated and turned into rules: what the section builders share."""
    spec: dict
    family: str
    errors: list = field(default_factory=list)
    keys: dict = field(default_factory=dict)  # canonical network -> sort key, computed once
    chains: dict = field(default_factory=lambda: {name: [] for name in CHAIN_ORDER})  # chain name -> rules

    # the checks of one field of an entry: `where` is the entry (`remaps[2]`), `key` the field
    def net(self, where, entry, key, required=True):
        return _check_net(self.errors, f"{where}.{key}", entry.get(key), self.family, required, self.keys)

    def addr(self, where, entry, key):
        return _check_addr(self.errors, f"{where}.{key}", entry.get(key), self.family)

    def ifname(self, where, entry, key):
        return _check_ifname(self.errors, f"{where}.{key}", entry.get(key))

    def remap_version(self, where, entry, original_key, remapped_key, original, remapped):
        """The IP version of a valid 1:1 pair (both checked networks of one version and prefix length), else None."""
        if not (original and remapped):
            return None
        (over, _onum, olen), (rver, _rnum, rlen) = self.keys[original], self.keys[remapped]
        if over != rver:
            self.errors.append(f"{where}: mixes IPv4 and IPv6 ({entry.get(original_key)!r}, {entry.get(remapped_key)!r})")
            return None
        if olen != rlen:
            self.errors.append(f"{where}.{remapped_key}: prefix length /{rlen} of {entry.get(remapped_key)!r} differs from "
                               f"/{olen} of {original_key} {entry.get(original_key)!r} (a 1:1 remap needs equal lengths)")
            return None
        return over


def _rule(*terms) -> tuple:
    """A rule of these terms, without the optional matches that are not given (a term whose value is None)."""
    return tuple(t for t in terms if len(t) == 1 or t[1] is not None)


def _dnat_rule(b: _Build, w: str, e: dict):
    daddr, to = b.addr(w, e, "daddr"), b.addr(w, e, "to")
    saddr, iif = b.net(w, e, "saddr", required=False), b.ifname(w, e, "iifname")
    if not (daddr and to and _same_version(b.errors, w, daddr, to, saddr)):
        return None
    host = f"{daddr}/{32 if _version(daddr) == 4 else 128}"
    return _rule(("iifname", iif), ("saddr", saddr), ("daddr", host), ("nat", "dnat", "addr", to))


def _snat_rule(b: _Build, w: str, e: dict):
    saddr, to, daddr = b.net(w, e, "saddr"), b.addr(w, e, "to"), b.net(w, e, "daddr", required=False)
    iif, oif = b.ifname(w, e, "iifname"), b.ifname(w, e, "oifname")
    if not (saddr and to and _same_version(b.errors, w, saddr, to, daddr)):
        return None
    return _rule(("iifname", iif), ("oifname", oif), ("saddr", saddr), ("daddr", daddr), ("nat", "snat", "addr", to))


def _bypass_rule(b: _Build, w: str, e: dict):
    saddr, daddr = b.net(w, e, "saddr"), b.net(w, e, "daddr", required=False)
    oif = b.ifname(w, e, "oifname")
    if not (saddr and _same_version(b.errors, w, saddr, daddr)):
        return None
    # identity: see the module docstring
    return _rule(("oifname", oif), ("saddr", saddr), ("daddr", daddr), ("nat", "snat", "prefix", saddr))


def _check_mss(errors, where, size):
    if size is None:
        return None
    if isinstance(size, bool) or not isinstance(size, int) and not str(size).isdigit():
        errors.append(f"{where}: {size!r} is not an integer")
        return None
    if not MSS_MIN <= int(size) <= MSS_MAX:
        errors.append(f"{where}: {size!r} is outside {MSS_MIN}-{MSS_MAX}")
        return None
    return int(size)


def _mss_rule(b: _Build, w: str, e: dict):
    iif, oif = b.ifname(w, e, "iifname"), b.ifname(w, e, "oifname")
    if not (e.get("iifname") or e.get("oifname")):
        b.errors.append(f"{w}: needs oifname (the tunnel interface) or iifname")
    size = _check_mss(b.errors, f"{w}.size", e.get("size"))
    return _rule(("iifname", iif), ("oifname", oif), ("tcp_syn",), ("mss", "rt mtu" if size is None else size))


def _add_remaps(b: _Build, entries):
    """Remaps, grouped per (direction, interface, IP version) in order of first appearance: one interval-map
    rule per group (see _remap_rules)."""
    groups: dict[str, dict[tuple, list]] = {"dnat": {}, "snat": {}}
    for i, e in entries:
        w = f"remaps[{i}]"
        original, remapped = b.net(w, e, "original"), b.net(w, e, "remapped")
        translate = e.get("translate") or "both"
        if translate not in TRANSLATE_CHOICES:
            b.errors.append(f"{w}.translate: {translate!r} is not one of {', '.join(TRANSLATE_CHOICES)}")
            continue
        iif, oif = b.ifname(w, e, "iifname"), b.ifname(w, e, "oifname")
        ver = b.remap_version(w, e, "original", "remapped", original, remapped)
        if ver is None:
            continue
        if translate in ("both", "destination"):
            groups["dnat"].setdefault((iif, ver), []).append((remapped, original, f"{w}.remapped"))
        if translate in ("both", "source"):
            groups["snat"].setdefault((oif, ver), []).append((original, remapped, f"{w}.original"))
    # (nat, key matched, interface match, what the key is, chain)
    for kind, match, ifkey, what, chain in (("dnat", "daddr", "iifname", "remapped CIDR", CHAIN_PRE),
                                            ("snat", "saddr", "oifname", "original CIDR", CHAIN_POST)):
        for (ifname, ver), items in groups[kind].items():
            _check_overlaps(b.errors, [(k, where) for k, _v, where in items], what, b.keys.__getitem__)
            b.chains[chain].extend(_remap_rules(kind, match, ifkey, ifname, ver, items, b.keys.__getitem__))


def _check_mark(errors, where, value):
    if value is None or value == "":
        errors.append(f"{where}: is required")
        return None
    if isinstance(value, bool):
        errors.append(f"{where}: {value!r} is not an integer")
        return None
    if isinstance(value, int):
        mark = value
    else:
        try:
            mark = int(str(value).strip(), 0)
        except ValueError:
            errors.append(f"{where}: {value!r} is not an integer")
            return None
    if not MARK_MIN <= mark <= MARK_MAX:
        errors.append(f"{where}: {value!r} is outside {MARK_MIN}-{MARK_MAX:#x}")
        return None
    return mark


def _valid_tunnels(b: _Build, entries) -> list:
    """The valid `tunnels` as (interface, mark, remote_original, remote_remapped, output); interfaces and marks
    unique, remote_remapped CIDRs not overlapping."""
    tunnels = []
    by_mark: dict[int, str] = {}
    by_ifname: dict[str, str] = {}
    remapped_seen = []
    for i, e in entries:
        w = f"tunnels[{i}]"
        if e.get("interface") in (None, ""):
            b.errors.append(f"{w}.interface: is required")
            iface = None
        else:
            iface = b.ifname(w, e, "interface")
        mark = _check_mark(b.errors, f"{w}.mark", e.get("mark"))
        original, remapped = b.net(w, e, "remote_original"), b.net(w, e, "remote_remapped")
        output = e.get("output", True)
        if output is None:
            output = True
        if not isinstance(output, bool):
            b.errors.append(f"{w}.output: {output!r} is not a boolean")
        if iface is not None:
            if iface in by_ifname:
                b.errors.append(f"{w}.interface: {iface!r} is already the interface of {by_ifname[iface]}")
            else:
                by_ifname[iface] = w
        if mark is not None:
            if mark in by_mark:
                b.errors.append(f"{w}.mark: {mark} ({mark:#x}) is already the mark of {by_mark[mark]}")
            else:
                by_mark[mark] = w
        if b.remap_version(w, e, "remote_original", "remote_remapped", original, remapped) is None:
            continue
        remapped_seen.append((remapped, f"{w}.remote_remapped"))
        if iface is not None and mark is not None and isinstance(output, bool):
            tunnels.append((iface, mark, original, remapped, output))
    _check_overlaps(b.errors, remapped_seen, "remote_remapped CIDR", b.keys.__getitem__)
    return tunnels


def _add_tunnels(b: _Build, entries):
    """The tunnels' rules: marks in the mangle chains, the remap R <-> O in prerouting, postrouting and output.
    Tunnels are sorted by interface: with distinct interfaces and marks and non-overlapping remapped CIDRs they
    never match the same packet (unless a wildcard interface covers another tunnel's), so their input order does
    not matter and reordering the input causes no rewrite."""
    chains = b.chains
    for iface, mark, original, remapped, output in sorted(_valid_tunnels(b, entries)):
        chains[CHAIN_MANGLE_PRE] += [
            (("iifname_ne", iface), ("daddr", remapped), ("mark_set", "meta", mark)),
            (("iifname_ne", iface), ("ct_mark", mark), ("mark_set", "meta", mark)),
            (("iifname", iface), ("ct_state", "new"), ("mark_set", "ct", mark)),
        ]
        if output:
            # the host's replies to the tunnel's connections: reply direction only, so that an ICMP error the host
            # sends a local pod about its reply (a "fragmentation needed" when the tunnel's MTU shrank: original
            # direction) reaches the pod instead of following the connection into the tunnel
            chains[CHAIN_MANGLE_OUT] += [(("daddr", remapped), ("mark_set", "meta", mark)),
                                         (("ct_mark", mark), ("ct_direction", "reply"), ("mark_set", "meta", mark))]
        if original != remapped:
            chains[CHAIN_PRE].append((("iifname_ne", iface), ("daddr", remapped), ("nat", "dnat", "prefix", original)))
            chains[CHAIN_POST].append((("iifname", iface), ("saddr", original), ("nat", "snat", "prefix", remapped)))
            if output:
                chains[CHAIN_OUT].append((("daddr", remapped), ("nat", "dnat", "prefix", original)))


# The sections of the desired state, in the order they are checked and their rules added (so within a chain
# a single-address DNAT comes before the prefix remaps: the more specific first). A section with a chain
# gives one rule per entry (or None); one without gets all its entries and adds its rules itself.
SECTIONS = (
    ("dnat", CHAIN_PRE, _dnat_rule),
    ("snat", CHAIN_POST, _snat_rule),
    ("remaps", None, _add_remaps),
    ("tunnels", None, _add_tunnels),
    ("bypass", CHAIN_POST, _bypass_rule),
    ("mss", CHAIN_FWD, _mss_rule),
)
SPEC_KEYS = ("family", "name") + tuple(section for section, _chain, _build in SECTIONS)


def _check_target(errors, family, name) -> str:
    """Checks the table's family and name; returns the family to validate the rest with."""
    if family not in FAMILIES:
        errors.append(f"family: {family!r} is not one of {', '.join(FAMILIES)}")
        family = "inet"  # keep validating the rest
    if not _TABLE_NAME_RE.match(str(name)):
        errors.append(f"name: {name!r} is not a valid table name (a letter, then up to 62 letters, digits or _)")
    return family


def build_table(spec: dict) -> Table:
    """Validates the desired state and returns its canonical Table; raises NatTableError listing
    every problem (all found before anything is applied)."""
    errors: list[str] = []
    name = spec.get("name") or DEFAULT_TABLE_NAME
    b = _Build(spec, _check_target(errors, spec.get("family") or "ip", name), errors)
    for section, chain, build in SECTIONS:
        entries = _entries(spec, section, errors)
        if chain is None:
            build(b, entries)
            continue
        for i, e in entries:
            rule = build(b, f"{section}[{i}]", e)
            if rule:
                b.chains[chain].append(rule)
    errors.extend(f"{key}: unknown field" for key in spec if key not in SPEC_KEYS)
    if errors:
        raise NatTableError(errors)
    chains = tuple(Chain(chain_name, *CHAIN_SPECS[chain_name], "accept", tuple(rules))
                   for chain_name, rules in b.chains.items() if rules)
    return Table(b.family, str(name), chains)


def _remap_rules(kind, match, ifkey, ifname, ver, items, keyf) -> list:
    """One interval-map rule for a group of remaps, or one rule per remap below MAP_MIN_ENTRIES."""
    head = [(ifkey, ifname)] if ifname else []
    if len(items) >= MAP_MIN_ENTRIES:
        return [tuple(head + [("natmap", kind, match, ver, _sorted_pairs(((k, v) for k, v, _where in items), keyf))])]
    return [tuple(head + [(match, key), ("nat", kind, "prefix", value)]) for key, value, _where in items]


# ---------------------------------------------------------------- kernel JSON -> Table
def _json_net(value) -> str | None:
    if isinstance(value, str):
        return f"{value}/{128 if ':' in value else 32}"
    if isinstance(value, dict) and "prefix" in value:
        p = value["prefix"]
        if isinstance(p.get("addr"), str):
            return f"{p['addr']}/{int(p['len'])}"
    return None


def _is_payload(value, field_name):
    p = value.get("payload") if isinstance(value, dict) else None
    return isinstance(p, dict) and p.get("protocol") in ("ip", "ip6") and p.get("field") == field_name


def _term(expr):
    """One JSON statement -> canonical term, or None when it is not one we generate."""
    if "match" in expr:
        m = expr["match"]
        left, right, op = m.get("left"), m.get("right"), m.get("op")
        if isinstance(left, dict) and "meta" in left and left["meta"].get("key") in ("iifname", "oifname") \
                and op in ("==", "!=") and isinstance(right, str):
            return (left["meta"]["key"] + ("_ne" if op == "!=" else ""), right)
        if left == {"ct": {"key": "mark"}} and op == "==" and _is_int(right):
            return ("ct_mark", right)
        if left == {"ct": {"key": "state"}} and op in ("in", "==") and right in ("new", ["new"]):
            return ("ct_state", "new")
        if left == {"ct": {"key": "direction"}} and op == "==" and right in ("original", "reply"):
            return ("ct_direction", right)
        for fname in ("saddr", "daddr"):
            if _is_payload(left, fname) and op == "==":
                net = _json_net(right)
                if net:
                    return (fname, net)
        tcp_flags = {"payload": {"protocol": "tcp", "field": "flags"}}
        if left == tcp_flags and op == "in" and right == "syn":
            return ("tcp_syn",)
        if isinstance(left, dict) and left.get("&") == [tcp_flags, "syn"] and op == "==" and right == "syn":
            return ("tcp_syn",)
        return None
    for kind in ("snat", "dnat"):
        if kind in expr:
            st = expr[kind] or {}
            if set(st) - {"addr", "family", "flags", "type_flags"}:
                return None  # ports, persistent, random...: not ours
            addr = st.get("addr")
            is_prefix = "prefix" in _as_list(st.get("type_flags")) and "netmap" in _as_list(st.get("flags"))
            if not is_prefix and (st.get("flags") or st.get("type_flags")):
                return None
            if isinstance(addr, dict) and "map" in addr and is_prefix:
                mp = addr["map"]
                key = mp.get("key")
                match = "saddr" if _is_payload(key, "saddr") else "daddr" if _is_payload(key, "daddr") else None
                elems = (mp.get("data") or {}).get("set")
                if match is None or not isinstance(elems, list):
                    return None
                pairs = []
                for el in elems:
                    if not (isinstance(el, list) and len(el) == 2):
                        return None
                    k, v = _json_net(el[0]), _json_net(el[1])
                    if not (k and v):
                        return None
                    pairs.append((k, v))
                ver = 6 if key["payload"]["protocol"] == "ip6" else 4
                return ("natmap", kind, match, ver, _sorted_pairs(pairs))
            if is_prefix:
                net = _json_net(addr)
                return ("nat", kind, "prefix", net) if net else None
            if isinstance(addr, str):
                return ("nat", kind, "addr", addr)
            return None
    if "mangle" in expr:
        mg = expr["mangle"]
        if mg.get("key") == {"tcp option": {"name": "maxseg", "field": "size"}}:
            val = mg.get("value")
            if val == {"rt": {"key": "mtu"}}:
                return ("mss", "rt mtu")
            if _is_int(val):
                return ("mss", val)
        for where in ("meta", "ct"):
            if mg.get("key") == {where: {"key": "mark"}} and _is_int(mg.get("value")):
                return ("mark_set", where, mg["value"])
        return None
    for verdict in ("accept", "drop", "return", "continue"):
        if verdict in expr and expr[verdict] is None:
            return ("verdict", verdict)
    return None


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _as_list(v):
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _rule_terms(exprs) -> tuple:
    terms = []
    for expr in exprs or []:
        t = _term(expr) if isinstance(expr, dict) else None
        terms.append(t if t is not None else ("raw", json.dumps(expr, sort_keys=True)))
    return tuple(terms)


def parse_table(data: dict | None, family: str, name: str) -> Table | None:
    """The kernel's JSON listing of one table -> canonical Table (None when the table is absent).
    Objects and expressions this module never generates are kept as ("raw", json) so they differ."""
    if data is None:
        return None
    chains: dict[str, dict] = {}
    order: list[str] = []
    extras = []
    found = False
    for obj in data.get("nftables", []):
        if "metainfo" in obj:
            continue
        if "table" in obj:
            found = found or (obj["table"].get("family") == family and obj["table"].get("name") == name)
            continue
        if "chain" in obj:
            c = obj["chain"]
            chains[c["name"]] = {"type": c.get("type"), "hook": c.get("hook"), "priority": c.get("prio"),
                                 "policy": c.get("policy"), "rules": []}
            order.append(c["name"])
            continue
        if "rule" in obj:
            r = obj["rule"]
            chains.setdefault(r["chain"], {"type": None, "hook": None, "priority": None, "policy": None, "rules": []})
            if r["chain"] not in order:
                order.append(r["chain"])
            chains[r["chain"]]["rules"].append(_rule_terms(r.get("expr")))
            continue
        kind = next(iter(obj), "?")
        body = {k: v for k, v in (obj.get(kind) or {}).items() if k != "handle"} if isinstance(obj.get(kind), dict) else obj.get(kind)
        extras.append(json.dumps({kind: body}, sort_keys=True))
    if not found:
        return None
    ordered = sorted(order, key=lambda n: (CHAIN_ORDER.index(n) if n in CHAIN_ORDER else len(CHAIN_ORDER), order.index(n)))
    return Table(family, name,
                 tuple(Chain(n, chains[n]["type"], chains[n]["hook"], chains[n]["priority"], chains[n]["policy"],
                             tuple(chains[n]["rules"])) for n in ordered),
                 tuple(extras))


# ---------------------------------------------------------------- Table -> nft text
def _ip(ver):
    return "ip6" if ver == 6 else "ip"


def _fmt_match_net(net: str) -> str:
    addr, _sep, plen = net.partition("/")
    return addr if int(plen) == (128 if ":" in addr else 32) else net


def render_term(term, indent="\t\t") -> str:
    kind = term[0]
    if kind in ("iifname", "oifname"):
        return f'{kind} "{term[1]}"'
    if kind in ("iifname_ne", "oifname_ne"):
        return f'{kind[:-3]} != "{term[1]}"'
    if kind == "ct_mark":
        return f"ct mark {term[1]:#010x}"
    if kind == "ct_state":
        return f"ct state {term[1]}"
    if kind == "ct_direction":
        return f"ct direction {term[1]}"
    if kind == "mark_set":
        return f"{term[1]} mark set {term[2]:#010x}"
    if kind in ("saddr", "daddr"):
        return f"{_ip(_version(term[1]))} {kind} {_fmt_match_net(term[1])}"
    if kind == "tcp_syn":
        return "tcp flags syn"
    if kind == "nat":
        nat, how, target = term[1:]
        if how == "prefix":
            return f"{nat} {_ip(_version(target))} prefix to {target}"
        return f"{nat} {_ip(_version(target))} to {target}"
    if kind == "natmap":
        nat, match, ver, pairs = term[1:]
        inner = ",\n".join(f"{indent}\t{k} : {v}" for k, v in pairs)
        return f"{nat} {_ip(ver)} prefix to {_ip(ver)} {match} map {{\n{inner}\n{indent}}}"
    if kind == "mss":
        return f"tcp option maxseg size set {term[1]}"
    if kind == "verdict":
        return term[1]
    return f"# unparsed: {term[1]}"


def render_rule(rule, indent="\t\t") -> str:
    return " ".join(render_term(t, indent) for t in rule)


def _fmt_priority(prio, hook=None) -> str:
    if not isinstance(prio, int):
        return str(prio)
    for base, label in sorted(_PRIORITY_NAMES.items(), key=lambda kv: abs(prio - kv[0])):
        off = prio - base
        if label in _PRIORITY_HOOKS and hook not in _PRIORITY_HOOKS[label]:
            continue
        if abs(off) <= 20:
            return label if off == 0 else f"{label} {'+' if off > 0 else '-'} {abs(off)}"
    return str(prio)


def render(table: Table | None) -> str:
    """nft text of a table (what is applied, and what --diff shows); "" for an absent table."""
    if table is None:
        return ""
    lines = [f"table {table.family} {table.name} {{"]
    for i, c in enumerate(table.chains):
        if i:
            lines.append("")
        lines.append(f"\tchain {c.name} {{")
        if c.hook:
            lines.append(f"\t\ttype {c.type} hook {c.hook} priority {_fmt_priority(c.priority, c.hook)}; policy {c.policy};")
        lines.extend(f"\t\t{render_rule(r)}" for r in c.rules)
        lines.append("\t}")
    lines.extend(f"\t# unparsed object: {x}" for x in table.extras)
    lines.append("}")
    return "\n".join(lines) + "\n"


def replace_commands(table: Table) -> str:
    """One buffer = one transaction: creates the table if missing, deletes it with everything in it
    and recreates it with the desired content. Other tables are never named."""
    head = f"add table {table.family} {table.name}\ndelete table {table.family} {table.name}\n"
    return head + render(table)


def delete_commands(family: str, name: str) -> str:
    return f"delete table {family} {name}\n"


# ---------------------------------------------------------------- reconcile
def read_table(nft: Nft, family: str, name: str) -> Table | None:
    return parse_table(nft.list_table_json(family, name), family, name)


def _valid_target(family, name) -> bool:
    return family in FAMILIES and bool(_TABLE_NAME_RE.match(str(name)))


def ensure(spec: dict, state: str = "present", check_mode: bool = False, nft: Nft | None = None,
           backend: str = "auto") -> dict:
    """Makes the kernel's table match `spec` (or removes it for state=absent), in the current netns.

    Returns {"changed", "diff": {"before", "after"}, "backend", "table", "family", "rules",
    "commands" (the buffer applied, or that would be applied in check mode)}. Raises NatTableError
    on invalid input (before touching anything) and NftError when nft rejects the transaction
    (nothing is changed then: the buffer is one transaction)."""
    if state not in ("present", "absent"):
        raise NatTableError([f"state: {state!r} is not one of present, absent"])
    family, name = spec.get("family") or "ip", spec.get("name") or DEFAULT_TABLE_NAME
    own = nft is None
    nft = nft or Nft(backend)
    try:
        # The kernel listing (JSON of every map element) and the validation of a large input take
        # similar times: read in a thread meanwhile (libnftables runs without the GIL via ctypes).
        listing: dict = {}
        reader = None
        if _valid_target(family, name):
            def read():
                try:
                    listing["data"] = nft.list_table_json(family, name)
                except Exception as e:  # pylint: disable=broad-except
                    listing["error"] = e
            reader = threading.Thread(target=read, name="nat-table-read", daemon=True)
            reader.start()
        try:
            if state == "present":
                desired = build_table(spec)
            else:
                desired = None
                errors = []
                _check_target(errors, family, name)
                if errors:
                    raise NatTableError(errors)
        finally:
            if reader is not None:
                reader.join()
        if "error" in listing:
            raise listing["error"]
        current = parse_table(listing.get("data"), family, name)
        changed = current != desired
        commands = ""
        if changed:
            commands = replace_commands(desired) if desired is not None else delete_commands(family, name)
            if not check_mode:
                nft.run(commands)
        return {
            "changed": changed,
            "diff": {"before": render(current), "after": render(desired)},
            "backend": nft.backend,
            "table": name,
            "family": family,
            "rules": desired.rule_count if desired else 0,
            "commands": commands,
        }
    finally:
        if own:
            nft.close()
