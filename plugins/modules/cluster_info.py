#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_info
short_description: Read a cluster's identity and fabric network configuration
version_added: 0.1.0
description:
  - Returns the cluster id and name (ConfigMap C(liqo/liqo-clusterid-configmap), keys C(CLUSTER_ID) and
    C(CLUSTER_NAME), written by M(liqo.fabric.cluster_identity)) and the network
    configuration C(liqo.fabric.install) wrote (ConfigMap C(liqo/liqo-fabric-network)) in one call.
  - Fails with a message naming what is missing.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
options:
  require_network:
    description: Fail when the network configuration is missing.
    type: bool
    default: true
  tenant_namespaces:
    description:
      - Also return the namespaces named C(liqo-tenant-*) (one list of the cluster's Namespaces), for the
        P(liqo.fabric.tenant#filter) filter that names a remote cluster's tenant namespace.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Who is the remote cluster
  liqo.fabric.cluster_info:
    kubeconfig: /etc/liqo/remote.kubeconfig
  register: remote
"""

RETURN = r"""
cluster_id:
  description: The cluster id.
  returned: success
  type: str
cluster_name:
  description:
    - The cluster's friendly name as a DNS label of at most 51 characters (C(CLUSTER_NAME), made a label if it is
      not one). When the ConfigMap has no C(CLUSTER_NAME) (an older install, or a Liqo whose ConfigMap has only
      C(CLUSTER_ID)), C(cluster-<first 8 characters of the id>) for a UUID id, else the id made a label.
  returned: success
  type: str
  sample: rome
tenant_namespaces:
  description: The namespaces named C(liqo-tenant-*) and their C(liqo.io/remote-cluster-id) label (or C('')).
  returned: when O(tenant_namespaces=true)
  type: dict
  sample: {liqo-tenant-rome: 4b6f2a7e-2d1c-4a55-9a1e-7f1c2b3d4e5f}
network:
  description: podCIDR, serviceCIDR, externalCIDR, internalCIDR and reserved (comma separated), as configured.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.api.tenant_names import tenant_namespaces
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, LIQO_NAMESPACE, with_kube

NETWORK_CONFIGMAP = "liqo-fabric-network"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            require_network=dict(type="bool", default=True),
            tenant_namespaces=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    (cluster_id, cluster_name), cm, where, tenants = with_kube(
        module, lambda kube: (kube.cluster_identity(), kube.get("ConfigMap", LIQO_NAMESPACE, NETWORK_CONFIGMAP), kube.where(),
                              tenant_namespaces(kube.list("Namespace")) if p["tenant_namespaces"] else None))
    network = (cm or {}).get("data") or {}
    if p["require_network"] and not network.get("podCIDR"):
        module.fail_json(msg="network configuration: ConfigMap %s/%s is missing or has no podCIDR in the cluster of "
                             "%s (run liqo.fabric.install)" % (LIQO_NAMESPACE, NETWORK_CONFIGMAP, where))
    extra = {} if tenants is None else {"tenant_namespaces": tenants}
    module.exit_json(changed=False, cluster_id=cluster_id, cluster_name=cluster_name, network=network, **extra)


if __name__ == "__main__":
    main()
