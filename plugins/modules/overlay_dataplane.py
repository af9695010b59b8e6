#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: overlay_dataplane
short_description: Apply the whole overlay of one host (links, routes, rules, masquerade bypass, pod ports) in one call
version_added: 0.1.0
description:
  - Takes what M(liqo.fabric.overlay_plan) planned for one host (C(hosts[<node>])) and makes the kernel hold
    exactly that, in one process instead of four module runs.
  - In order, the overlay links (as M(liqo.fabric.overlay_links) with the owned prefixes C(lovg) and C(lovn); any
    other link so named is deleted), the pods reached over their own bridge port (O(node.pod_ports)), the routes of
    table O(table) (as M(liqo.fabric.route_table)), the rules
    selecting that table (as M(liqo.fabric.route_rule)) and the nftables table C(liqo_fabric_overlay) holding
    the masquerade bypass (as M(liqo.fabric.nat_table); deleted when there is no bypass).
  - Every input is validated before the first write (messages name the field and the value), so bad input
    changes nothing. A second identical run reports C(changed=false) and writes nothing.
  - O(state=absent) removes the rules pointing at O(table), the routes of O(table), every C(lovg*) / C(lovn*)
    link, the nftables table C(liqo_fabric_overlay) and the neighbours of the pod ports.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
attributes:
  check_mode:
    details: Routes through links that do not exist yet are planned as additions (they cannot be checked against the kernel).
  diff_mode:
    details: The diff is text, one section per part (links, routes, rules, pod ports' neighbours, nftables table).
options:
  node:
    description:
      - The host's plan, C(hosts[<node>]) of M(liqo.fabric.overlay_plan). Ignored with O(state=absent).
    type: dict
    default: {}
    suboptions:
      links:
        description: Overlay links, each with the options of M(liqo.fabric.overlay_link); names start with C(lovg) or C(lovn).
        type: list
        elements: dict
        default: []
      routes:
        description: Routes of O(table), each with the options of O(liqo.fabric.route_table#module:routes).
        type: list
        elements: dict
        default: []
      rules:
        description: Rules looking up O(table), each with the options of O(liqo.fabric.route_rule#module:rules).
        type: list
        elements: dict
        default: []
      bypass:
        description: Masquerade bypass entries (C(saddr), C(daddr), C(oifname)), see O(liqo.fabric.nat_table#module:bypass).
        type: list
        elements: dict
        default: []
      pod_ports:
        description:
          - Pods of this host (C(ip)) to reach over their own bridge port rather than through the bridge device,
            which cuts encapsulated (VXLAN, Geneve) super-packets into MTU-sized packets in software.
          - For each pod behind a bridge, a route C(<ip>/32 dev <port>) is added to O(table) and a permanent
            neighbour (the pod's MAC) to its port; a rule C(to <ip>/32) selecting O(table) belongs in O(node.rules).
            A pod not behind a bridge is left alone; one whose MAC is not known yet keeps the bridge path (a
            warning) until a later run.
        type: list
        elements: dict
        default: []
      internal_ip:
        description: The host's internal overlay address, as the plan gives it. Informative, not used.
        type: str
      role:
        description: V(gateway) or V(node), as the plan gives it. Informative, not used.
        type: str
  table:
    description: The routing table of the overlay.
    type: int
    default: 18952
  state:
    description:
      - V(present) makes the overlay exactly O(node); V(absent) removes all of it.
    type: str
    default: present
    choices: [present, absent]
notes:
  - Runs on the target host (use the C(liqo.fabric.netns) connection for a network namespace). Needs CAP_NET_ADMIN.
seealso:
  - module: liqo.fabric.overlay_plan
  - module: liqo.fabric.overlay_links
  - module: liqo.fabric.route_table
  - module: liqo.fabric.route_rule
  - module: liqo.fabric.nat_table
"""

EXAMPLES = r"""
- name: Plan the overlay of the cluster
  liqo.fabric.overlay_plan:
    kubeconfig: /etc/liqo/kubeconfig
  delegate_to: localhost
  run_once: true
  register: overlay

- name: Overlay of this node
  liqo.fabric.overlay_dataplane:
    node: "{{ overlay.hosts[inventory_hostname] }}"

- name: Remove the overlay
  liqo.fabric.overlay_dataplane:
    state: absent
"""

RETURN = r"""
writes:
  description: Kernel writes (link operations, route and rule messages, nftables transactions); 0 in check mode and when nothing changed.
  returned: always
  type: int
  sample: 7
links:
  description: Links C(created), C(updated), C(deleted) (names), C(actions) (for people) and the link C(type) used.
  returned: always
  type: dict
  sample: {"created": ["lovg1a2b3c4d"], "updated": [], "deleted": [], "actions": ["lovg1a2b3c4d: create link"], "type": "vxlan"}
routes:
  description: Routes of the table C(added), C(replaced) and C(removed), as C(ip route) prints them.
  returned: always
  type: dict
  sample: {"added": ["10.72.0.0/16 via 10.80.0.2 dev lovg1a2b3c4d metric 0 onlink"], "replaced": [], "removed": []}
rules:
  description: Rules C(added) and C(removed), as C(ip rule) prints them.
  returned: always
  type: dict
  sample: {"added": ["1900: from all to 10.72.0.0/16 lookup 18952"], "removed": []}
nat:
  description: The nftables table of the masquerade bypass; C(changed), C(table), C(rules) (0 when absent).
  returned: always
  type: dict
  sample: {"changed": true, "table": "liqo_fabric_overlay", "rules": 1}
pod_ports:
  description:
    - The pods reached over their bridge port, C(routed) (IP -> port) and C(pending) (IP -> why not yet), and the
      permanent neighbours C(neighbours_added) and C(neighbours_removed).
  returned: always
  type: dict
  sample: {"routed": {"10.243.0.5": "veth724899dc"}, "pending": {},
           "neighbours_added": ["10.243.0.5 dev veth724899dc lladdr 22:64:ba:cf:56:9b permanent"], "neighbours_removed": []}
table:
  description: The routing table.
  returned: always
  type: int
  sample: 18952
manifest:
  description:
    - What this node now owns, for the controller's drift checks (see module_utils/host/manifest.py);
      C(kind) overlay, C(links) (names and MTUs), C(routes), C(rules) (as C(ip rule) prints them), C(nft_tables).
  returned: state=present, not in check mode
  type: dict
  sample: {"kind": "overlay", "links": [{"name": "lovg1a2b3c4d", "mtu": 1450}],
           "routes": [{"table": 18952, "dst": ["10.72.0.0/16"]}],
           "rules": [{"table": 18952, "line": "1900: from all to 10.72.0.0/16 lookup 18952"}], "nft_tables": []}
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.liqo.fabric.plugins.module_utils.host import manifest as dataplane_manifest
from ansible_collections.liqo.fabric.plugins.module_utils.overlay.dataplane import (
    DEFAULT_TABLE, NAT_FAMILY, NAT_TABLE, PARTS, DataplaneError, ValidationError, sync_overlay_dataplane)
from ansible_collections.liqo.fabric.plugins.module_utils.overlay.link import PYROUTE2_IMPORT_ERROR

NODE_PARTS = tuple(PARTS)
NODE_SPEC = dict(
    links=dict(type="list", elements="dict", default=[]),
    routes=dict(type="list", elements="dict", default=[]),
    rules=dict(type="list", elements="dict", default=[]),
    bypass=dict(type="list", elements="dict", default=[], no_log=False),
    pod_ports=dict(type="list", elements="dict", default=[]),
    internal_ip=dict(type="str"),
    role=dict(type="str"),
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="dict", default={}, options=NODE_SPEC),
            table=dict(type="int", default=DEFAULT_TABLE),
            state=dict(type="str", default="present", choices=["present", "absent"]),
        ),
        supports_check_mode=True,
    )
    if PYROUTE2_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("pyroute2"), exception=PYROUTE2_IMPORT_ERROR)
    p = module.params
    node = {k: v for k, v in (p["node"] or {}).items() if v is not None}
    try:
        result = sync_overlay_dataplane(node, table=p["table"], state=p["state"], check=module.check_mode,
                                        want_diff=module._diff)  # pylint: disable=protected-access
    except ValidationError as e:
        msg = str(e)
        module.fail_json(msg=f"node.{msg}" if msg.startswith(NODE_PARTS) else msg)
    except (DataplaneError, OSError) as e:
        module.fail_json(msg=str(e), exception=traceback.format_exc())
    for w in result.pop("warnings"):
        module.warn(w)
    if p["state"] == "present" and not module.check_mode:
        result["manifest"] = dataplane_manifest.overlay(node, p["table"], result, NAT_TABLE, NAT_FAMILY)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
