# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole overlay dataplane of one host in one call: what `overlay_plan` planned for it
(`hosts[<node>]`: `links`, `routes`, `rules`, `bypass`) made true in the kernel.

Composes the per-concept functions, in the order the kernel needs:

1. overlay links (`overlay_link.sync_overlay_links`, owning every link named `lovg*` / `lovn*`): the
   routes go through them;
2. the pods reached over their own bridge port (`pod_ports`, overlay/pod_port.py): their permanent neighbours,
   and their routes added to the table's;
3. the routes of the overlay table (`route.policy.sync_route_table`);
4. the policy rules selecting that table (`route.policy.sync_rules`);
5. the masquerade bypass, nftables table `liqo_fabric_overlay` (`nat_table.ensure`; absent when there is
   no bypass).

`state=absent` removes it all in the reverse order (rules first, so no traffic is steered into a table
being emptied; the pods' neighbours last). Every input is validated before the first write, so bad input changes nothing.
Pure Python; the controller imports it directly. It runs in the caller's network namespace.
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ansible_collections.liqo.fabric.plugins.module_utils.host.netns_lock import LockTimeout, netns_lock
from ansible_collections.liqo.fabric.plugins.module_utils.nft import nat_table as nat
from ansible_collections.liqo.fabric.plugins.module_utils.nft.client import Nft, NftError
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import link as olink
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import pod_port
from ansible_collections.liqo.fabric.plugins.module_utils.route import netlink
from ansible_collections.liqo.fabric.plugins.module_utils.route import policy as routing

DEFAULT_TABLE = routing.DEFAULT_TABLE
OWNED_PREFIXES = ("lovg", "lovn")
NAT_TABLE = "liqo_fabric_overlay"
NAT_FAMILY = "ip"
PARTS = ("links", "routes", "rules", "bypass", "pod_ports")
# Keys the plan also gives a host, informative only.
INFO_KEYS = ("internal_ip", "role")
STATES = ("present", "absent")


class ValidationError(ValueError):
    """Bad input, found before anything changed. str() names the field and the value."""


class DataplaneError(RuntimeError):
    """The kernel refused a change; str() says which part (links, routes, rules, nat) and why."""


def _list_of_dicts(node: dict, key: str) -> List[dict]:
    value = node.get(key)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ValidationError(f"{key}: {value!r} is not a list")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValidationError(f"{key}[{i}]: {item!r} is not a dict")
    return list(value)


def validate(node_plan: Optional[dict], table, state: str) -> dict:
    """Everything checked that can be checked without the kernel; returns the normalised input:
    {"table", "state", "links", "link_names", "routes", "rules", "bypass", "pod_ports"} (raw lists, validated;
    pod_ports: their IPs).
    Raises ValidationError naming the field and the value."""
    if state not in STATES:
        raise ValidationError(f"state: {state!r} is not one of {', '.join(STATES)}")
    try:
        table = routing.validate_table(table)
    except routing.ValidationError as e:
        raise ValidationError(str(e)) from None
    if state == "absent":
        return {"table": table, "state": state, "links": [], "link_names": [], "routes": [], "rules": [], "bypass": [],
                "pod_ports": []}
    if node_plan is None:
        node_plan = {}
    if not isinstance(node_plan, dict):
        raise ValidationError(f"node: {node_plan!r} is not a dict")
    unknown = sorted(set(node_plan) - set(PARTS) - set(INFO_KEYS))
    if unknown:
        raise ValidationError(f"node: unknown key(s) {', '.join(map(str, unknown))} (expected {', '.join(PARTS)})")
    links, routes, rules, bypass, ports = (_list_of_dicts(node_plan, k) for k in PARTS)
    try:
        ports = pod_port.normalize(ports)
    except pod_port.ValidationError as e:
        raise ValidationError(str(e)) from None

    names = []
    for i, params in enumerate(links):
        try:
            want = olink.normalize(params)
        except olink.ValidationError as e:
            raise ValidationError(f"links[{i}].{e}") from None
        if not want.name.startswith(OWNED_PREFIXES):
            raise ValidationError(f"links[{i}].name: {want.name!r} does not start with {' or '.join(OWNED_PREFIXES)} "
                                  "(the overlay owns only those links, others would never be removed)")
        names.append(want.name)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValidationError(f"links: duplicate names {', '.join(dupes)}")
    try:
        routing.normalize_routes(routes, "routes")
        routing.normalize_rules(rules, [table], "rules")
    except routing.ValidationError as e:
        raise ValidationError(str(e)) from None
    if bypass:
        try:
            nat.build_table(_nat_spec(bypass))
        except nat.NatTableError as e:
            raise ValidationError(str(e)) from None
    return {"table": table, "state": state, "links": links, "link_names": names, "routes": routes,
            "rules": rules, "bypass": bypass, "pod_ports": ports}


def _nat_spec(bypass: List[dict]) -> dict:
    return {"name": NAT_TABLE, "family": NAT_FAMILY, "bypass": bypass}


def check_devices(routes: List[dict], link_names: List[str], existing: Dict[int, str]) -> None:
    """Every route's `dev` is an existing device or one of the links about to be made."""
    known = set(existing.values()) | set(link_names)
    for i, spec in enumerate(routes):
        dev = spec.get("dev")
        if dev not in (None, "") and dev not in known:
            raise ValidationError(f"routes[{i}].dev: {dev!r} is neither a device of this host nor one of the overlay links")


def link_line(name: str, st: dict) -> str:
    """One link state (read_link / desired_state shape) as one line for diffs."""
    parts = [name, str(st.get("kind")), f"vni {st.get('vni')}", f"dstport {st.get('dst_port')}"]
    if st.get("local"):
        parts.append(f"local {st['local']}")
    if st.get("dev"):
        parts.append(f"dev {st['dev']}")
    if st.get("remote"):
        parts.append(f"remote {st['remote']}")
    for r in st.get("fdb") or []:
        parts.append(f"fdb {r}")
    if st.get("mtu") is not None:
        parts.append(f"mtu {st['mtu']}")
    parts += [f"addr {a}" for a in st.get("addresses") or []]
    parts.append("up" if st.get("up") else "down")
    return " ".join(parts)


def _section(title: str, lines: List[str]) -> str:
    return f"# {title}\n" + "".join(f"{line}\n" for line in lines)


def sync_overlay_dataplane(node_plan: Optional[dict], table: int = DEFAULT_TABLE, state: str = "present",
                           check: bool = False, want_diff: bool = False) -> dict:
    """Makes the current network namespace hold exactly `node_plan` (state present) or no overlay at all
    (state absent). Returns:

    changed, writes (kernel writes: link operations, route and rule messages, nft transactions; 0 in
    check mode and on an unchanged rerun), links {created, updated, deleted, actions, type}, routes
    {added, replaced, removed}, rules {added, removed}, nat {changed, table, rules}, pod_ports {routed (ip ->
    port), pending (ip -> why), neighbours_added, neighbours_removed}, warnings, and with
    `want_diff` diff {before, after} (text, one section per part).

    Raises ValidationError (nothing changed) or DataplaneError (the kernel refused a write; the parts
    before it are applied, the message names the part)."""
    v = validate(node_plan, table, state)
    # a node agent re-points its link in process (controller/node_repoint.py) while its playbook may be syncing
    try:
        with netns_lock("overlay-%d" % v["table"]):
            return _sync(v, state, check, want_diff)
    except LockTimeout as e:
        raise DataplaneError(str(e)) from None


def _sync(v: dict, state: str, check: bool, want_diff: bool) -> dict:
    table = v["table"]
    present = state == "present"
    # The last validation that needs the kernel: route devices exist or are links about to be made.
    with netlink.RtnlSocket() as sock:
        existing = netlink.read_links(sock)
    check_devices(v["routes"], v["link_names"], existing)
    try:
        nft = Nft("auto")  # before any write: a missing nftables fails here
    except (NftError, OSError) as e:
        raise DataplaneError(f"nat table {NAT_TABLE}: {e}") from e
    try:
        result = {"changed": False, "writes": 0, "state": state, "table": table, "warnings": []}
        parts = {}

        def guarded(invalid, failed, invalid_prefix, failed_prefix, fn):
            """fn(), its input errors as ValidationError and the kernel's refusals as DataplaneError."""
            try:
                return fn()
            except invalid as e:
                raise ValidationError(f"{invalid_prefix}{e}") from None
            except failed as e:
                raise DataplaneError(f"{failed_prefix}{e}") from e

        def links():
            r = guarded(olink.ValidationError, (olink.OverlayError, OSError), "links: ", "links: ",
                        lambda: olink.sync_overlay_links(v["links"], list(OWNED_PREFIXES), check=check,
                                                         want_states=want_diff))
            result["warnings"] += r.pop("warnings", [])
            if not check:
                result["writes"] += len(r["actions"])
            parts["links"] = r

        def pod_ports():
            def run():
                with pod_port.open_ipr() as ipr:
                    found = pod_port.resolve(ipr, v["pod_ports"], check=check) if present else \
                        {"found": {}, "pending": {}}
                    return found, pod_port.sync_neighbours(ipr, found["found"], check=check)
            found, r = guarded(pod_port.ValidationError, (pod_port.PodPortError, pod_port.NetlinkError, OSError), "",
                               "pod_ports: ", run)
            result["writes"] += r.pop("writes")
            result["warnings"] += [f"pod_ports: {ip} keeps the bridge path for now: {why}"
                                   for ip, why in sorted(found["pending"].items())]
            v["routes"] = list(v["routes"]) + pod_port.routes(found["found"])
            r["routed"] = {ip: p["port"] for ip, p in sorted(found["found"].items())}
            r["pending"] = found["pending"]
            parts["pod_ports"] = r

        def routes():
            r = guarded(routing.ValidationError, (netlink.NetlinkError, OSError), "", f"routes of table {table}: ",
                        lambda: routing.sync_route_table(v["routes"], table=table, state=state, check=check,
                                                         want_lines=want_diff, pending_devs=v["link_names"]))
            result["writes"] += r.pop("writes")
            parts["routes"] = r

        def rules():
            r = guarded(routing.ValidationError, (netlink.NetlinkError, OSError), "", "rules: ",
                        lambda: routing.sync_rules(v["rules"], tables=[table], state=state, check=check))
            result["writes"] += r.pop("writes")
            parts["rules"] = r

        def nat_table():
            want = "present" if v["bypass"] else "absent"
            r = guarded(nat.NatTableError, (NftError, OSError), "", f"nat table {NAT_TABLE}: ",
                        lambda: nat.ensure(_nat_spec(v["bypass"]), state=want, check_mode=check, nft=nft))
            if r["changed"] and not check:
                result["writes"] += 1  # one nft transaction
            parts["nat"] = r

        for step in ((links, pod_ports, routes, rules, nat_table) if present
                     else (rules, routes, links, nat_table, pod_ports)):
            step()
    finally:
        nft.close()

    lr, rr, ur, nr, pr = parts["links"], parts["routes"], parts["rules"], parts["nat"], parts["pod_ports"]
    result["links"] = {k: lr[k] for k in ("created", "updated", "deleted", "actions")}
    if "type" in lr:
        result["links"]["type"] = lr["type"]
    result["routes"] = {k: rr[k] for k in ("added", "replaced", "removed")}
    result["rules"] = {k: ur[k] for k in ("added", "removed")}
    result["nat"] = {"changed": nr["changed"], "table": NAT_TABLE, "rules": nr["rules"]}
    result["pod_ports"] = {"routed": pr["routed"], "pending": pr["pending"], "neighbours_added": pr["added"],
                           "neighbours_removed": pr["removed"]}
    result["changed"] = bool(lr["changed"] or rr["changed"] or ur["changed"] or nr["changed"] or pr["changed"])
    if want_diff:
        def text(side):
            return (_section("links", [link_line(n, st) for n, st in sorted(lr[side].items())])
                    + _section(f"routes, table {table}", rr[side])
                    + _section("rules", ur[side])
                    + _section("pods reached over their bridge port: neighbours", pr[side])
                    + _section(f"nftables table {NAT_FAMILY} {NAT_TABLE}", nr["diff"][side].splitlines()))
        before, after = text("before"), text("after")
        result["diff"] = {"before": before, "after": after}
    return result
