# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_overlay filters: which nodes a run must apply, and the record of applied digests it leaves.

The documentation of each filter is in the YAML file of the same name next to this file
(plugins/filter/node_overlay_pending.yml, plugins/filter/node_overlay_record.yml).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.module_utils.overlay.plan import pending_hosts, record_after


def _pairs(hosts, names):
    hosts = list(hosts or [])
    names = list(names or [])
    if len(names) != len(hosts):
        raise AnsibleFilterError("node names: %d given for %d hosts" % (len(names), len(hosts)))
    return [(h, n or h) for h, n in zip(hosts, names)]


def node_overlay_pending(planned, hosts, names, skip_unchanged=True, nodes=False):
    """``node_overlay_planned | liqo.fabric.node_overlay_pending(hosts, node_names, true)`` -> hosts to apply;
    with ``nodes=true``: host -> its Node's planned state (overlay_dataplane_batch's ``hosts``)."""
    if not isinstance(planned, dict):
        raise AnsibleFilterError("node_overlay_pending: the input is not an overlay_plan result")
    pairs = _pairs(hosts, names)
    strangers = [node for dummy, node in pairs if node not in (planned.get("hosts") or {})]
    if strangers:
        raise AnsibleFilterError("node_overlay_node_name: %s not a Node of the cluster (%s)"
                                 % (", ".join(strangers), ", ".join(sorted(planned.get("hosts") or {}))))
    chosen = pending_hosts(planned, pairs, bool(skip_unchanged))
    if not nodes:
        return chosen
    node_of = dict(pairs)
    return {host: planned["hosts"][node_of[host]] for host in chosen}


def node_overlay_record(planned, hosts, names, results, batched=None):
    """``node_overlay_planned | liqo.fabric.node_overlay_record(hosts, names, results[, batched])`` -> the record to keep.

    `results`: each host's registered overlay_dataplane result ({} or undefined-as-default when it did not run);
    `batched`: host -> result of the hosts overlay_dataplane_batch applied (used where a host has no result of its own)."""
    if not isinstance(planned, dict):
        raise AnsibleFilterError("node_overlay_record: the input is not an overlay_plan result")
    pairs = _pairs(hosts, names)
    results = list(results or [])
    if len(results) != len(pairs):
        raise AnsibleFilterError("node_overlay_record: %d results given for %d hosts" % (len(results), len(pairs)))
    batched = batched or {}
    results = [res if isinstance(res, dict) and res and not res.get("skipped") else batched.get(host)
               for (host, dummy), res in zip(pairs, results)]
    tried = [(node, res) for (dummy, node), res in zip(pairs, results)
             if isinstance(res, dict) and res and not res.get("skipped")]
    return record_after(planned, [node for node, res in tried if not res.get("failed")], [node for node, dummy in tried])


class FilterModule:  # pylint: disable=too-few-public-methods
    """liqo.fabric node_overlay filters."""

    def filters(self):
        return {"node_overlay_pending": node_overlay_pending, "node_overlay_record": node_overlay_record}
