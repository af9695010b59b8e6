#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: ipam
short_description: Allocate remapped CIDRs for remote clusters' Configurations
version_added: 0.1.0
description:
  - Reads every C(Configuration) (networking.liqo.io) of the cluster, keeps each remote pod and external CIDR
    as it is when it overlaps nothing taken locally, and otherwise allocates the first free prefix of the same
    length in pool order. Writes the result to C(status.remote.cidr.pod) and C(status.remote.cidr.external)
    (the REMAPPED POD CIDR column) with a C(NetworkCIDRsConfigured) condition.
  - The local pod CIDRs, the service CIDR, the external and internal CIDRs and the reserved subnets are taken
    first and never handed out.
  - State lives in the Kubernetes API, in a ledger ConfigMap C(liqo/liqo-fabric-ipam) written with its
    resourceVersion, so two concurrent allocators never hand out the same prefix; deleting a Configuration
    releases its prefixes on the next run.
  - A Configuration that cannot be served (pools exhausted or too small, invalid remote CIDR size) gets a C(False)
    condition whose reason and message name the field and the value. It keeps the allocation it holds, in the
    ledger and in its status (a refused spec or pool change never takes a live connection down); one that never
    had any gets nothing.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
  - liqo.fabric.kube
options:
  namespace:
    description: Only reconcile the Configurations of this namespace (default all namespaces).
    type: str
  pod_cidrs:
    description:
      - The local cluster's pod CIDR(s). This and the next four options default to the values in ConfigMap
        C(liqo/liqo-fabric-network) (written by C(liqo.fabric.install)).
    type: list
    elements: str
  service_cidr:
    description: The local cluster's service CIDR.
    type: str
  external_cidr:
    description: The local external CIDR (C(10.70.0.0/16) when neither given nor configured).
    type: str
  internal_cidr:
    description: The local internal CIDR, for overlay and gateway addresses (C(10.80.0.0/16) when neither given nor configured).
    type: str
  reserved:
    description: Subnets that must never be handed out (e.g. the node network).
    type: list
    elements: str
  pools:
    description: Address pools remapped CIDRs are taken from, in order of preference.
    type: list
    elements: str
    default: [10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16]
  fail_on_allocation_error:
    description:
      - Fail the task when a Configuration could not be served (after its C(False) condition was written).
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Remap the pod CIDRs of every peered cluster
  liqo.fabric.ipam:
    kubeconfig: /etc/liqo/kubeconfig
    pod_cidrs: [10.243.0.0/16]
    service_cidr: 10.96.0.0/12
    reserved: [172.30.0.0/24]
  delegate_to: localhost
  register: ipam
"""

RETURN = r"""
assumed:
  description: Check mode only, consumed by the collection's action plugin (not shown in the task's result) the
    Configurations with the status they would get, for the next steps of the same check-mode run.
  returned: in check mode
  type: list
  elements: dict
allocations:
  description: Remapped CIDRs by Configuration (C(namespace/name)).
  returned: always
  type: dict
  sample: {"liqo-tenant-b/b": {"pod": "10.0.0.0/16", "external": "10.1.0.0/16"}}
errors:
  description:
    - Configurations that could not be served, with the condition reason and message, and C(kept) the
      remapped CIDRs they hold all the same (the allocation in use stays in the ledger and the status, so a
      refused spec or pool change never takes a live connection down; C({}) when there was none).
  returned: always
  type: dict
  sample: {"default/big": {"reason": "PoolsExhausted", "message": "spec.remote.cidr.pod: '10.0.0.0/8' ...",
                           "kept": {"pod": "10.0.0.0/16"}}}
released:
  description: Allocations released because their Configuration is gone.
  returned: always
  type: list
  elements: dict
status_updated:
  description: Configurations whose status was written (or would be, in check mode).
  returned: always
  type: list
  elements: str
conflict_retries:
  description: How many times a concurrent allocator's write forced a recompute.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.ipam.allocator import IpamError
from ansible_collections.liqo.fabric.plugins.module_utils.ipam.store import local_config, reconcile
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            namespace=dict(type="str"),
            pod_cidrs=dict(type="list", elements="str"),
            service_cidr=dict(type="str"),
            external_cidr=dict(type="str"),
            internal_cidr=dict(type="str"),
            reserved=dict(type="list", elements="str"),
            pools=dict(type="list", elements="str", default=["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]),
            fail_on_allocation_error=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["pod_cidrs"] is not None and not p["pod_cidrs"]:
        module.fail_json(msg="pod_cidrs: at least one local pod CIDR is required (got an empty list)")
    given = dict((k, p[k]) for k in ("pod_cidrs", "service_cidr", "external_cidr", "internal_cidr", "reserved", "pools"))
    res = with_kube(module, lambda kube: reconcile(kube, local_config(kube, given), namespace=p["namespace"],
                                                   check_mode=module.check_mode), user_errors=(IpamError,))
    out = res.as_dict()
    if module.check_mode:  # for the next steps of a check-mode run (plugin_utils/check_plan.py)
        out["assumed"] = res.assumed
    if module._diff:
        out["diff"] = {"before": {"allocations": (res.ledger_before or {}).get("allocations", [])},
                       "after": {"allocations": (res.ledger_after or {}).get("allocations", [])}}
    if res.errors and p["fail_on_allocation_error"]:
        msgs = "; ".join("%s: %s" % (owner, e["message"]) for owner, e in sorted(res.errors.items()))
        module.fail_json(msg="IPAM could not serve %d Configuration(s): %s" % (len(res.errors), msgs), **out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
