# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway host's whole dataplane from the plan of roles/gateway, in one process.

One module call per host instead of six (sysctls, WireGuard, NAT table, route table, rules, probe): each
Ansible module run costs more than the work itself. This applies the same
desired state by composing the same functions: everything is validated first (nothing is written when any
gateway's input is bad), then each gateway is built in dependency order (the interface before the routes
through it) and probed.
"""

from __future__ import annotations

import os
import time

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import path_mtu
from ansible_collections.liqo.fabric.plugins.module_utils.health.tunnel_probe import probe
from ansible_collections.liqo.fabric.plugins.module_utils.host import sysctls as host_sysctls
from ansible_collections.liqo.fabric.plugins.module_utils.nft import nat_table as nat
# NftError is re-exported for the module
from ansible_collections.liqo.fabric.plugins.module_utils.nft.client import Nft, NftError  # noqa: F401 # pylint: disable=unused-import
from ansible_collections.liqo.fabric.plugins.module_utils.route import local_rule
from ansible_collections.liqo.fabric.plugins.module_utils.route import policy as routing
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import errors as wg_errors
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import go_version as wireguard_go_version
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.interface import ensure_absent, ensure_present
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.session import try_peer_key
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import (
    BACKEND_USERSPACE, WIREGUARD_GO, UserspaceBackend)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_interface

# Forwarding, and loose reverse-path filtering: packets from the overlay and the tunnel come in on other
# links than the routes back to their sources; loose filtering only needs some route (a default) to cover them.
# Host-wide: recorded once per host, restored when the host's last gateway goes (see host_sysctls).
SYSCTLS = (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "2"))
REQUIRED = ("interface", "nat_table", "table")
REQUIRED_PRESENT = ("mtu", "transit_address", "peer", "nat_tunnel", "mark", "rule_priority", "probe_address")


class DataplaneError(ValueError):
    """Bad input: the message names the gateway and the field. `errors`: {namespace/name: {reason, message}} of the
    gateway object whose field it is, when the refusal is one of that object's fields (the controller's Degraded
    condition of the object carries the reason); {} otherwise."""

    def __init__(self, message, gateway=None, reason=None):
        super().__init__(message)
        owner = _owner(gateway) if reason else None
        self.errors = {owner: {"reason": reason, "message": message}} if owner else {}


def _owner(gw):
    """namespace/name of the gateway object a plan entry (or a per-gateway result) belongs to, or None."""
    if isinstance(gw, dict) and gw.get("namespace") and gw.get("name"):
        return "%s/%s" % (gw["namespace"], gw["name"])
    return None


def refusal_errors(result):
    """{namespace/name: {reason, message}} of the gateways whose change this host refused (result["gateways"] entries
    with `refused`, e.g. a peer key that completed no handshake): the task's per-object outcome."""
    return dict((_owner(g), g["refused"]) for g in result.get("gateways") or [] if g.get("refused") and _owner(g))


def _where(i, gw):
    return "gateways[%d] (%s)" % (i, gw.get("interface") or gw.get("name") or "?")


def _check_keys(i, gw, keys):
    if not isinstance(gw, dict):
        raise DataplaneError("gateways[%d]: expected a dict from liqo.fabric.gateway_plan, got %r" % (i, type(gw).__name__))
    missing = [k for k in keys if gw.get(k) in (None, "")]
    if missing:
        raise DataplaneError("%s: missing %s (pass the entries of liqo.fabric.gateway_plan's gateways)"
                             % (_where(i, gw), ", ".join(missing)))


def _wg_params(gw, private_key):
    peer = gw["peer"]
    return {"name": gw["interface"], "private_key": private_key, "listen_port": gw.get("listen_port") or None,
            "mtu": gw["mtu"], "addresses": [gw["transit_address"]], "exclusive": True,
            "peers": [{"public_key": peer.get("public_key"), "endpoint": peer.get("endpoint") or None,
                       "allowed_ips": peer.get("allowed_ips") or [],
                       "persistent_keepalive": peer.get("persistent_keepalive") or 0}]}


def _nat_spec(gw):
    return {"name": gw["nat_table"], "family": "ip", "tunnels": [dict(gw["nat_tunnel"])],
            "mss": [{"oifname": gw["interface"]}]}


def _routes(gw):
    return [{"dst": "0.0.0.0/0", "dev": gw["interface"]}]


def _rules(gw):
    # fwmark: pods' and replies' traffic (marked in prerouting); to: the host's own first route lookup, made
    # before the output chain can mark the packet
    prio = int(gw["rule_priority"])
    return [{"priority": prio, "fwmark": str(gw["mark"]), "table": gw["table"]},
            {"priority": prio + 1, "to": gw["nat_tunnel"]["remote_remapped"], "table": gw["table"]}]


def _probe_path(gw):
    """spec.mtu auto: the path to the peer probed and the interface set to what crosses it (module_utils/gateway/
    path_mtu.py); {mtu_status, path_mtu} for the probe's result, or {path_mtu_error}."""
    # once probed (status.mtu source probed), the live watch owns the tunnel's growth: a rebuild only lowers it
    out = path_mtu.probe_and_set(gw["interface"], gw["probe_address"], gw["peer"]["public_key"], gw.get("mtu_peer"),
                                 grow=gw.get("mtu_source") != "probed")
    if out.get("error"):
        return {"path_mtu_error": out["error"]}
    return {"mtu_status": out["mtu_status"], "path_mtu": out["probe"]}


def validate(gateways, private_keys):
    """Checks every gateway's input with the validators of the underlying modules; returns the WireGuard
    specs by interface. Raises DataplaneError naming the gateway and the field."""
    specs = {}
    seen = {}
    for i, gw in enumerate(gateways):
        _check_keys(i, gw, REQUIRED + REQUIRED_PRESENT)
        where = _where(i, gw)
        for key in ("interface", "table", "nat_table"):
            if gw[key] in seen.setdefault(key, {}):
                raise DataplaneError("%s.%s: %r is already used by gateways[%d]" % (where, key, gw[key], seen[key][gw[key]]))
            seen[key][gw[key]] = i
        key = (private_keys or {}).get(gw["interface"])
        if not key:
            raise DataplaneError("%s: private_keys has no key for interface %s" % (where, gw["interface"]))
        try:
            specs[gw["interface"]] = validate_interface(_wg_params(gw, key))
            nat.build_table(_nat_spec(gw))
            routing.validate_table(gw["table"])
            routing.normalize_routes(_routes(gw))
            routing.normalize_rules(_rules(gw), [gw["table"]])
        except wg_errors.ValidationError as e:
            text = str(e)
            if text.startswith(PEER_ENDPOINT + ":"):
                raise _endpoint_refused(where, gw, text[len(PEER_ENDPOINT) + 1:]) from None
            raise DataplaneError("%s: %s" % (where, e)) from None
        except (routing.ValidationError, nat.NatTableError) as e:
            raise DataplaneError("%s: %s" % (where, e)) from None
    return specs


# the peer's endpoint in _wg_params' one peer: a client's spec.endpoint (addresses[0]:port), resolved on this host
PEER_ENDPOINT = "peers[0].endpoint"


def _endpoint_refused(where, gw, why):
    """The refusal of a client's spec.endpoint that this host cannot use (a name it cannot resolve): nothing is
    written, and a gateway built before runs on as it is."""
    built = os.path.isdir(os.path.join("/sys/class/net", gw["interface"]))
    return DataplaneError("%s: spec.endpoint.addresses:%s%s" % (
        where, why, " (refused: the gateway runs on as last built)" if built else ""), gw, "InvalidEndpoint")


def _diff(header, before, after):
    return {"before_header": header, "after_header": header, "before": before, "after": after}


def _lines(lines):
    return "".join(line + "\n" for line in lines)


def _wg_text(view):
    if not view or view.get("state") == "absent":
        return ""
    peers = ["peer %s endpoint %s allowed-ips %s keepalive %s" % (
        p.get("public_key"), p.get("endpoint") or "-", ",".join(p.get("allowed_ips") or []),
        p.get("persistent_keepalive") or 0) for p in view.get("peers") or []]
    return _lines(["interface %s public-key %s listen-port %s mtu %s addresses %s" % (
        view.get("name"), view.get("public_key"), view.get("listen_port"), view.get("mtu"),
        ",".join(view.get("addresses") or []))] + peers)


def wait_name_free(iface, timeout, interval=0.05):
    """WireGuard-go control sockets are per machine, not per network namespace: on a machine whose
    namespaces are gateway hosts (the lab), the old active host must let the name go before the new one
    takes it. The role tears down and builds in the same task on all hosts, so the builder waits here.
    Returns the seconds waited; raises DataplaneError after `timeout`."""
    if os.path.exists(os.path.join("/sys/class/net", iface)):
        return 0.0
    us = UserspaceBackend(iface)
    t0 = time.monotonic()
    while us.socket_live():
        if time.monotonic() - t0 > timeout:
            raise DataplaneError("%s: the interface name is still used by a wireguard-go in another network namespace "
                                 "of this machine after %.0f s (is another host of the group still active?)" % (iface, timeout))
        time.sleep(interval)
    return time.monotonic() - t0


def _peer_replaced(wres):
    """Whether the interface existed and its peer got a new public key (the remote side rotated its key)."""
    before, after = wres["diff"]["before"], wres["diff"]["after"]
    if wres.get("created") or not before or before.get("state") != "present":
        return False
    old = set(p["public_key"] for p in before.get("peers") or [])
    return bool(old) and old != set(p["public_key"] for p in after.get("peers") or [])


def kick_handshake(iface, address, port=9):
    """One UDP datagram (discard port) into the tunnel: a peer that has no session yet (its key was just
    replaced) handshakes now instead of when the remote retries (WireGuard's REKEY_TIMEOUT, 5 s); until then
    the remote's packets wait in its staging queue (docs/key-rotation.md). Best effort: True when sent."""
    import socket  # pylint: disable=import-outside-toplevel
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
            s.sendto(b"liqo-fabric key rotation", (address, port))
        return True
    except OSError:
        return False


# Seconds a new peer key has to complete a handshake before it replaces a live peer: the first initiation goes
# at once, WireGuard's retry after 5 s (REKEY_TIMEOUT) covers one lost on the way.
PEER_KEY_TRIAL = 5.5


def _peer_key_refused(gw, spec, check, trial=True):
    """A gateway whose plan replaces the key of a live peer tries the new key first (wireguard/session.py
    try_peer_key; a client at its configured endpoint, a server where the live peer's packets come from): the
    refusal ({reason, message}) when it completes no handshake, else None."""
    peer = gw.get("peer") or {}
    if not trial or check or not peer.get("public_key") or not os.path.isdir(os.path.join("/sys/class/net", gw["interface"])):
        return None
    if try_peer_key(gw["interface"], peer["public_key"], peer.get("endpoint"), PEER_KEY_TRIAL,
                    private_key=spec.private_key) is not False:
        return None
    return {"reason": "PeerKeyRejected",
            "message": "the peer's new public key %s completed no handshake with %s in %.1f s: the live peer is kept "
                       "(is the PublicKey the peer's?)" % (peer["public_key"], peer.get("endpoint") or "the live peer's endpoint",
                                                           PEER_KEY_TRIAL)}


def _build(gw, spec, check, nft, handover_wait=0.0, peer_key_trial=True):
    """One gateway, in dependency order. Returns (result, diffs)."""
    iface = gw["interface"]
    waited = wait_name_free(iface, handover_wait) if handover_wait and not check else 0.0
    out = {"interface": iface, "kind": gw.get("kind"), "name": gw.get("name"), "namespace": gw.get("namespace"),
           "handover_wait": round(waited, 3)}
    refused = _peer_key_refused(gw, spec, check, peer_key_trial)
    if refused:  # nothing of this gateway is touched
        out.update(changed=False, refused=refused, writes=0)
        return out, []
    t0 = time.monotonic()
    wres = ensure_present(spec, check_mode=check)
    out["seconds"] = {"wireguard": round(time.monotonic() - t0, 3)}
    out["wireguard"] = {k: wres.get(k) for k in ("changed", "created", "backend", "pid", "writes")}
    out["wireguard"]["handshake_kicked"] = (not check and _peer_replaced(wres)
                                            and kick_handshake(iface, gw["probe_address"]))
    nres = nat.ensure(_nat_spec(gw), check_mode=check, nft=nft)
    out["nat"] = {"changed": nres["changed"], "table": nres["table"], "rules": nres["rules"]}
    if check and wres["created"]:
        # the interface does not exist yet: the table's route through it cannot be checked against the kernel
        routes = {"changed": True, "added": ["0.0.0.0/0 dev %s" % iface], "replaced": [], "removed": [], "writes": 0,
                  "before": [], "after": ["0.0.0.0/0 dev %s" % iface]}
    else:
        routes = routing.sync_route_table(_routes(gw), table=gw["table"], check=check)
    rules = routing.sync_rules(_rules(gw), tables=[gw["table"]], check=check)
    out["routes"] = {k: routes[k] for k in ("changed", "added", "replaced", "removed", "writes")}
    out["rules"] = {k: rules[k] for k in ("changed", "added", "removed", "writes")}
    parts = ("wireguard", "nat", "routes", "rules")
    out["changed"] = any(out[k]["changed"] for k in parts)
    out["seconds"]["total"] = round(time.monotonic() - t0, 3)
    out["writes"] = ((wres.get("writes") or 0) + (1 if nres["changed"] and not check else 0)
                     + routes["writes"] + rules["writes"])
    diffs = [_diff("wireguard %s" % iface, _wg_text(wres["diff"]["before"]), _wg_text(wres["diff"]["after"])),
             _diff("nft table ip %s" % gw["nat_table"], nres["diff"]["before"], nres["diff"]["after"]),
             _diff("table %s" % gw["table"], _lines(routes["before"]), _lines(routes["after"])),
             _diff("rules of table %s" % gw["table"], _lines(rules["before"]), _lines(rules["after"]))]
    return out, diffs


def _teardown(gw, check, nft):
    iface, table = gw["interface"], gw["table"]
    rules = routing.sync_rules([], tables=[table], state="absent", check=check)
    routes = routing.sync_route_table([], table=table, state="absent", check=check)
    nres = nat.ensure({"name": gw["nat_table"], "family": "ip"}, state="absent", check_mode=check, nft=nft)
    wres = ensure_absent(iface, check_mode=check)
    out = {"interface": iface, "kind": gw.get("kind"), "name": gw.get("name"), "namespace": gw.get("namespace"),
           "rules": {"changed": rules["changed"], "removed": rules["removed"]},
           "routes": {"changed": routes["changed"], "removed": routes["removed"]},
           "nat": {"changed": nres["changed"], "table": gw["nat_table"]},
           "wireguard": {"changed": wres["changed"], "backend": wres.get("backend"), "elsewhere": bool(wres.get("elsewhere"))}}
    out["changed"] = any(out[k]["changed"] for k in ("rules", "routes", "nat", "wireguard"))
    diffs = [_diff("wireguard %s" % iface, _wg_text(wres["diff"]["before"]), ""),
             _diff("nft table ip %s" % gw["nat_table"], nres["diff"]["before"], ""),
             _diff("table %s" % table, _lines(routes.get("before") or []), ""),
             _diff("rules of table %s" % table, _lines(rules["before"]), "")]
    return out, diffs


def _local_rule_priority(gateways, value):
    """`local_rule_priority` checked against the gateways' rules (it must come after all of them)."""
    try:
        prio = local_rule.validate_priority(value)
    except routing.ValidationError as e:
        raise DataplaneError(str(e)) from None
    last = max([int(gw["rule_priority"]) + 1 for gw in gateways if gw.get("rule_priority") is not None] or [0])
    if prio <= last:
        raise DataplaneError("local_rule_priority: %d must come after the gateways' rules (the last is %d)" % (prio, last))
    return prio


def sync_gateway_dataplane(gateways, private_keys=None, state="present", check=False, probe_wait=0.0,
                           sysctl_file=None, handover_wait=0.0, local_rule_priority=None,
                           probe_tunnels=True, peer_key_trial=True):
    """Makes this host run exactly `gateways` (state present) or none of them (absent).

    `gateways`: entries of liqo.fabric.gateway_plan (ready ones for present). Returns changed, gateways
    (per-gateway results), probes (by interface, as tunnel_probe returns them; not in check mode), sysctls
    (names and record file changed; with absent also sysctls_restored, the values put back), wireguard_go
    (the binary's path, version, offloads and a warning when it has none; when a gateway runs on it) and diffs.
    `sysctl_file`: the host's record of the host-wide sysctls (see host_sysctls); without it the values are
    set and never restored.
    `local_rule_priority`: in a namespace the gateways own (a pod), the IPv4 `lookup local` rule moves there,
    after the gateways' rules (module_utils/route/local_rule.py); absent puts it back at 0. `probe_tunnels`: False
    skips the probes (a key rotation's switch step, when a probe could only fail). `peer_key_trial`: False
    replaces a client's peer key without trying it first (a key rotation's adopt step: the key is the peer's,
    already switched, and the packets it queued must reach the new peer at once).
    Raises DataplaneError on bad input before anything is written."""
    gateways = list(gateways or [])
    if state not in ("present", "absent"):
        raise DataplaneError("state: %r is not one of present, absent" % (state,))
    result = {"changed": False, "gateways": [], "probes": {}, "sysctls": [], "diffs": []}
    if state == "absent":
        for i, gw in enumerate(gateways):
            _check_keys(i, gw, REQUIRED)
    else:
        specs = validate(gateways, private_keys)
        if local_rule_priority is not None:
            local_rule_priority = _local_rule_priority(gateways, local_rule_priority)
        if gateways:
            res = host_sysctls.acquire(SYSCTLS, [gw["interface"] for gw in gateways], sysctl_file, check)
            result["sysctls"] = res["changed"]
            if res["changed"]:
                result["diffs"].append(_diff("sysctls", res["before"], res["after"]))
    if gateways:
        nft = Nft("auto")  # one libnftables context for every table of the call
        try:
            for gw in gateways:
                if state == "absent":
                    out, diffs = _teardown(gw, check, nft)
                else:
                    out, diffs = _build(gw, specs[gw["interface"]], check, nft, handover_wait, peer_key_trial)
                result["gateways"].append(out)
                result["diffs"] += diffs
        finally:
            nft.close()
    if local_rule_priority is not None and (gateways or state == "absent"):
        res = local_rule.sync(local_rule_priority if state == "present" else 0, check)
        result["local_rule"] = {"changed": res["changed"], "priority": res["after"][0], "accept_local": []}
        if state == "present":
            for gw in gateways:   # a check run may not have built the interface yet: it would change
                iface = gw["interface"]
                if (check and not os.path.isdir("/proc/sys/net/ipv4/conf/" + iface)) or local_rule.accept_local(iface, check):
                    result["local_rule"]["accept_local"].append(iface)
                    result["local_rule"]["changed"] = True
        if res["changed"]:
            result["diffs"].append(_diff("local rule priority", _lines([str(p) for p in res["before"]]),
                                         _lines([str(p) for p in res["after"]])))
    if state == "present" and any((g.get("wireguard") or {}).get("backend") == BACKEND_USERSPACE for g in result["gateways"]):
        result["wireguard_go"] = wireguard_go_version.probe(WIREGUARD_GO)
    if state == "absent":
        # after the interfaces are gone: the values stay while another gateway of the host runs
        res = host_sysctls.release(SYSCTLS, [gw["interface"] for gw in gateways], sysctl_file, check)
        result["sysctls"] = res["changed"]
        result["sysctls_restored"] = res["restored"]
        if res["changed"]:
            result["diffs"].append(_diff("sysctls", res["before"], res["after"]))
    result["refused"] = dict((g["interface"], g["refused"]) for g in result["gateways"] if g.get("refused"))
    if not check and state == "present" and probe_tunnels:
        for gw in gateways:
            if gw.get("error") or gw["interface"] in result["refused"]:
                continue
            t0 = time.monotonic()
            # a probing gateway checks its tunnel at the smallest path's size, then probes the path
            res = probe(gw["interface"], gw["peer"]["public_key"], gw["probe_address"],
                        path_mtu.floor_mtu() if gw.get("mtu_auto") else int(gw["mtu"]), float(probe_wait or 0))
            if gw.get("mtu_auto") and res.get("connected"):
                res.update(_probe_path(gw))
            res["seconds"] = round(time.monotonic() - t0, 3)
            result["probes"][gw["interface"]] = res
    result["changed"] = (bool(result["sysctls"]) or any(g["changed"] for g in result["gateways"])
                         or (result.get("local_rule") or {}).get("changed", False))
    return result
