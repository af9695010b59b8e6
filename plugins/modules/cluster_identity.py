#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_identity
short_description: Give a cluster its identity (cluster id and name) once
version_added: 0.1.0
description:
  - Ensures ConfigMap C(liqo/liqo-clusterid-configmap), where Liqo keeps a cluster's identity. C(CLUSTER_ID) is a
    UUID written the first time and never changed afterwards; an existing one (for example from a Liqo install) is
    kept as it is.
  - C(CLUSTER_NAME) is the cluster's friendly name. It is set when missing (to O(cluster_name), else a name made
    from the kubeconfig's name of the cluster), and changed only when O(cluster_name) asks for another one.
  - The namespace C(liqo) must exist (C(liqo.fabric.install) creates it first).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
  - liqo.fabric.kube
options:
  cluster_name:
    description:
      - The friendly name. A DNS label of at most 51 characters (tenant namespaces are C(liqo-tenant-<name>)).
    type: str
"""

EXAMPLES = r"""
- name: Identity of the cluster, named after the kubeconfig's cluster
  liqo.fabric.cluster_identity:
    kubeconfig: /etc/liqo/a.kubeconfig

- name: Identity with a chosen name
  liqo.fabric.cluster_identity:
    kubeconfig: /etc/liqo/a.kubeconfig
    cluster_name: rome
"""

RETURN = r"""
cluster_id:
  description: The cluster id (in check mode, for a new cluster, the one that would be written).
  returned: success
  type: str
  sample: 4b6f2a7e-2d1c-4a55-9a1e-7f1c2b3d4e5f
cluster_name:
  description: The friendly name.
  returned: success
  type: str
  sample: rome
created:
  description: Whether the ConfigMap was created by this run.
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.api import cluster_identity
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def main():
    module = AnsibleModule(argument_spec=dict(**KUBE_ARG_SPEC, cluster_name=dict(type="str")),
                           supports_check_mode=True)
    res = with_kube(module, lambda kube: cluster_identity.ensure(kube, module.params["cluster_name"], module.check_mode),
                    user_errors=(cluster_identity.IdentityError,))
    out = {k: res[k] for k in ("changed", "cluster_id", "cluster_name", "created")}
    if module._diff and res["changed"]:  # pylint: disable=protected-access
        out["diff"] = {"before": res["before"], "after": res["after"]}
    module.exit_json(**out)


if __name__ == "__main__":
    main()
