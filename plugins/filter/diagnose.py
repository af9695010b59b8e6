# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the liqo.fabric.diagnose playbook: the host checks from the roles' check-mode results, the report.
Documented in diagnose_host_checks.yml and diagnose_table.yml; the checks are module_utils/verify/diagnose.py."""
from __future__ import annotations

from ansible_collections.liqo.fabric.plugins.module_utils.verify import diagnose

GATEWAY_FIX = "ansible-playbook -i INVENTORY liqo.fabric.reconcile_gateway -e kubeconfig=... -e gateway_group=..."
NODE_FIX = "ansible-playbook -i INVENTORY liqo.fabric.reconcile_overlay -e kubeconfig=... -e nodes_group=..."


def diagnose_host_checks(hostvars, hosts):
    """Checks of every host the diagnose playbook looked at (facts diagnose_host / diagnose_node)."""
    out = []
    sides = {"local": 0, "remote": 1}

    def side(host):
        facts = hostvars[host].get("diagnose_host") or hostvars[host].get("diagnose_node") or {}
        return sides.get(facts.get("side"), 2)

    hosts = sorted(hosts, key=side)
    for host in hosts:
        hv = hostvars[host]
        if hv.get("diagnose_host"):
            where = "%s (%s)" % (host, hv["diagnose_host"]["side"])
            tunnels = (hv.get("diagnose_tunnels") or {}).get("results") or []
            out += diagnose.gateway_host_checks(where, hv.get("gateway_dataplane"), tunnels, GATEWAY_FIX)
        if hv.get("diagnose_node"):
            where = "%s (%s)" % (host, hv["diagnose_node"]["side"])
            out += diagnose.node_checks(where, hv.get("node_overlay_applied"), NODE_FIX)
    return out


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"diagnose_host_checks": diagnose_host_checks, "diagnose_table": diagnose.table}
