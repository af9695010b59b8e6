# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Overlay link between a node and its gateway: Geneve where the kernel has it, else VXLAN in unicast
mode with static flooding entries (`00:00:00:00:00:00 dst <remote>` in the FDB, learning off).

Pure Python: `normalize` validates, `read_link` reads what the kernel has, `plan` diffs the two into
actions, `apply` performs them. Attributes the kernel cannot change in place (kind, VNI, port, local
address, underlay device, Geneve remote) make the link be recreated; MTU, addresses, FDB entries and
the up state are changed in place.
"""
from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import traceback
from typing import Dict, List, NamedTuple, Optional, Tuple

# pyroute2 for links and FDB entries: a few messages with nested attributes; route tables take route/'s own stack (route/__init__.py)
try:
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError
    PYROUTE2_IMPORT_ERROR = None
except ImportError:
    IPRoute = None
    NetlinkError = OSError
    PYROUTE2_IMPORT_ERROR = traceback.format_exc()

TYPES = ("geneve", "vxlan", "auto")
DEFAULT_PORT = {"geneve": 6081, "vxlan": 4789}
MAX_VNI = 2 ** 24 - 1
ZERO_MAC = "00:00:00:00:00:00"
IFF_UP = 0x1
EOPNOTSUPP = 95
# Attributes fixed at creation (or not worth a partial update): a difference means delete + add.
IMMUTABLE = ("kind", "vni", "dst_port", "local", "dev", "remote", "learning")


class ValidationError(ValueError):
    """Bad input found before any change. str() names the field and the value."""


class OverlayError(RuntimeError):
    pass


class Desired(NamedTuple):
    name: str
    type: str                 # geneve | vxlan | auto (resolved before planning)
    vni: int
    remotes: Tuple[str, ...]  # geneve: exactly one; vxlan: the FDB flooding entries (exact set)
    local: Optional[str]
    dst_port: Optional[int]   # None = the type's default
    mtu: Optional[int]        # None = leave the kernel's
    addresses: Tuple[str, ...]
    dev: Optional[str]


def _ifname(value, field: str) -> str:
    name = str(value)
    if not 0 < len(name) < 16 or "/" in name or any(c.isspace() for c in name) or name in (".", ".."):
        raise ValidationError(f"{field}: {value!r} is not a valid interface name (1-15 characters, no '/' or spaces)")
    return name


def _ip(value, field: str) -> str:
    try:
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        raise ValidationError(f"{field}: {value!r} is not a valid IP address") from None


def normalize(params: dict) -> Desired:
    """Validates module-style parameters into a Desired (type may still be `auto`)."""
    name = _ifname(params.get("name") or "", "name")
    otype = params.get("type") or "auto"
    if otype not in TYPES:
        raise ValidationError(f"type: {otype!r} is not one of {', '.join(TYPES)}")
    vni = params.get("vni")
    if isinstance(vni, bool) or not isinstance(vni, int) or not 0 < vni <= MAX_VNI:
        raise ValidationError(f"vni: {vni!r} is out of range (1..{MAX_VNI})")
    remotes = tuple(_ip(r, f"remotes[{i}]") for i, r in enumerate(params.get("remotes") or []))
    if len(set(remotes)) != len(remotes):
        raise ValidationError(f"remotes: {list(remotes)!r} lists an address twice")
    local = _ip(params["local"], "local") if params.get("local") else None
    families = {ipaddress.ip_address(a).version for a in remotes + ((local,) if local else ())}
    if len(families) > 1:
        raise ValidationError("remotes/local: mixes IPv4 and IPv6 underlay addresses")
    port = params.get("dst_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise ValidationError(f"dst_port: {port!r} is out of range (1..65535)")
    mtu = params.get("mtu")
    if mtu is not None and (isinstance(mtu, bool) or not isinstance(mtu, int) or not 68 <= mtu <= 65535):
        raise ValidationError(f"mtu: {mtu!r} is out of range (68..65535)")
    addresses = []
    for i, a in enumerate(params.get("addresses") or []):
        try:
            iface = ipaddress.ip_interface(str(a))
        except ValueError:
            raise ValidationError(f"addresses[{i}]: {a!r} is not a valid address/prefix") from None
        if "/" not in str(a):
            raise ValidationError(f"addresses[{i}]: {a!r} needs a prefix length (e.g. 10.80.0.1/24)")
        addresses.append(f"{iface.ip}/{iface.network.prefixlen}")
    if len(set(addresses)) != len(addresses):
        raise ValidationError(f"addresses: {addresses!r} lists an address twice")
    dev = _ifname(params["dev"], "dev") if params.get("dev") else None
    want = Desired(name, otype, vni, remotes, local, port, mtu, tuple(sorted(addresses)), dev)
    if otype == "geneve":
        check_geneve(want)
    return want


def check_geneve(want: Desired) -> None:
    if len(want.remotes) != 1:
        raise ValidationError(f"remotes: a geneve link has exactly one remote, got {list(want.remotes)!r}")


# --- kernel -------------------------------------------------------------------------------------------

def geneve_supported(ipr) -> bool:
    """True when the kernel can make geneve links: the module is loaded/built in, or a scratch link can
    be created (which also autoloads a loadable module). The scratch link is deleted at once."""
    if os.path.isdir("/sys/module/geneve"):
        return True
    name = "lfgp" + secrets.token_hex(4)
    try:
        ipr.link("add", ifname=name, kind="geneve", geneve_id=1, geneve_remote="127.0.0.1")
    except NetlinkError as e:
        if getattr(e, "code", None) == EOPNOTSUPP:
            return False
        raise
    ipr.link("del", index=ipr.link_lookup(ifname=name)[0])
    return True


def resolve_type(want: Desired, ipr, supported: Optional[bool] = None) -> Tuple[Desired, bool]:
    """(Desired with type geneve|vxlan and dst_port filled in, geneve supported?). `supported`: a
    previous answer of geneve_supported() for the same namespace (saves the probe)."""
    if supported is None:
        supported = geneve_supported(ipr)
    otype = want.type
    if otype == "auto":
        otype = "geneve" if supported else "vxlan"
    if otype == "geneve":
        if supported is False:
            raise OverlayError("type: 'geneve' requested but the kernel has no geneve support (use type auto or vxlan)")
        check_geneve(want)
    port = want.dst_port or DEFAULT_PORT[otype]
    return want._replace(type=otype, dst_port=port), supported


def _linkinfo(msg):
    info = msg.get_attr("IFLA_LINKINFO")
    if info is None:
        return None, {}
    kind = info.get_attr("IFLA_INFO_KIND")
    data = info.get_attr("IFLA_INFO_DATA")
    attrs = dict(data["attrs"]) if data is not None else {}
    return kind, attrs


class LinkSnapshot:
    """One dump each of the links, the fdb and the addresses of a namespace, for reading many links: read_link
    alone dumps the links twice, the fdb and the addresses once per link (a gateway host with a link to each of
    100 nodes read them ~400 times: seconds of netlink parsing per run)."""

    def __init__(self, ipr):
        self.msgs = {m.get_attr("IFLA_IFNAME"): m for m in ipr.get_links()}
        self.names = {m["index"]: name for name, m in self.msgs.items()}
        self._ipr = ipr
        self._fdb: Optional[Dict[int, list]] = None
        self._addrs: Optional[Dict[int, list]] = None

    def fdb(self, index: int) -> list:
        if self._fdb is None:
            self._fdb = {}
            for m in self._ipr.fdb("dump"):
                self._fdb.setdefault(m["ifindex"], []).append(m)
        return self._fdb.get(index, [])

    def addrs(self, index: int) -> list:
        if self._addrs is None:
            self._addrs = {}
            for m in self._ipr.get_addr():
                self._addrs.setdefault(m["index"], []).append(m)
        return self._addrs.get(index, [])


def read_link(ipr, name: str, links: Optional[Dict[int, str]] = None,
              snapshot: Optional[LinkSnapshot] = None) -> Optional[dict]:
    """The overlay link `name` as a dict in the shape `desired_state` produces, or None. `snapshot`: read it
    from that (taken before anything changed the link) instead of asking the kernel."""
    if snapshot is not None:
        msg = snapshot.msgs.get(name)
        if msg is None:
            return None
        index = msg["index"]
        links = snapshot.names
    else:
        found = ipr.link_lookup(ifname=name)
        if not found:
            return None
        index = found[0]
        msg = ipr.link("get", index=index)[0]
    kind, a = _linkinfo(msg)
    if links is None:
        links = {m["index"]: m.get_attr("IFLA_IFNAME") for m in ipr.get_links()}
    state = {"index": index, "kind": kind, "mtu": msg.get_attr("IFLA_MTU"), "up": bool(msg["flags"] & IFF_UP)}
    if kind == "vxlan":
        link = a.get("IFLA_VXLAN_LINK")
        state.update(vni=a.get("IFLA_VXLAN_ID"), dst_port=a.get("IFLA_VXLAN_PORT"),
                     local=a.get("IFLA_VXLAN_LOCAL") or a.get("IFLA_VXLAN_LOCAL6"),
                     dev=links.get(link) if link else None, remote=None,
                     learning=bool(a.get("IFLA_VXLAN_LEARNING")))
        fdb = []
        for m in (snapshot.fdb(index) if snapshot is not None else ipr.fdb("dump")):
            if m["ifindex"] == index and m.get_attr("NDA_LLADDR") == ZERO_MAC and m.get_attr("NDA_DST"):
                fdb.append(str(ipaddress.ip_address(m.get_attr("NDA_DST"))))
        state["fdb"] = sorted(fdb)
    elif kind == "geneve":
        state.update(vni=a.get("IFLA_GENEVE_ID"), dst_port=a.get("IFLA_GENEVE_PORT"), local=None, dev=None,
                     remote=a.get("IFLA_GENEVE_REMOTE") or a.get("IFLA_GENEVE_REMOTE6"), learning=False, fdb=[])
    else:
        state.update(vni=None, dst_port=None, local=None, dev=None, remote=None, learning=None, fdb=[])
    for k in ("local", "remote"):
        if state.get(k):
            state[k] = str(ipaddress.ip_address(state[k]))
    addrs = []
    for m in (snapshot.addrs(index) if snapshot is not None else ipr.get_addr(index=index)):
        addr = m.get_attr("IFA_ADDRESS")
        if m["family"] == socket.AF_INET6 and ipaddress.ip_address(addr).is_link_local:
            continue  # the kernel's own fe80:: address is not ours to manage
        addrs.append(f"{ipaddress.ip_address(addr)}/{m['prefixlen']}")
    state["addresses"] = sorted(addrs)
    return state


def desired_state(want: Desired) -> dict:
    """`want` (type resolved) in the shape of read_link()."""
    vx = want.type == "vxlan"
    return {
        "kind": want.type, "vni": want.vni, "dst_port": want.dst_port,
        "local": want.local if vx else None, "dev": want.dev if vx else None,
        "remote": None if vx else want.remotes[0], "learning": False,
        "mtu": want.mtu, "up": True, "addresses": sorted(want.addresses),
        "fdb": sorted(want.remotes) if vx else [],
    }


def plan(want: Desired, current: Optional[dict], state: str = "present") -> List[tuple]:
    """Actions, in order: ("delete",), ("create",), ("mtu", n), ("addr_add"|"addr_del", cidr),
    ("fdb_add"|"fdb_del", ip), ("up",)."""
    if state == "absent":
        return [("delete",)] if current else []
    target = desired_state(want)
    actions: List[tuple] = []
    if current is not None and any(current.get(k) != target[k] for k in IMMUTABLE):
        actions.append(("delete",))
        current = None
    if current is None:
        actions.append(("create",))
        have_addrs, have_fdb = [], []
    else:
        have_addrs, have_fdb = current["addresses"], current["fdb"]
        if want.mtu is not None and current["mtu"] != want.mtu:
            actions.append(("mtu", want.mtu))
    actions += [("addr_del", a) for a in have_addrs if a not in target["addresses"]]
    actions += [("addr_add", a) for a in target["addresses"] if a not in have_addrs]
    actions += [("fdb_del", r) for r in have_fdb if r not in target["fdb"]]
    actions += [("fdb_add", r) for r in target["fdb"] if r not in have_fdb]
    if current is None or not current["up"]:
        actions.append(("up",))
    return actions


def _create(ipr, want: Desired, links_by_name: Dict[str, int]) -> None:
    v6 = any(":" in a for a in want.remotes + ((want.local,) if want.local else ()))
    kw = {"ifname": want.name, "kind": want.type}
    if want.mtu is not None:
        kw["mtu"] = want.mtu
    if want.type == "vxlan":
        # Zero outer UDP checksum (RFC 7348: SHOULD be zero; the inner packet carries its own): no checksum
        # pass over every packet that a TUN handed over unchecksummed. The flag is fixed at creation.
        kw.update(vxlan_id=want.vni, vxlan_port=want.dst_port, vxlan_learning=0, vxlan_udp_csum=0)
        if want.local:
            kw["vxlan_local6" if v6 else "vxlan_local"] = want.local
        if want.dev:
            kw["vxlan_link"] = links_by_name[want.dev]
    else:
        kw.update(geneve_id=want.vni, geneve_port=want.dst_port)
        kw["geneve_remote6" if v6 else "geneve_remote"] = want.remotes[0]
    ipr.link("add", **kw)


def apply(ipr, name: str, want: Optional[Desired], actions: List[tuple],
          links_by_name: Optional[Dict[str, int]] = None) -> None:
    """Performs `actions` (from plan) on link `name`; `want` is None only for a plain delete. `links_by_name`
    ({name: index} of the namespace, kept up to date here): a caller changing many links passes one, so each change
    does not dump every link again (a gateway host's 100 overlay links: 100 dumps of 100 links)."""
    if links_by_name is None:
        links_by_name = {m.get_attr("IFLA_IFNAME"): m["index"] for m in ipr.get_links()}
    index = links_by_name.get(name)
    for act in actions:
        op = act[0]
        if op == "delete":
            ipr.link("del", index=index)
            links_by_name.pop(name, None)
            index = None
        elif op == "create":
            _create(ipr, want, links_by_name)
            index = links_by_name[name] = ipr.link_lookup(ifname=name)[0]
        elif op == "mtu":
            ipr.link("set", index=index, mtu=act[1])
        elif op in ("addr_add", "addr_del"):
            ip, plen = act[1].split("/")
            ipr.addr("add" if op == "addr_add" else "del", index=index, address=ip, prefixlen=int(plen))
        elif op in ("fdb_add", "fdb_del"):
            ipr.fdb("append" if op == "fdb_add" else "del", ifindex=index, lladdr=ZERO_MAC, dst=act[1])
        elif op == "up":
            ipr.link("set", index=index, state="up")
    if index is not None and any(a[0] == "fdb_del" for a in actions):
        _flush_neighbours(ipr, index)


def _flush_neighbours(ipr, index: int) -> None:
    """The link's far end moved (a remote replaced, e.g. the active gateway pod): the neighbour entries learnt
    over it name the old end's MAC, which the new end drops; left alone they go stale only after tens of
    seconds of lost traffic."""
    for n in ipr.get_neighbours(ifindex=index):
        dst = n.get_attr("NDA_DST")
        if dst:
            try:
                ipr.neigh("del", ifindex=index, dst=dst, family=n["family"])
            except NetlinkError:
                pass  # gone meanwhile


def describe(actions: List[tuple], name: str) -> List[str]:
    text = {"delete": "delete link", "create": "create link", "mtu": "set mtu", "addr_add": "add address",
            "addr_del": "remove address", "fdb_add": "add fdb 00:00:00:00:00:00 dst", "fdb_del": "remove fdb 00:00:00:00:00:00 dst",
            "up": "set up"}
    return [f"{name}: {text[a[0]]}" + (f" {a[1]}" if len(a) > 1 else "") for a in actions]


def sync_overlay_link(params: dict, state: str = "present", check: bool = False, netns: Optional[str] = None) -> dict:
    """Validates, reads, diffs and (unless `check`) applies. Returns changed, type, geneve_supported,
    actions (human readable), before/after (dicts, None when absent), ifindex."""
    if IPRoute is None:
        raise OverlayError("pyroute2 is required")
    if state == "absent":
        name = _ifname(params.get("name") or "", "name")
        want = None
    else:
        want = normalize(params)
        name = want.name
    kw = {"netns": netns, "flags": 0} if netns else {}
    with IPRoute(**kw) as ipr:
        current = read_link(ipr, name)
        warnings = []
        if want is not None:
            want, supported = resolve_type(want, ipr)
            if want.dev and want.type == "vxlan" and not ipr.link_lookup(ifname=want.dev):
                raise ValidationError(f"dev: {want.dev!r} is not a device of this host")
            if want.dev and want.type == "geneve":
                warnings.append(f"dev: {want.dev!r} ignored, a geneve link has no underlay device binding")
        actions = plan(want, current, state) if want else ([("delete",)] if current else [])
        before = {k: v for k, v in current.items() if k != "index"} if current else None
        after = desired_state(want) if want else None
        if after is not None and want.mtu is None:  # MTU not managed: whatever the kernel has/picks
            after["mtu"] = current["mtu"] if current and ("create",) not in actions else None
        result = {"changed": bool(actions), "name": name, "actions": describe(actions, name),
                  "before": before, "after": after, "warnings": warnings}
        if want is not None:
            result.update(type=want.type, dst_port=want.dst_port, geneve_supported=supported)
        if actions and not check:
            try:
                apply(ipr, name, want, actions)
            except NetlinkError as e:
                raise OverlayError(f"{name}: kernel refused: {e}") from e
        found = ipr.link_lookup(ifname=name)
        result["ifindex"] = found[0] if found else None
    return result


def sync_overlay_links(links: List[dict], owned_prefixes: List[str], check: bool = False,
                       netns: Optional[str] = None, want_states: bool = False) -> dict:
    """A whole set of links in one call: each of `links` (overlay_link parameters) made present, and every
    other link whose name starts with one of `owned_prefixes` deleted (a removed node's link goes too).
    Everything is validated before anything changes. With `want_states`, the result also has `before`
    and `after`: {name: state as read_link/desired_state give it} of the owned and listed links."""
    if IPRoute is None:
        raise OverlayError("pyroute2 is required")
    wanted = []
    for i, params in enumerate(links):
        try:
            wanted.append(normalize(params))
        except ValidationError as e:
            raise ValidationError(f"links[{i}].{e}") from e
    names = [w.name for w in wanted]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"links: duplicate names {', '.join(dupes)}")
    for i, prefix in enumerate(owned_prefixes):
        if not prefix:
            raise ValidationError(f"owned_prefixes[{i}]: must not be empty (it would own every link)")
    kw = {"netns": netns, "flags": 0} if netns else {}
    result = {"changed": False, "actions": [], "created": [], "updated": [], "deleted": [], "warnings": []}
    before: Dict[str, dict] = {}
    after: Dict[str, dict] = {}
    with IPRoute(**kw) as ipr:
        snap = LinkSnapshot(ipr)   # each link is read before it changes; one change never touches another link
        existing = list(snap.msgs)
        by_name = {name: m["index"] for name, m in snap.msgs.items()}
        supported = geneve_supported(ipr) if wanted else None
        for want in wanted:
            want, _supported = resolve_type(want, ipr, supported)
            result.setdefault("type", want.type)
            current = read_link(ipr, want.name, snapshot=snap)
            actions = plan(want, current, "present")
            if want_states:
                if current is not None:
                    before[want.name] = {k: v for k, v in current.items() if k != "index"}
                after[want.name] = desired_state(want)
                if want.mtu is None:
                    after[want.name]["mtu"] = current["mtu"] if current and ("create",) not in actions else None
            if not actions:
                continue
            result["actions"] += describe(actions, want.name)
            result["created" if current is None else "updated"].append(want.name)
            if not check:
                try:
                    apply(ipr, want.name, want, actions, by_name)
                except NetlinkError as e:
                    raise OverlayError(f"{want.name}: kernel refused: {e}") from e
        for name in sorted(existing):
            if name not in names and any(name.startswith(p) for p in owned_prefixes):
                if want_states:
                    current = read_link(ipr, name, snapshot=snap)
                    if current is not None:
                        before[name] = {k: v for k, v in current.items() if k != "index"}
                result["actions"] += describe([("delete",)], name)
                result["deleted"].append(name)
                if not check:
                    apply(ipr, name, None, [("delete",)], by_name)
    result["changed"] = bool(result["actions"])
    if want_states:
        result["before"], result["after"] = before, after
    return result
