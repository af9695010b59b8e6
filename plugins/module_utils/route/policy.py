# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Policy routing of the fabric: the exact routes of one routing table and the ip rules that use it.

The whole desired state is applied in one exchange over the rtnetlink socket of route/netlink.py: one dump of
what the kernel has, a diff, then every write in one batch. Data is keyed by address family so IPv6 uses the
same paths as IPv4.
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from ansible_collections.liqo.fabric.plugins.module_utils.route.netlink import (
    _RTMSG, _U32, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE, RTM_DELROUTE, RTM_DELRULE, RTM_GETROUTE, RTM_GETRULE,
    RTM_NEWROUTE, RTM_NEWRULE, RtnlSocket, _attr, _parse_attrs, _raise_failures, read_links)

DEFAULT_TABLE = 18952
# Tables the kernel owns: never manage their routes nor rules pointing at them.
RESERVED_TABLES = {0: "unspec", 253: "default", 254: "main", 255: "local"}
MAX_TABLE = 2 ** 32 - 1

FAMILIES = {4: socket.AF_INET, 6: socket.AF_INET6}
FAMILY_NAMES = {socket.AF_INET: "ipv4", socket.AF_INET6: "ipv6"}
# `ip` defaults: IPv4 routes have metric 0, IPv6 routes 1024.
DEFAULT_METRIC = {socket.AF_INET: 0, socket.AF_INET6: 1024}

SCOPES = {"universe": 0, "site": 200, "link": 253, "host": 254, "nowhere": 255}
SCOPE_NAMES = {v: k for k, v in SCOPES.items()}
ROUTE_TYPES = {"unicast": 1, "blackhole": 6, "unreachable": 7, "prohibit": 8, "throw": 9}
ROUTE_TYPE_NAMES = {v: k for k, v in ROUTE_TYPES.items()}

# route and rule attributes (linux/rtnetlink.h, linux/fib_rules.h)
(RTA_DST, RTA_SRC, RTA_IIF, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_PREFSRC, RTA_METRICS,
 RTA_MULTIPATH) = range(1, 10)
RTA_CACHEINFO, RTA_TABLE, RTA_PREF = 12, 15, 20
RTPROT_STATIC = 4
RTNH_F_ONLINK = 4
FRA_DST, FRA_SRC, FRA_IIFNAME = 1, 2, 3
FRA_PRIORITY, FRA_FWMARK, FRA_TABLE, FRA_FWMASK, FRA_OIFNAME, FRA_PROTOCOL = 6, 10, 15, 16, 17, 21
FR_ACT_TO_TBL = 1
# Route attributes every dump carries and that say nothing about what the route does.
_ROUTE_PASSIVE_ATTRS = {RTA_DST, RTA_OIF, RTA_GATEWAY, RTA_PRIORITY, RTA_PREFSRC, RTA_TABLE, RTA_CACHEINFO, RTA_PREF}
_RULE_PASSIVE_ATTRS = {FRA_DST, FRA_SRC, FRA_IIFNAME, FRA_PRIORITY, FRA_FWMARK, FRA_TABLE, FRA_FWMASK,
                       FRA_OIFNAME, FRA_PROTOCOL}
# Emitted by every dump, with all-ones meaning "not set" (suppress_ifgroup, suppress_prefixlength).
_RULE_UNSET_ATTRS = {13, 14}
FIB_RULE_DETACHED = 0x8 | 0x10  # iif/oif detached: the named interface does not exist (yet)


class ValidationError(ValueError):
    """Bad input, found before anything touched the kernel. str() names the field and the value."""


# --- desired/current state --------------------------------------------------------------------------

class Route(NamedTuple):
    family: int
    dst: str            # canonical "network/prefixlen"
    gateway: Optional[str]
    dev: Optional[str]
    src: Optional[str]  # preferred source address (RTA_PREFSRC)
    onlink: bool
    scope: int
    metric: int
    type: int
    tos: int = 0
    extra: str = ""     # kernel-side attributes we do not model (multipath, metrics, ...): never equal

    @property
    def key(self) -> Tuple[int, str, int, int]:
        return (self.family, self.dst, self.tos, self.metric)


class Rule(NamedTuple):
    family: int
    priority: int
    src: Optional[str]  # canonical CIDR or None (= all)
    dst: Optional[str]
    iif: Optional[str]
    oif: Optional[str]
    fwmark: Optional[int]
    fwmask: Optional[int]
    table: int
    extra: str = ""


def route_line(r: Route, table: Optional[int] = None) -> str:
    """One route as `ip route` prints it, e.g. `10.1.0.0/16 via 10.80.0.1 dev ov0 metric 0`."""
    parts = [] if r.type == ROUTE_TYPES["unicast"] else [ROUTE_TYPE_NAMES.get(r.type, str(r.type))]
    parts.append("default" if r.dst in ("0.0.0.0/0", "::/0") else r.dst)
    if r.gateway:
        parts += ["via", r.gateway]
    if r.dev:
        parts += ["dev", r.dev]
    if table is not None:
        parts += ["table", str(table)]
    if r.scope != default_scope(r.type, r.gateway, r.family):
        parts += ["scope", SCOPE_NAMES.get(r.scope, str(r.scope))]
    if r.src:
        parts += ["src", r.src]
    parts += ["metric", str(r.metric)]
    if r.onlink:
        parts.append("onlink")
    if r.tos:
        parts += ["tos", hex(r.tos)]
    if r.extra:
        parts.append(r.extra)
    return " ".join(parts)


def rule_line(r: Rule) -> str:
    """One rule as `ip rule` prints it, e.g. `100: from 10.0.0.0/8 fwmark 0x1/0xff lookup 18952`."""
    parts = [f"{r.priority}:", "from", r.src or "all"]
    if r.dst:
        parts += ["to", r.dst]
    if r.fwmark is not None:
        parts += ["fwmark", f"{r.fwmark:#x}" + ("" if r.fwmask == 0xFFFFFFFF else f"/{r.fwmask:#x}")]
    if r.iif:
        parts += ["iif", r.iif]
    if r.oif:
        parts += ["oif", r.oif]
    parts += ["lookup", str(r.table)]
    if r.family == socket.AF_INET6:
        parts.append("(ipv6)")
    if r.extra:
        parts.append(r.extra)
    return " ".join(parts)


def default_scope(rtype: int, gateway: Optional[str], family: int = socket.AF_INET) -> int:
    """The scope `ip route add` picks: link for a unicast route without gateway, else universe.
    IPv6 routes have no scope: the kernel reports universe for all of them."""
    if rtype == ROUTE_TYPES["unicast"] and not gateway and family == socket.AF_INET:
        return SCOPES["link"]
    return SCOPES["universe"]


# --- validation --------------------------------------------------------------------------------------

def _cidr(value, field: str, family: Optional[int] = None) -> Tuple[int, str, ipaddress._BaseNetwork]:
    if value == "default":
        value = "::/0" if family == socket.AF_INET6 else "0.0.0.0/0"
    try:
        net = ipaddress.ip_network(str(value), strict=True)
    except ValueError as e:
        reason = "has host bits set" if "host bits" in str(e) else "is not a valid CIDR"
        raise ValidationError(f"{field}: {value!r} {reason}") from None
    fam = FAMILIES[net.version]
    if family is not None and fam != family:
        raise ValidationError(f"{field}: {value!r} is not an {FAMILY_NAMES[family]} network")
    return fam, f"{socket.inet_ntop(fam, net.network_address.packed)}/{net.prefixlen}", net


def _address(value, field: str, family: int) -> str:
    try:
        addr = ipaddress.ip_address(str(value))
    except ValueError:
        raise ValidationError(f"{field}: {value!r} is not a valid IP address") from None
    if FAMILIES[addr.version] != family:
        raise ValidationError(f"{field}: {value!r} is not an {FAMILY_NAMES[family]} address like the route's dst")
    return socket.inet_ntop(family, addr.packed)


def _ifname(value, field: str) -> str:
    name = str(value)
    if not 0 < len(name) < 16 or "/" in name or any(c.isspace() for c in name) or name in (".", ".."):
        raise ValidationError(f"{field}: {value!r} is not a valid interface name")
    return name


def validate_table(table, field: str = "table") -> int:
    try:
        tid = int(table)
    except (TypeError, ValueError):
        raise ValidationError(f"{field}: {table!r} is not an integer") from None
    if tid in RESERVED_TABLES:
        raise ValidationError(f"{field}: {tid} is the kernel's '{RESERVED_TABLES[tid]}' table, not one the fabric may own")
    if not 0 < tid <= MAX_TABLE:
        raise ValidationError(f"{field}: {tid} is out of range (1..{MAX_TABLE})")
    return tid


def _int(value, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool):
        raise ValidationError(f"{field}: {value!r} is not an integer")
    try:
        n = int(value, 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{field}: {value!r} is not an integer") from None
    if not lo <= n <= hi:
        raise ValidationError(f"{field}: {n} is out of range ({lo}..{hi})")
    return n


_ROUTE_KEYS = {"dst", "via", "gateway", "dev", "src", "onlink", "scope", "metric", "type"}


def normalize_routes(specs: Iterable[dict], field: str = "routes") -> Dict[int, Dict[tuple, Route]]:
    """Validates route dicts (`dst`, `via`|`gateway`, `dev`, `src`, `onlink`, `scope`, `metric`, `type`)
    into {family: {key: Route}}. Raises ValidationError naming `routes[i].field`."""
    out: Dict[int, Dict[tuple, Route]] = {f: {} for f in FAMILIES.values()}
    for i, spec in enumerate(specs or []):
        where = f"{field}[{i}]"
        if not isinstance(spec, dict):
            raise ValidationError(f"{where}: {spec!r} is not a dict")
        unknown = set(spec) - _ROUTE_KEYS
        if unknown:
            raise ValidationError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if spec.get("dst") in (None, ""):
            raise ValidationError(f"{where}.dst: is required")
        via = spec.get("via") if spec.get("via") is not None else spec.get("gateway")
        fam_hint = None
        if spec["dst"] == "default" and via is not None and ":" in str(via):
            fam_hint = socket.AF_INET6
        fam, dst, _net = _cidr(spec["dst"], f"{where}.dst", fam_hint)
        rtype_name = spec.get("type") or "unicast"
        if rtype_name not in ROUTE_TYPES:
            raise ValidationError(f"{where}.type: {rtype_name!r} is not one of {', '.join(ROUTE_TYPES)}")
        rtype = ROUTE_TYPES[rtype_name]
        gateway = _address(via, f"{where}.via", fam) if via not in (None, "") else None
        dev = _ifname(spec["dev"], f"{where}.dev") if spec.get("dev") not in (None, "") else None
        src = _address(spec["src"], f"{where}.src", fam) if spec.get("src") not in (None, "") else None
        onlink = bool(spec.get("onlink"))
        if rtype != ROUTE_TYPES["unicast"] and (gateway or dev or onlink):
            raise ValidationError(f"{where}.type: a {rtype_name} route takes no via, dev or onlink")
        if rtype == ROUTE_TYPES["unicast"] and not gateway and not dev:
            raise ValidationError(f"{where}: a unicast route needs via or dev")
        if onlink and not (gateway and dev):
            raise ValidationError(f"{where}.onlink: needs both via and dev")
        scope_v = spec.get("scope")
        if scope_v in (None, "") or fam == socket.AF_INET6:
            scope = default_scope(rtype, gateway, fam)
        elif scope_v in SCOPES:
            scope = SCOPES[scope_v]
        else:
            raise ValidationError(f"{where}.scope: {scope_v!r} is not one of {', '.join(SCOPES)}")
        metric_v = spec.get("metric")
        metric = DEFAULT_METRIC[fam] if metric_v in (None, "") else _int(metric_v, f"{where}.metric", 0, MAX_TABLE)
        if fam == socket.AF_INET6 and metric == 0:
            metric = DEFAULT_METRIC[fam]  # the kernel stores IPv6 metric 0 as 1024
        route = Route(fam, dst, gateway, dev, src, onlink, scope, metric, rtype)
        if route.key in out[fam]:
            raise ValidationError(f"{where}.dst: {spec['dst']!r} with metric {metric} is listed twice")
        out[fam][route.key] = route
    return out


_RULE_KEYS = {"priority", "from", "src", "to", "dst", "iif", "oif", "fwmark", "fwmask", "table", "family"}


def _parse_fwmark(value, field: str) -> Tuple[int, Optional[int]]:
    if isinstance(value, str) and "/" in value:
        mark, mask = value.split("/", 1)
        return _int(mark, field, 0, MAX_TABLE), _int(mask, field, 0, MAX_TABLE)
    return _int(value, field, 0, MAX_TABLE), None


def normalize_rules(specs: Iterable[dict], tables: Iterable[int], field: str = "rules") -> Dict[int, Dict[Rule, Rule]]:
    """Validates rule dicts (`priority`, `from`, `to`, `iif`, `oif`, `fwmark` [`/mask`], `fwmask`, `table`,
    `family`) into {family: {rule: rule}}. `table` defaults to the first owned table and must be owned."""
    owned = [validate_table(t, "tables") for t in tables]
    if not owned:
        raise ValidationError("tables: at least one owned table is required")
    out: Dict[int, Dict[Rule, Rule]] = {f: {} for f in FAMILIES.values()}
    for i, spec in enumerate(specs or []):
        where = f"{field}[{i}]"
        if not isinstance(spec, dict):
            raise ValidationError(f"{where}: {spec!r} is not a dict")
        unknown = set(spec) - _RULE_KEYS
        if unknown:
            raise ValidationError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if spec.get("priority") in (None, ""):
            raise ValidationError(f"{where}.priority: is required (the kernel would pick one and idempotence breaks)")
        prio = _int(spec["priority"], f"{where}.priority", 1, 32765)
        fam = None
        if spec.get("family") not in (None, ""):
            names = {v: k for k, v in FAMILY_NAMES.items()}
            if spec["family"] not in names:
                raise ValidationError(f"{where}.family: {spec['family']!r} is not one of ipv4, ipv6")
            fam = names[spec["family"]]
        nets = {}
        for name, aliases in (("from", ("from", "src")), ("to", ("to", "dst"))):
            val = next((spec[a] for a in aliases if spec.get(a) not in (None, "")), None)
            if val is None or val == "all":
                nets[name] = None
                continue
            f2, cidr, net = _cidr(val, f"{where}.{name}", fam)
            fam = fam or f2
            nets[name] = None if net.prefixlen == 0 else cidr
        fam = fam or socket.AF_INET
        iif = _ifname(spec["iif"], f"{where}.iif") if spec.get("iif") not in (None, "") else None
        oif = _ifname(spec["oif"], f"{where}.oif") if spec.get("oif") not in (None, "") else None
        fwmark = fwmask = None
        if spec.get("fwmark") not in (None, ""):
            fwmark, fwmask = _parse_fwmark(spec["fwmark"], f"{where}.fwmark")
        if spec.get("fwmask") not in (None, ""):
            if fwmark is None:
                raise ValidationError(f"{where}.fwmask: needs fwmark")
            fwmask = _int(spec["fwmask"], f"{where}.fwmask", 0, MAX_TABLE)
        if fwmark is not None and fwmask is None:
            fwmask = 0xFFFFFFFF
        table = owned[0] if spec.get("table") in (None, "") else validate_table(spec["table"], f"{where}.table")
        if table not in owned:
            raise ValidationError(f"{where}.table: {table} is not one of the owned tables {owned}")
        rule = Rule(fam, prio, nets["from"], nets["to"], iif, oif, fwmark, fwmask, table)
        if rule in out[fam]:
            raise ValidationError(f"{where}: the same rule is listed twice ({rule_line(rule)})")
        out[fam][rule] = rule
    return out


# --- diff --------------------------------------------------------------------------------------------

class RoutePlan(NamedTuple):
    add: List[Route]
    replace: List[Tuple[Route, Route]]   # (current, desired)
    delete: List[Route]

    @property
    def changed(self) -> bool:
        return bool(self.add or self.replace or self.delete)


def plan_routes(desired: Dict[int, Dict[tuple, Route]], current: Dict[int, Dict[tuple, Route]]) -> RoutePlan:
    """What to write so that the table holds exactly `desired` (both keyed by family, then route key)."""
    add, replace, delete = [], [], []
    for fam in set(desired) | set(current):
        want = desired.get(fam, {})
        have = current.get(fam, {})
        for key, route in want.items():
            old = have.get(key)
            if old is None:
                add.append(route)
            elif old != route and not (route.dev is None and old._replace(dev=None) == route):
                # (a route given by gateway only gets its device from the kernel: any device is fine)
                replace.append((old, route))
        delete.extend(r for k, r in have.items() if k not in want)
    return RoutePlan(add, replace, delete)


class RulePlan(NamedTuple):
    add: List[Rule]
    delete: List[Rule]

    @property
    def changed(self) -> bool:
        return bool(self.add or self.delete)


def plan_rules(desired: Dict[int, Dict[Rule, Rule]], current: Dict[int, Dict[Rule, Rule]]) -> RulePlan:
    add, delete = [], []
    for fam in set(desired) | set(current):
        want = desired.get(fam, {})
        have = current.get(fam, {})
        add.extend(r for r in want if r not in have)
        delete.extend(r for r in have if r not in want)
    add.sort(key=lambda r: (r.family, r.priority))
    delete.sort(key=lambda r: (r.family, r.priority))
    return RulePlan(add, delete)


# --- reading the kernel ----------------------------------------------------------------------------

def read_routes(sock: RtnlSocket, table: int, links: Dict[int, str]) -> Dict[int, Dict[tuple, Route]]:
    """The routes of `table`, {family: {key: Route}}, in one dump (both families)."""
    out: Dict[int, Dict[tuple, Route]] = {f: {} for f in FAMILIES.values()}
    body = _RTMSG.pack(socket.AF_UNSPEC, 0, 0, 0, table if table < 256 else 0, 0, 0, 0, 0)
    ntop = socket.inet_ntop
    u32 = _U32.unpack
    for p in sock.dump(RTM_GETROUTE, body, _attr(RTA_TABLE, _U32.pack(table))):
        fam, dst_len, src_len, tos, tab8, _proto, scope, rtype, flags = _RTMSG.unpack_from(p, 0)
        a = _parse_attrs(p, 12, len(p))
        tab = u32(a[RTA_TABLE])[0] if RTA_TABLE in a else tab8
        if tab != table or fam not in out or flags & 0x200:  # RTM_F_CLONED: cache entries
            continue
        extra = sorted(t for t in a if t not in _ROUTE_PASSIVE_ATTRS)
        if src_len:
            extra.append(RTA_SRC)
        dst = ntop(fam, a[RTA_DST]) if RTA_DST in a else ("0.0.0.0" if fam == socket.AF_INET else "::")
        oif = u32(a[RTA_OIF])[0] if RTA_OIF in a else None
        route = Route(
            fam, f"{dst}/{dst_len}",
            ntop(fam, a[RTA_GATEWAY]) if RTA_GATEWAY in a else None,
            links.get(oif, f"if{oif}") if oif else None,
            ntop(fam, a[RTA_PREFSRC]) if RTA_PREFSRC in a else None,
            bool(flags & RTNH_F_ONLINK), scope,
            u32(a[RTA_PRIORITY])[0] if RTA_PRIORITY in a else 0,
            rtype, tos, ",".join(f"attr{t}" for t in extra))
        out[fam][route.key] = route
    return out


def read_rules(sock: RtnlSocket, tables: Iterable[int]) -> Dict[int, Dict[Rule, bytes]]:
    """Rules whose table is one of `tables` (the ones we own), {family: {Rule: raw payload}}."""
    owned = set(tables)
    out: Dict[int, Dict[Rule, bytes]] = {f: {} for f in FAMILIES.values()}
    ntop = socket.inet_ntop
    u32 = _U32.unpack
    for fam in FAMILIES.values():
        for p in sock.dump(RTM_GETRULE, _RTMSG.pack(fam, 0, 0, 0, 0, 0, 0, 0, 0)):
            rfam, dst_len, src_len, tos, tab8, _r1, _r2, action, flags = _RTMSG.unpack_from(p, 0)
            a = _parse_attrs(p, 12, len(p))
            tab = u32(a[FRA_TABLE])[0] if FRA_TABLE in a else tab8
            if tab not in owned or rfam != fam or tab in RESERVED_TABLES:
                continue
            extra = [f"attr{t}" for t in sorted(a) if t not in _RULE_PASSIVE_ATTRS
                     and not (t in _RULE_UNSET_ATTRS and bytes(a[t]) == b"\xff\xff\xff\xff")]
            if tos:
                extra.append(f"tos {tos:#x}")
            if action != FR_ACT_TO_TBL:
                extra.append(f"action {action}")
            if flags & ~FIB_RULE_DETACHED:
                extra.append(f"flags {flags & ~FIB_RULE_DETACHED:#x}")
            mark = u32(a[FRA_FWMARK])[0] if FRA_FWMARK in a else None
            mask = u32(a[FRA_FWMASK])[0] if FRA_FWMASK in a else None
            if mark is None and mask is not None:
                mark = 0
            if mark is not None and mask is None:
                mask = 0xFFFFFFFF
            rule = Rule(
                fam, u32(a[FRA_PRIORITY])[0] if FRA_PRIORITY in a else 0,
                f"{ntop(fam, a[FRA_SRC])}/{src_len}" if FRA_SRC in a and src_len else None,
                f"{ntop(fam, a[FRA_DST])}/{dst_len}" if FRA_DST in a and dst_len else None,
                bytes(a[FRA_IIFNAME]).rstrip(b"\0").decode() if FRA_IIFNAME in a else None,
                bytes(a[FRA_OIFNAME]).rstrip(b"\0").decode() if FRA_OIFNAME in a else None,
                mark, mask, tab, " ".join(extra))
            out[fam][rule] = p
    return out


# --- writing -------------------------------------------------------------------------------------------

def _route_msg(r: Route, table: int, ifindex: Dict[str, int], delete: bool = False) -> bytes:
    fam = r.family
    dst, plen = r.dst.rsplit("/", 1)
    plen = int(plen)
    pton = socket.inet_pton
    if delete:
        body = _RTMSG.pack(fam, plen, 0, r.tos, table if table < 256 else 0, 0, SCOPES["nowhere"], 0, 0)
    else:
        body = _RTMSG.pack(fam, plen, 0, 0, table if table < 256 else 0, RTPROT_STATIC, r.scope, r.type,
                           RTNH_F_ONLINK if r.onlink else 0)
    parts = [body, _attr(RTA_TABLE, _U32.pack(table))]
    if plen:
        parts.append(_attr(RTA_DST, pton(fam, dst)))
    if r.metric:
        parts.append(_attr(RTA_PRIORITY, _U32.pack(r.metric)))
    if not delete or fam == socket.AF_INET6:
        if r.gateway:
            parts.append(_attr(RTA_GATEWAY, pton(fam, r.gateway)))
        if r.dev and r.dev in ifindex:
            parts.append(_attr(RTA_OIF, _U32.pack(ifindex[r.dev])))
    if not delete and r.src:
        parts.append(_attr(RTA_PREFSRC, pton(fam, r.src)))
    return b"".join(parts)


def _rule_msg(r: Rule) -> bytes:
    fam = r.family
    src_len = int(r.src.rsplit("/", 1)[1]) if r.src else 0
    dst_len = int(r.dst.rsplit("/", 1)[1]) if r.dst else 0
    parts = [_RTMSG.pack(fam, dst_len, src_len, 0, r.table if r.table < 256 else 0, 0, 0, FR_ACT_TO_TBL, 0),
             _attr(FRA_PRIORITY, _U32.pack(r.priority)), _attr(FRA_TABLE, _U32.pack(r.table))]
    if r.src:
        parts.append(_attr(FRA_SRC, socket.inet_pton(fam, r.src.rsplit("/", 1)[0])))
    if r.dst:
        parts.append(_attr(FRA_DST, socket.inet_pton(fam, r.dst.rsplit("/", 1)[0])))
    if r.iif:
        parts.append(_attr(FRA_IIFNAME, r.iif.encode() + b"\0"))
    if r.oif:
        parts.append(_attr(FRA_OIFNAME, r.oif.encode() + b"\0"))
    if r.fwmark is not None:
        parts.append(_attr(FRA_FWMARK, _U32.pack(r.fwmark)))
        parts.append(_attr(FRA_FWMASK, _U32.pack(r.fwmask if r.fwmask is not None else 0xFFFFFFFF)))
    parts.append(_attr(FRA_PROTOCOL, bytes([RTPROT_STATIC])))
    return b"".join(parts)


def _sorted_lines(routes: Dict[int, Dict[tuple, Route]]) -> List[str]:
    rs = [r for fam in sorted(routes) for r in routes[fam].values()]
    rs.sort(key=lambda r: (r.family, r.metric, r.dst))
    return [route_line(r) for r in rs]


def sync_route_table(routes: Iterable[dict], table: int = DEFAULT_TABLE, state: str = "present",
                     check: bool = False, netns: Optional[str] = None, want_lines: bool = True,
                     pending_devs: Iterable[str] = ()) -> dict:
    """Makes `table` hold exactly `routes` (state present) or nothing (state absent).

    `pending_devs`: devices that do not exist yet but will (a check-mode run planning the links the
    routes go through); routes through them are planned as additions instead of refused.

    Returns changed, added/replaced/removed (route lines), writes (netlink write messages sent),
    before/after (route lines, sorted) when `want_lines`. Raises ValidationError before touching the
    kernel, NetlinkError if the kernel refuses a write (message names each refused route)."""
    table = validate_table(table)
    desired = normalize_routes(routes if state == "present" else [])
    pending_devs = set(pending_devs) if check else set()
    with RtnlSocket(netns) as sock:
        links = read_links(sock)
        ifindex = {name: idx for idx, name in links.items()}
        for i, spec in enumerate(routes if state == "present" else []):
            if spec.get("dev") not in (None, "") and spec["dev"] not in ifindex and spec["dev"] not in pending_devs:
                raise ValidationError(f"routes[{i}].dev: {spec['dev']!r} is not a device of this host")
        current = read_routes(sock, table, links)
        plan = plan_routes(desired, current)
        result = {
            "changed": plan.changed, "table": table,
            "added": [route_line(r) for r in plan.add],
            "replaced": [route_line(new) for _old, new in plan.replace],
            "removed": [route_line(r) for r in plan.delete],
            "writes": 0,
        }
        if want_lines:
            result["before"] = _sorted_lines(current)
            result["after"] = _sorted_lines(desired)
        if check or not plan.changed:
            return result
        # Keys never collide between the three lists; removals go last so a refused write leaves the
        # old routes in place rather than a hole.
        msgs = [(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, _route_msg(new, table, ifindex)) for _o, new in plan.replace]
        msgs += [(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, _route_msg(r, table, ifindex)) for r in plan.add]
        msgs += [(RTM_DELROUTE, 0, _route_msg(r, table, ifindex, delete=True)) for r in plan.delete]
        failures = sock.apply(msgs)
        result["writes"] = len(msgs)
        if failures:
            ops = ([("replace", n) for _o, n in plan.replace] + [("add", r) for r in plan.add]
                   + [("remove", r) for r in plan.delete])
            _raise_failures(failures, lambda i: f"{ops[i][0]} {route_line(ops[i][1], table)}")
    return result


def sync_rules(rules: Iterable[dict], tables: Iterable[int] = (DEFAULT_TABLE,), state: str = "present",
               check: bool = False, netns: Optional[str] = None) -> dict:
    """Makes the rules pointing at the owned `tables` exactly `rules`; rules for other tables (main,
    local, default, anyone else's) are never touched. Returns changed, added, removed, before, after."""
    tables = [validate_table(t, "tables") for t in tables]
    desired = normalize_rules(rules if state == "present" else [], tables)
    with RtnlSocket(netns) as sock:
        current_raw = read_rules(sock, tables)
        current = {fam: {r: r for r in rs} for fam, rs in current_raw.items()}
        plan = plan_rules(desired, current)

        def lines(state_):
            rs = sorted((r for fam in state_.values() for r in fam), key=lambda r: (r.family, r.priority, rule_line(r)))
            return [rule_line(r) for r in rs]
        result = {"changed": plan.changed, "tables": tables,
                  "added": [rule_line(r) for r in plan.add], "removed": [rule_line(r) for r in plan.delete],
                  "before": lines(current), "after": lines(desired), "writes": 0}
        if check or not plan.changed:
            return result
        # Delete by echoing the dumped rule: the kernel matches every attribute, so exactly that rule goes.
        msgs = [(RTM_DELRULE, 0, current_raw[r.family][r]) for r in plan.delete]
        msgs += [(RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL, _rule_msg(r)) for r in plan.add]
        failures = sock.apply(msgs)
        result["writes"] = len(msgs)
        if failures:
            ops = [("remove", r) for r in plan.delete] + [("add", r) for r in plan.add]
            _raise_failures(failures, lambda i: f"{ops[i][0]} rule {rule_line(ops[i][1])}")
    return result
