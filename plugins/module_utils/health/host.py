# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What module liqo.fabric.peer_health does on a gateway host: the desired set of probe processes, input
checked first (nothing is started or stopped when any entry is bad)."""

from __future__ import annotations

import os

from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd
from ansible_collections.liqo.fabric.plugins.module_utils.health import hold
from ansible_collections.liqo.fabric.plugins.module_utils.health.prober import HealthError
from ansible_collections.liqo.fabric.plugins.module_utils.host.manifest import where
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube, KubeError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import ValidationError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_ifname

SPEC_KEYS = ("interface", "address", "namespace", "connection_name", "remote_cluster_id", "public_key", "port",
             "interval", "threshold", "kind", "mtu_auto", "mtu_cap")


def from_plans(plans, defaults=None):
    """(probe specs, interfaces to stop) from entries of liqo.fabric.gateway_plan: a ready gateway without an
    error is probed, a held one (a refused change of a built gateway) keeps its probe as it runs, any other is
    not probed."""
    probe, halt = [], []
    for i, p in enumerate(plans or []):
        if not isinstance(p, dict) or not p.get("interface"):
            raise HealthError("plans[%d]: expected an entry of liqo.fabric.gateway_plan's gateways (with interface)" % i)
        if p.get("held"):
            probe.append({"interface": p["interface"], "held": True})
        elif p.get("ready") and not p.get("error"):
            spec = dict(defaults or {}, interface=p["interface"], address=p.get("probe_address"),
                        namespace=p.get("namespace"), connection_name=p.get("connection_name") or p.get("name"),
                        remote_cluster_id=p.get("remote_cluster_id"),
                        public_key=(p.get("peer") or {}).get("public_key"), kind=p.get("kind"),
                        mtu_auto=True if p.get("mtu_auto") else None, mtu_cap=p.get("mtu_peer"))
            probe.append({k: v for k, v in spec.items() if v is not None})
        else:
            halt.append(p["interface"])
    return probe, halt


def apply(gateways, state, state_dir, kubeconfig=None, exclusive=False, check_mode=False, halt=()):
    """Starts/stops probe processes (and stops those of `halt`); returns {changed, started, stopped, health}."""
    if not state_dir or not os.path.isabs(state_dir):
        raise HealthError("state_dir: %r is not an absolute path" % (state_dir,))
    # a held gateway's probe runs on as it is (state present); a teardown stops it like any other
    held = [gw["interface"] for gw in gateways or [] if state == "present" and isinstance(gw, dict) and gw.get("held")]
    gateways = [gw for gw in gateways or [] if not (isinstance(gw, dict) and gw.get("interface") in held)]
    specs = []
    for i, gw in enumerate(gateways):
        if state == "present":
            phd.check_spec(i, gw)
        elif not isinstance(gw, dict) or not gw.get("interface"):
            raise HealthError("gateways[%d].interface: required" % i)
        specs.append({k: gw[k] for k in SPEC_KEYS if gw.get(k) is not None})
    kube = None
    if state == "present" and kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise HealthError("kubeconfig: %s does not exist on this host" % kubeconfig)
        try:
            kube = Kube(kubeconfig)
        except KubeError as exc:
            raise HealthError("kubeconfig: %s" % exc)
    started, stopped = [], []
    wanted = [s["interface"] for s in specs] + held
    gone = wanted if state == "absent" else list(halt)
    if state == "present" and exclusive:
        gone += [i for i in phd.running(state_dir) if i not in wanted and i not in gone]
    if gone:
        for interface in gone:
            if check_mode:
                if interface in phd.running(state_dir):
                    stopped.append(interface)
            elif phd.stop(state_dir, interface):
                stopped.append(interface)
    health = {}
    if state == "present":
        for spec in specs:
            if check_mode:
                rec = phd.read_pidfile(state_dir, spec["interface"])
                if not rec or rec.get("config") != phd.config_hash(spec, kubeconfig):
                    started.append(spec["interface"])
                continue
            if phd.start(spec, state_dir, kube):
                started.append(spec["interface"])
            try:
                health[spec["interface"]] = phd.query(state_dir, spec["interface"])
            except (OSError, ValueError, IndexError) as exc:
                health[spec["interface"]] = {"error": str(exc)}
    out = {"changed": bool(started or stopped), "started": started, "stopped": stopped, "health": health}
    if state == "present" and specs and not check_mode:
        # for the controller's drift checks (controller/drift.py): the probe processes this host must keep
        out["manifest"] = dict(where(), kind="gateway",
                               health=[{"state_dir": state_dir, "interface": s["interface"]} for s in specs])
    return out


def apply_hold(interfaces, seconds, state_dir, check_mode=False):
    """Holds (seconds > 0) or releases (0) the session restarts of the probes of `interfaces`, all checked first.
    Only a running probe is held: a host where the gateway is not built (a standby) gets no file. Returns
    {changed, held, released, not_running, until}."""
    if not state_dir or not os.path.isabs(state_dir):
        raise HealthError("state_dir: %r is not an absolute path" % (state_dir,))
    try:
        hold.check_seconds(seconds)
        for i, name in enumerate(interfaces or []):
            validate_ifname(name, "interfaces[%d]" % i)
    except (hold.HoldError, ValidationError) as exc:
        raise HealthError(str(exc))
    held, released, idle = [], [], []
    until = None
    for name in interfaces or []:
        if seconds == 0:
            if os.path.exists(hold.hold_path(state_dir, name)) and (check_mode or hold.release(state_dir, name)):
                released.append(name)
        elif phd.read_pidfile(state_dir, name) is None:
            idle.append(name)
        else:
            held.append(name)
            if not check_mode:
                until = hold.write(state_dir, name, seconds)
    return {"changed": bool(held or released), "held": held, "released": released, "not_running": idle,
            "until": until}
