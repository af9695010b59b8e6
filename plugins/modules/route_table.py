#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: route_table
short_description: Own the exact set of routes of one Linux routing table
version_added: 0.1.0
description:
  - Makes a routing table (by default 18952, the fabric's table) hold exactly the listed routes,
    removing every route of that table that is not listed.
  - Reads the table in one netlink dump, computes the difference and applies it in one batched netlink
    exchange, so thousands of routes take a fraction of a second. A second identical run writes nothing.
  - IPv4 and IPv6 routes can be mixed; the family is taken from O(routes[].dst).
  - Input is validated (CIDRs, addresses, device names and existence, table id) before anything changes.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
options:
  table:
    description:
      - Id of the routing table. The kernel's own tables (0, 253 default, 254 main, 255 local) are refused.
    type: int
    default: 18952
  routes:
    description:
      - The routes the table must hold. Routes of the table that are not listed are removed.
    type: list
    elements: dict
    default: []
    suboptions:
      dst:
        description: Destination network in CIDR notation, or V(default).
        type: str
        required: true
      via:
        description: Next-hop address (gateway), same family as O(routes[].dst).
        type: str
        aliases: [gateway]
      dev:
        description: Output device; must exist.
        type: str
      src:
        description: Preferred source address (must be an address of this host).
        type: str
      onlink:
        description: Treat O(routes[].via) as directly reachable on O(routes[].dev) even without a matching prefix.
        type: bool
        default: false
      scope:
        description:
          - Route scope. Defaults to V(link) for a unicast route without O(routes[].via), else V(universe).
        type: str
        choices: [universe, site, link, host, nowhere]
      metric:
        description: Route priority (metric). Defaults to 0 for IPv4 and 1024 for IPv6.
        type: int
      type:
        description: Route type.
        type: str
        default: unicast
        choices: [unicast, blackhole, unreachable, prohibit, throw]
  state:
    description:
      - V(present) makes the table hold exactly O(routes); V(absent) removes every route of the table.
    type: str
    default: present
    choices: [present, absent]
notes:
  - Runs on the target host (use the C(liqo.fabric.netns) connection for a network namespace). Needs CAP_NET_ADMIN.
seealso:
  - module: liqo.fabric.route_rule
"""

EXAMPLES = r"""
- name: Pod CIDRs of the remote clusters through the overlay to the gateway
  liqo.fabric.route_table:
    table: 18952
    routes:
      - dst: 10.71.0.0/16
        via: 10.80.0.1
        dev: liqo-tunnel
      - dst: 10.72.0.0/16
        via: 10.80.0.1
        dev: liqo-tunnel
        onlink: true

- name: Empty the fabric table
  liqo.fabric.route_table:
    state: absent
"""

RETURN = r"""
table:
  description: The table that was managed.
  returned: always
  type: int
  sample: 18952
added:
  description: Routes added, as C(ip route) would print them.
  returned: always
  type: list
  elements: str
  sample: ["10.71.0.0/16 via 10.80.0.1 dev liqo-tunnel metric 0"]
replaced:
  description: Routes whose next hop, device, source, scope or flags changed (new version).
  returned: always
  type: list
  elements: str
  sample: []
removed:
  description: Routes removed because they were not listed.
  returned: always
  type: list
  elements: str
  sample: ["10.99.0.0/16 dev eth0 scope link metric 0"]
writes:
  description: Number of netlink write messages sent (0 in check mode and when nothing changed).
  returned: always
  type: int
  sample: 1
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.route.netlink import NetlinkError
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import (
    DEFAULT_TABLE, ValidationError, sync_route_table)

ROUTE_SPEC = dict(
    dst=dict(type="str", required=True),
    via=dict(type="str", aliases=["gateway"]),
    dev=dict(type="str"),
    src=dict(type="str"),
    onlink=dict(type="bool", default=False),
    scope=dict(type="str", choices=["universe", "site", "link", "host", "nowhere"]),
    metric=dict(type="int"),
    type=dict(type="str", default="unicast", choices=["unicast", "blackhole", "unreachable", "prohibit", "throw"]),
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            table=dict(type="int", default=DEFAULT_TABLE),
            routes=dict(type="list", elements="dict", default=[], options=ROUTE_SPEC),
            state=dict(type="str", default="present", choices=["present", "absent"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    routes = [{k: v for k, v in r.items() if v is not None} for r in p["routes"]]
    try:
        result = sync_route_table(routes, table=p["table"], state=p["state"], check=module.check_mode,
                                  want_lines=module._diff)
    except ValidationError as e:
        module.fail_json(msg=str(e))
    except (NetlinkError, OSError) as e:
        module.fail_json(msg=f"table {p['table']}: {e}", exception=traceback.format_exc())
    before = result.pop("before", None)
    after = result.pop("after", None)
    if module._diff:
        result["diff"] = {
            "before": "\n".join(before) + "\n" if before else "",
            "after": "\n".join(after) + "\n" if after else "",
            "before_header": f"table {p['table']}",
            "after_header": f"table {p['table']}",
        }
    module.exit_json(**result)


if __name__ == "__main__":
    main()
