#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: overlay_incluster
short_description: Plan the in-cluster overlay of this host (a node agent's node or a gateway pod)
version_added: 0.1.0
description:
  - Reads the cluster (Nodes, the gateways and their pods, Configurations, the network ConfigMap) and returns
    what M(liqo.fabric.overlay_dataplane) must apply on this host so that the pods of the cluster reach the
    remote clusters through the active gateway pod and back. Writes nothing in the API.
  - O(side=node) (the node agent, host network) applies one overlay link from the node to the active pod's IP of
    every gateway of the cluster, each gateway's remote (remapped) CIDRs routed over its own link in table 18952
    with their rules, and the masquerade bypass. A cluster peered with several remotes has one gateway per peering.
  - O(side=gateway) (the gateway pod itself) applies one link to every node, each node's pod CIDR routed back over
    it, selected for what comes out of the tunnels (O(tunnel_interfaces)). The active pod and a warm standby
    (any live pod of the gateway) build it; the nodes' links point to the active pod only. Empty for a pod being
    deleted.
  - Internal addresses are computed, never recorded; a node's from its C(spec.podCIDR), the gateway's is the
    first address of the internal CIDR. So is each link's VNI (4096 + the node's slot + 65536 * the gateway's
    offset), the offset from the gateways of the namespace alone (0 for the oldest, the VNIs of a lone gateway).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
attributes:
  check_mode:
    details: Read-only.
options:
  side:
    description: Whose overlay.
    type: str
    choices: [node, gateway]
    required: true
  node_name:
    description: O(side=node), the Node of this host.
    type: str
  gateway:
    description: O(side=gateway), the pod's gateway (C(kind), C(namespace), C(name)).
    type: dict
  pod_name:
    description: O(side=gateway), the name of this pod.
    type: str
  tunnel_interfaces:
    description: O(side=gateway), the WireGuard interfaces of the pod.
    type: list
    elements: str
    default: []
  link_type:
    description: Link type of the overlay.
    type: str
    choices: [auto, geneve, vxlan]
    default: auto
  mtu:
    description:
      - MTU of the overlay links (default the gateway's C(spec.mtu), the tunnel's, else 1340); above the tunnel's,
        the "fragmentation needed" errors of the gateway pod would be lost on its node.
    type: int
  masquerade_bypass:
    description: O(side=node), keep the masquerade of the node away from the pods' cross-cluster traffic.
    type: bool
    default: true
  pod_port_route:
    description:
      - O(side=node), on the node the active gateway pod runs on, reach that pod over its own bridge port (a
        route C(<pod IP>/32 dev <port>) in table 18952, its rule and a permanent neighbour) instead of through the
        CNI bridge, which cuts the other nodes' encapsulated packets into MTU-sized ones. Nothing changes for a
        pod that is not behind a bridge.
      - Set false when a firewall of the node accepts forwarded traffic to pods only by the bridge's name (for
        example an C(-o cni0) rule with a DROP policy).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: The overlay of this node (node agent)
  liqo.fabric.overlay_incluster:
    side: node
    node_name: "{{ lookup('ansible.builtin.env', 'NODE_NAME') }}"
  register: planned

- name: Apply it
  liqo.fabric.overlay_dataplane:
    node: "{{ planned.host }}"
"""

RETURN = r"""
host:
  description: The plan of this host, the O(liqo.fabric.overlay_dataplane#module:node) of M(liqo.fabric.overlay_dataplane).
  returned: success
  type: dict
gateway:
  description: C(namespace/name) of the gateway the overlay leads to (null when there is none); on a node, the
    first of RV(gateways) with an active pod, else the first. Set while RV(gateway_pod) is null (between two
    pods), when the node keeps its rules and blackholes the remote CIDRs.
  returned: success
  type: str
gateway_pod:
  description: The active gateway pod (C(name), C(ip), C(node)), null when none runs.
  returned: success
  type: dict
remote_cidrs:
  description: The remote (remapped) pod CIDRs routed to the gateway.
  returned: success
  type: list
  elements: str
gateways:
  description: Every gateway the overlay leads to, by namespace and name (C(gateway), C(pod), C(remote_cidrs),
    C(vni_offset)); on a gateway pod, its own.
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube
from ansible_collections.liqo.fabric.plugins.module_utils.overlay.incluster import (
    OverlayPlanError, gather, plan_gateway, plan_node)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            side=dict(type="str", choices=["node", "gateway"], required=True),
            node_name=dict(type="str"),
            gateway=dict(type="dict"),
            pod_name=dict(type="str"),
            tunnel_interfaces=dict(type="list", elements="str", default=[]),
            link_type=dict(type="str", choices=["auto", "geneve", "vxlan"], default="auto"),
            mtu=dict(type="int"),
            masquerade_bypass=dict(type="bool", default=True),
            pod_port_route=dict(type="bool", default=True),
        ),
        required_if=[("side", "node", ("node_name",)), ("side", "gateway", ("gateway", "pod_name"))],
        supports_check_mode=True,
    )
    p = module.params
    if p["side"] == "gateway":
        missing = [k for k in ("kind", "namespace", "name") if not (p["gateway"] or {}).get(k)]
        if missing:
            module.fail_json(msg="gateway: %r lacks %s" % (p["gateway"], ", ".join(missing)))

    def work(kube):
        if p["side"] == "node":
            node = kube.get("Node", None, p["node_name"])
            if node is None:
                raise OverlayPlanError("node_name: '%s' is not a Node of the cluster" % p["node_name"])
            facts = gather(kube)
            return facts, plan_node(node, facts, p["link_type"], p["mtu"], p["masquerade_bypass"],
                                    p["pod_port_route"])
        facts = gather(kube, {k: p["gateway"][k] for k in ("kind", "namespace", "name")})
        return facts, plan_gateway(kube.list("Node"), facts, p["pod_name"], p["tunnel_interfaces"], p["link_type"],
                                   p["mtu"])

    facts, host = with_kube(module, work, user_errors=(OverlayPlanError,))
    module.exit_json(changed=False, host=host, gateway=facts["gateway"], gateway_pod=facts["pod"],
                     remote_cidrs=facts["remote_cidrs"],
                     gateways=[{k: g[k] for k in ("gateway", "pod", "remote_cidrs", "vni_offset")}
                               for g in facts["gateways"]])


if __name__ == "__main__":
    main()
