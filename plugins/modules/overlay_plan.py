#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: overlay_plan
short_description: Plan the in-cluster overlay (links, routes, rules) of every node of a cluster
version_added: 0.1.0
description:
  - Reads the cluster's Nodes, running Pods, Configurations (remapped remote pod CIDRs) and gateways, and
    returns for every node the overlay links (one per node and gateway host pair, Geneve or VXLAN), the routes
    of table 18952 and the policy rules it must hold, plus the symmetric routes of the active gateway host.
  - Gives every node an internal address from the internal CIDR, recorded in its annotation
    C(networking.liqo.io/internal-ip) so it never changes and never collides.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.kube
attributes:
  check_mode:
    support: full
    details: In check mode new internal addresses are planned but not recorded.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  gateway_hosts:
    description: Nodes that can host the gateway. Default the nodes labelled C(liqo.io/gateway-host=true).
    type: list
    elements: str
  active_gateway:
    description: The gateway host in charge. Default the first of O(gateway_hosts) in name order.
    type: str
  link_type:
    description: Overlay link kind; V(auto) is Geneve where the kernel has it, VXLAN otherwise.
    type: str
    choices: [auto, geneve, vxlan]
    default: auto
  mtu:
    description: MTU of the overlay links (must exceed the tunnel MTU).
    type: int
    default: 1450
  masquerade_bypass:
    description: Plan the rules that keep a CNI masquerade away from pod traffic to the remote clusters.
    type: bool
    default: true
  table:
    description: Routing table of the overlay on the nodes; part of each node's RV(digests).
    type: int
    default: 18952
  record_name:
    description: ConfigMap whose C(data) maps node names to the digest of their last applied overlay (RV(applied)).
    type: str
    default: liqo-fabric-overlay-applied
  record_namespace:
    description: Namespace of O(record_name).
    type: str
    default: liqo
"""

EXAMPLES = r"""
- name: Plan the overlay
  liqo.fabric.overlay_plan:
    kubeconfig: /etc/liqo/kubeconfig
  delegate_to: localhost
  run_once: true
  register: overlay
"""

RETURN = r"""
hosts:
  description: Per node name, its C(links), C(routes) (table 18952), C(rules), C(bypass) and C(role).
  returned: always
  type: dict
assign:
  description: Internal address of every node.
  returned: always
  type: dict
annotated:
  description: Nodes that got a new internal address (recorded in their annotation unless in check mode).
  returned: always
  type: dict
active_gateway:
  description: The gateway host in charge.
  returned: always
  type: str
remote_cidrs:
  description: The remapped remote pod CIDRs routed through the gateway.
  returned: always
  type: list
  elements: str
digests:
  description:
    - Per node name, a digest of its desired overlay state (its RV(hosts) entry and O(table)).
    - Equal to the node's RV(applied) digest when that state was applied and recorded since.
  returned: always
  type: dict
applied:
  description:
    - Per node name, the digest recorded in O(record_name) after the node's last apply (empty when none). The
      C(node_overlay) role skips a node whose digest did not change when C(node_overlay_skip_unchanged) is true.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.kube_client import (
    KUBE_ARG_SPEC, LIQO_NAMESPACE, REMOTE_CLUSTER_ID_LABEL, with_kube)
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import cidr_fields
from ansible_collections.liqo.fabric.plugins.module_utils.gateway_api import built_gateways
from ansible_collections.liqo.fabric.plugins.module_utils.overlay_plan import (
    INTERNAL_IP_ANNOTATION, host_digest, plan)

GATEWAY_LABEL = "liqo.io/gateway-host"


def gather(kube):
    nodes = kube.list("Node")
    pods = kube.list("Pod")
    cluster_id = kube.cluster_id()
    confs = kube.list("Configuration")
    tunnels, peers = [], set()
    # only the gateways the gateway role builds: not being deleted (a finalizer run removes their overlay),
    # ready, with valid manifests (the same plan as liqo.fabric.gateway_plan)
    for gw in built_gateways(kube, cluster_id, confs):
        tunnels.append(gw["interface"])
        peers.add(gw["remote_cluster_id"])
    # only the remote clusters this cluster has a gateway to: a Configuration alone routes nothing
    remote = sorted({cidr_fields(((c.get("status") or {}).get("remote") or {}).get("cidr"))["pod"]
                     for c in confs
                     if (c["metadata"].get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL) in peers} - {None})
    net = (kube.get("ConfigMap", LIQO_NAMESPACE, "liqo-fabric-network") or {}).get("data") or {}
    return nodes, pods, remote, tunnels, net


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            gateway_hosts=dict(type="list", elements="str"),
            active_gateway=dict(type="str"),
            link_type=dict(type="str", choices=["auto", "geneve", "vxlan"], default="auto"),
            mtu=dict(type="int", default=1450),
            masquerade_bypass=dict(type="bool", default=True),
            table=dict(type="int", default=18952),
            record_name=dict(type="str", default="liqo-fabric-overlay-applied"),
            record_namespace=dict(type="str", default="liqo"),
        ),
        supports_check_mode=True,
    )
    p = module.params

    def work(kube):
        nodes, pods, remote, tunnels, net = gather(kube)
        gateways = p["gateway_hosts"]
        if gateways is None:
            gateways = [n["metadata"]["name"] for n in nodes
                        if (n["metadata"].get("labels") or {}).get(GATEWAY_LABEL) == "true"]
        active = p["active_gateway"] or (sorted(gateways)[0] if gateways else None)
        if not tunnels:  # no gateway in the cluster: no overlay at all (nothing left after disconnect)
            gateways, active = [], None
        result = plan(nodes, pods, gateways, active, remote, tunnels, net.get("internalCIDR") or "10.80.0.0/16",
                      p["link_type"], p["mtu"], p["masquerade_bypass"],
                      [c for c in (net.get("podCIDR") or "").split(",") if c]).to_result()
        if result["annotate"] and not module.check_mode:
            for name, ip in result["annotate"].items():
                kube.patch("Node", None, name, {"metadata": {"annotations": {INTERNAL_IP_ANNOTATION: ip}}})
        record = (kube.get("ConfigMap", p["record_namespace"], p["record_name"]) or {}).get("data") or {}
        return result, active, remote, {name: record.get(name, "") for name in result["hosts"]}

    result, active, remote, applied = with_kube(module, work, user_errors=(ValueError,))
    digests = {name: host_digest(host, p["table"]) for name, host in result["hosts"].items()}
    module.exit_json(changed=bool(result["annotate"]), hosts=result["hosts"], assign=result["assign"],
                     annotated=result["annotate"], active_gateway=active, remote_cidrs=remote,
                     digests=digests, applied=applied)


if __name__ == "__main__":
    main()
