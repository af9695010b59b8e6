#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_incluster
short_description: One gateway of the in-cluster fabric, from the controller's or from its own pod's side
version_added: 0.1.0
description:
  - O(side=controller) (the controller, with the local connection in its pod) checks the C(GatewayServer)/C(GatewayClient)
    (the same plan as M(liqo.fabric.gateway_plan)), creates its key Secret once and applies the Deployment and
    Service its template renders to (server-side apply, owned by the gateway); O(state=absent) deletes them.
    A change that would roll the Deployment waits while the node-agent DaemonSet (label
    C(app.kubernetes.io/name=liqo-fabric-node-agent)) is not rolled out, at most 600 s (RV(held)), since a hand-over to
    a new gateway pod while a node's agent restarts would cut that node's pods off until the agent is back.
  - O(side=pod) (the gateway pod, in gateway mode) returns the plan of its own gateway as the pod applies it
    (RV(gateways)), for M(liqo.fabric.gateway_dataplane), M(liqo.fabric.tunnel_probe) and
    M(liqo.fabric.gateway_publish). WireGuard listens on the port the Service targets, and a C(GatewayServer)
    publishes the Service's endpoint (NodePort, the address of the pod's node and the allocated nodePort;
    LoadBalancer, the load balancer's address and the Service port).
  - A node's address is its C(liqo.io/gateway-address) annotation, else its ExternalIP, else its InternalIP.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
attributes:
  check_mode:
    details: Nothing is created, applied or deleted; the apply is a server-side dry run.
options:
  side:
    description: Whose side of the gateway.
    type: str
    choices: [controller, pod]
    required: true
  kind:
    description: Kind of the gateway.
    type: str
    choices: [GatewayServer, GatewayClient]
    required: true
  namespace:
    description: Namespace of the gateway.
    type: str
    required: true
  name:
    description: Name of the gateway.
    type: str
    required: true
  state:
    description: V(absent) (controller side) deletes the Deployment and Service rendered for the gateway.
    type: str
    choices: [present, absent]
    default: present
  node_name:
    description: Pod side, for a C(GatewayServer), the node the pod runs on (its address is published).
    type: str
  internal_cidr:
    description: The local internal CIDR; the gateway's internal endpoint is its first address.
    type: str
    default: 10.80.0.0/16
  include_private_keys:
    description: Pod side, return RV(private_keys). The task must then have C(no_log=true); the module refuses otherwise.
    type: bool
    default: false
  standby:
    description:
      - Pod side, the plan of a warm standby pod (not the Lease holder). It builds the whole tunnel, but the peer of a
        C(GatewayClient) has no endpoint and no keepalive, so the standby never reaches the peer (two live pods with one
        key would make the peer's endpoint flap). Taking over is then one change of the peer, not a new tunnel.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Key Secret, Deployment and Service of a GatewayServer (the controller)
  liqo.fabric.gateway_incluster:
    side: controller
    kind: GatewayServer
    namespace: default
    name: server

- name: The plan of this gateway pod
  liqo.fabric.gateway_incluster:
    side: pod
    kind: GatewayServer
    namespace: default
    name: server
    node_name: "{{ lookup('ansible.builtin.env', 'NODE_NAME') }}"
    include_private_keys: true
  no_log: true
  register: gateway_planned
"""

RETURN = r"""
gateways:
  description: Pod side, the plan of the pod's gateway (as RV(liqo.fabric.gateway_plan#module:gateways)); controller side, the plan checked.
  returned: success
  type: list
  elements: dict
applied:
  description: Controller side, the objects applied (V(present)) or deleted (V(absent)), as C(Kind/name).
  returned: success
  type: list
  elements: str
held:
  description:
    - Controller side, the Deployment whose change would roll it while the node agents roll, left as it is, as
      C(Kind/name) -> the reason. It is applied when the node-agent DaemonSet has rolled out (at most 600 s later).
  returned: success
  type: dict
  sample: {"Deployment/gw-server": "node agents rolling (liqo/liqo-fabric-node-agent: 1 of 3 agents updated, 2 available)"}
private_keys:
  description: Private key of the gateway by interface name.
  returned: when O(include_private_keys=true)
  type: dict
errors:
  description: On a bad gateway, C(namespace/name) -> its reason and message (the controller's Degraded condition).
  returned: failure
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.incluster import (
    controller_side, controller_teardown, pod_side)
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            side=dict(type="str", choices=["controller", "pod"], required=True),
            kind=dict(type="str", choices=["GatewayServer", "GatewayClient"], required=True),
            namespace=dict(type="str", required=True),
            name=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            node_name=dict(type="str"),
            internal_cidr=dict(type="str", default="10.80.0.0/16"),
            include_private_keys=dict(type="bool", default=False),
            standby=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["include_private_keys"] and not module.no_log:
        module.fail_json(msg="include_private_keys: true requires no_log: true on the task (private keys)")
    where = "%s/%s" % (p["namespace"], p["name"])
    if p["side"] == "pod":
        plans, keys = with_kube(module, lambda kube: pod_side(kube, p["kind"], p["namespace"], p["name"], p["node_name"],
                                                              p["internal_cidr"], p["standby"]))
        result = dict(changed=False, gateways=plans, applied=[])
        if p["include_private_keys"]:
            result["private_keys"] = keys
        module.exit_json(**result)
    if p["state"] == "absent":
        deleted = with_kube(module, lambda kube: controller_teardown(kube, p["kind"], p["namespace"], p["name"],
                                                                     module.check_mode))
        module.exit_json(changed=bool(deleted), applied=deleted, gateways=[])
    out = with_kube(module, lambda kube: controller_side(kube, p["kind"], p["namespace"], p["name"], p["internal_cidr"],
                                                         module.check_mode))
    result = dict(changed=out["changed"], applied=out["applied"], held=out.get("held") or {},
                  gateways=[out["plan"]] if out["plan"] else [])
    if out["error"]:
        module.fail_json(msg="%s %s: %s" % (p["kind"], where, out["error"]["message"]),
                         errors={where: out["error"]}, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
