#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_delete
short_description: Delete gateways, with or without a running controller
version_added: 0.1.0
description:
  - Deletes the GatewayServers and GatewayClients of a namespace (or one of them) and waits until they are gone.
  - The controller puts its finalizer C(networking.liqo.io/fabric-gateway) on every gateway and lets a deleted one
    go after its teardown. While a controller holds its Lease (O(lease_namespace)/O(lease_name)), the module waits
    for it, as a plain delete would.
  - While nobody holds that Lease (no Lease, a released one, or one whose holder has not renewed it within its
    C(leaseDurationSeconds), by its C(renewTime) or as watched here), or with O(force=true), the module does the
    finalizer's API work itself (in the cluster, the Deployment and Service rendered for the gateway; agentless, no
    API object) and removes the finalizer. A controller that stops while the module waits is noticed when its Lease
    expires.
  - The dataplane of agentless gateway hosts is not the module's. The gateway role with C(gateway_state=absent)
    removes it; C(liqo.fabric.disconnect) runs it on the gateway hosts before this module.
  - Check mode deletes and waits for nothing; it shows the gateways that would be deleted, reads the Lease and says
    whose finalizer would be removed here and what the teardown would delete.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
  - liqo.fabric.kube
options:
  namespace:
    description: The namespace of the gateways (a tenant namespace).
    type: str
    required: true
  name:
    description: Only the gateway of this name (of each of O(kinds)).
    type: str
  kinds:
    description: The gateway kinds to delete.
    type: list
    elements: str
    choices: [GatewayServer, GatewayClient]
    default: [GatewayServer, GatewayClient]
  force:
    description:
      - Do the finalizer's work and remove the finalizer even while a controller holds its Lease (a controller that
        is stuck, or one whose Lease looks live but is not). A live controller's own teardown then finds nothing
        left to do.
    type: bool
    default: false
  lease_namespace:
    description: The namespace of the controller's Lease (the controller's C(--lease-namespace)).
    type: str
    default: liqo
  lease_name:
    description: The name of the controller's Lease.
    type: str
    default: liqo-fabric-controller
  wait_timeout:
    description: Seconds to wait for the gateways to be gone.
    type: int
    default: 120
seealso:
  - module: liqo.fabric.k8s_apply
"""

EXAMPLES = r"""
- name: The gateways of a tenant namespace, by the controller or, with none running, here
  liqo.fabric.gateway_delete:
    kubeconfig: /etc/liqo/kubeconfig
    namespace: liqo-tenant-paris
  register: deleted

- name: Whatever the controller's Lease says
  liqo.fabric.gateway_delete:
    kubeconfig: /etc/liqo/kubeconfig
    namespace: liqo-tenant-paris
    kinds: [GatewayClient]
    force: true
"""

RETURN = r"""
deleted:
  description: C(Kind namespace/name) of each gateway deleted (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [GatewayClient liqo-tenant-paris/paris]
finalized:
  description: The gateways whose finalizer the module removed after doing its work (or would, in check mode).
  returned: always
  type: list
  elements: str
torn_down:
  description: C(Kind namespace/name) of what the finalizer's work deleted (the in-cluster Deployment and Service).
  returned: always
  type: list
  elements: str
controller:
  description:
    - The controller's Lease as last read, C(null) when there was no gateway to delete. C(held) is C(null) when the
      Lease could not be read (the module then waits for the controller unless O(force=true)).
  returned: always
  type: dict
  sample: {lease: liqo/liqo-fabric-controller, holder: "", held: false, renewed_seconds_ago: 312.4,
           duration_seconds: 1, reason: "Lease liqo/liqo-fabric-controller is released (no holder)"}
msg:
  description: Who let the gateways go, in a sentence.
  returned: always
  type: str
resources:
  description: The gateways as they were before the deletion (C(managedFields) left out).
  returned: always
  type: list
  elements: dict
assumed:
  description: Check mode only, consumed by the collection's action plugin (not shown in the task's result) the
    gateways this run would have deleted, for the next steps of the same check-mode run.
  returned: in check mode
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.finalizer import GatewayDeleteError, delete_gateways
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube
from ansible_collections.liqo.fabric.plugins.module_utils.kube.lease import LeaseWatch


def message(out, check_mode):
    if not out["deleted"]:
        return "no gateway to delete"
    would = "would be " if check_mode else ""
    if out["finalized"]:
        reason = out["controller"]["reason"] if out["controller"]["held"] is not True else "force=true"
        return "%s: %storn down and let go here (%s)%s" % (
            ", ".join(out["finalized"]), would, reason,
            "; its teardown deleted " + ", ".join(out["torn_down"]) if out["torn_down"] else "")
    if out["controller"] and out["controller"]["held"]:
        return "%s: %slet go by the controller (%s)" % (", ".join(out["deleted"]), would, out["controller"]["reason"])
    return "%s: %sdeleted" % (", ".join(out["deleted"]), would)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            namespace=dict(type="str", required=True),
            name=dict(type="str"),
            kinds=dict(type="list", elements="str", choices=["GatewayServer", "GatewayClient"],
                       default=["GatewayServer", "GatewayClient"]),
            force=dict(type="bool", default=False),
            lease_namespace=dict(type="str", default="liqo"),
            lease_name=dict(type="str", default="liqo-fabric-controller"),
            wait_timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["wait_timeout"] < 0:
        module.fail_json(msg="wait_timeout: must be >= 0, got %s" % p["wait_timeout"])

    def work(kube):
        lease = LeaseWatch(kube, p["lease_namespace"], p["lease_name"])
        return delete_gateways(kube, p["namespace"], lease, kinds=p["kinds"], name=p["name"], force=p["force"],
                               timeout=p["wait_timeout"], check_mode=module.check_mode)

    out = with_kube(module, work, user_errors=(GatewayDeleteError,))
    diffs = out.pop("diffs")
    result = dict(out, changed=bool(out["deleted"]), msg=message(out, module.check_mode))
    if module.check_mode:  # what a check-mode run's next steps see (plugin_utils/check_plan.py)
        result["assumed"] = [dict(r, absent=True) for r in out["resources"]]
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
