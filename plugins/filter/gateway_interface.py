# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gateway_interface: the WireGuard interface name of a gateway on its host (module_utils/gateway/plan.py), for plays that
address a gateway's host-side objects without planning it again (the key rotation's probe holds)."""
from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import KINDS, gateway_id, interface_name

DOCUMENTATION = r"""
name: gateway_interface
short_description: The WireGuard interface name of a gateway
version_added: 0.1.0
description:
  - Returns the name of the WireGuard interface that the gateway role builds for a gateway
    (C(lwg) and 8 hex digits, unique per host), from the id of the gateway's cluster and the gateway's namespace,
    kind and name.
author: liqo.fabric developers (@liqo-fabric)
options:
  _input:
    description: The id of the cluster the gateway belongs to.
    type: str
    required: true
  namespace:
    description: The gateway's namespace (the tenant namespace).
    type: str
    required: true
  kind:
    description: C(GatewayServer) or C(GatewayClient).
    type: str
    required: true
  name:
    description: The gateway's name.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: The interface of the cluster's GatewayClient for cluster b
  ansible.builtin.debug:
    msg: "{{ cluster_id | liqo.fabric.gateway_interface('liqo-tenant-b', 'GatewayClient', 'b') }}"
"""

RETURN = r"""
_value:
  description: The interface name.
  type: str
"""


def gateway_interface(cluster_id, namespace, kind, name):
    if kind not in KINDS:
        raise AnsibleFilterError("gateway_interface: kind %r is not one of %s" % (kind, ", ".join(sorted(KINDS))))
    for field, value in (("cluster id", cluster_id), ("namespace", namespace), ("name", name)):
        if not value or not isinstance(value, str):
            raise AnsibleFilterError("gateway_interface: %s %r is not a non-empty string" % (field, value))
    return interface_name(gateway_id(cluster_id, namespace, name, kind))


class FilterModule:  # pylint: disable=too-few-public-methods
    def filters(self):
        return {"gateway_interface": gateway_interface}
