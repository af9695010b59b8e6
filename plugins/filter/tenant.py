# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tenant: the tenant namespace of a remote cluster and the name of the objects in it (module_utils/api/tenant_names)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.module_utils.api.tenant_names import TenantNameError, tenant as tenant_names

DOCUMENTATION = r"""
name: tenant
short_description: The tenant namespace of a remote cluster and the name of the objects in it
version_added: 0.1.0
description:
  - From the C(tenant_namespaces) that M(liqo.fabric.cluster_info) returned for a cluster, the remote cluster's id
    and friendly name, returns C(namespace) (C(liqo-tenant-<name>)) and C(name) (the name of the Configuration,
    gateway, PublicKey and Connection for that cluster, which is the namespace's name without C(liqo-tenant-)).
  - A namespace labelled C(liqo.io/remote-cluster-id=<id>) is taken whatever its name (names stay when the
    friendly name changes); an unlabelled C(liqo-tenant-<id>) (made by liqo.fabric before it used names) too.
    When C(liqo-tenant-<name>) belongs to another cluster, C(liqo-tenant-<name>-<6 hex of the id's sha256>);
    when that is taken too, the filter fails naming both clusters. See docs/kubeconfig.md.
author: liqo.fabric developers (@liqo-fabric)
options:
  _input:
    description: The cluster's tenant namespaces, C({name -> its liqo.io/remote-cluster-id label or ''}).
    type: dict
    required: true
  remote_cluster_id:
    description: The remote cluster's id.
    type: str
    required: true
  remote_cluster_name:
    description: The remote cluster's friendly name (made a DNS label; from the id when empty).
    type: str
"""

EXAMPLES = r"""
- name: Where the objects for the remote cluster go
  ansible.builtin.set_fact:
    tenant: "{{ local.tenant_namespaces | liqo.fabric.tenant(remote.cluster_id, remote.cluster_name) }}"
"""

RETURN = r"""
_value:
  description: C(namespace) and C(name).
  type: dict
  sample: {namespace: liqo-tenant-rome, name: rome}
"""


def tenant(existing, remote_cluster_id, remote_cluster_name=None):
    try:
        return tenant_names(existing, remote_cluster_id, remote_cluster_name)
    except TenantNameError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"tenant": tenant}
