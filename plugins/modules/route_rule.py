#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: route_rule
short_description: Own the Linux policy-routing rules that point at the fabric's tables
version_added: 0.1.0
description:
  - Makes the set of ip rules whose lookup table is one of O(tables) exactly O(rules); such rules that
    are not listed are removed.
  - Rules pointing at any other table (the kernel's C(local), C(main), C(default) and anyone else's) are
    never touched, so the module can run on a host with its own policy routing.
  - All changes go in one batched netlink exchange; a second identical run writes nothing.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
options:
  tables:
    description:
      - The routing tables this task owns. A rule is managed by this module when its lookup table is in
        this list. The kernel's tables (0, 253, 254, 255) are refused.
    type: list
    elements: int
    default: [18952]
  rules:
    description:
      - The rules that must exist. Each looks up O(rules[].table).
    type: list
    elements: dict
    default: []
    suboptions:
      priority:
        description: Rule priority (1..32765); required so that reruns match the same rule.
        type: int
        required: true
      from:
        description: Source prefix in CIDR notation; omitted or V(all) matches every source.
        type: str
        aliases: [src]
      to:
        description: Destination prefix in CIDR notation; omitted or V(all) matches every destination.
        type: str
        aliases: [dst]
      iif:
        description: Incoming interface name (may not exist yet).
        type: str
      oif:
        description: Outgoing interface name (may not exist yet).
        type: str
      fwmark:
        description: Firewall mark to match, as a number or C(mark/mask), e.g. C(0x10/0xff).
        type: str
      fwmask:
        description: Mask for O(rules[].fwmark); defaults to all ones.
        type: int
      table:
        description: Table to look up; must be one of O(tables). Defaults to the first of O(tables).
        type: int
      family:
        description: Address family, needed only for a rule without O(rules[].from) and O(rules[].to).
        type: str
        choices: [ipv4, ipv6]
  state:
    description:
      - V(present) makes the owned rules exactly O(rules); V(absent) removes every rule pointing at O(tables).
    type: str
    default: present
    choices: [present, absent]
notes:
  - Runs on the target host (use the C(liqo.fabric.netns) connection for a network namespace). Needs CAP_NET_ADMIN.
seealso:
  - module: liqo.fabric.route_table
"""

EXAMPLES = r"""
- name: Traffic to remote pod CIDRs and marked traffic use the fabric table
  liqo.fabric.route_rule:
    rules:
      - priority: 1000
        to: 10.71.0.0/16
      - priority: 1001
        fwmark: 0x10/0xff
      - priority: 1002
        iif: liqo-tunnel

- name: Remove the fabric's rules
  liqo.fabric.route_rule:
    state: absent
"""

RETURN = r"""
tables:
  description: The owned tables.
  returned: always
  type: list
  elements: int
  sample: [18952]
added:
  description: Rules added, as C(ip rule) would print them.
  returned: always
  type: list
  elements: str
  sample: ["1000: from all to 10.71.0.0/16 lookup 18952"]
removed:
  description: Owned rules removed because they were not listed.
  returned: always
  type: list
  elements: str
  sample: []
writes:
  description: Number of netlink write messages sent (0 in check mode and when nothing changed).
  returned: always
  type: int
  sample: 1
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.route.netlink import NetlinkError
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import DEFAULT_TABLE, ValidationError, sync_rules

RULE_SPEC = {
    "priority": dict(type="int", required=True),
    "from": dict(type="str", aliases=["src"]),
    "to": dict(type="str", aliases=["dst"]),
    "iif": dict(type="str"),
    "oif": dict(type="str"),
    "fwmark": dict(type="str"),
    "fwmask": dict(type="int"),
    "table": dict(type="int"),
    "family": dict(type="str", choices=["ipv4", "ipv6"]),
}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            tables=dict(type="list", elements="int", default=[DEFAULT_TABLE]),
            rules=dict(type="list", elements="dict", default=[], options=RULE_SPEC),
            state=dict(type="str", default="present", choices=["present", "absent"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    rules = [{k: v for k, v in r.items() if v is not None and k not in ("src", "dst")} for r in p["rules"]]
    try:
        result = sync_rules(rules, tables=p["tables"], state=p["state"], check=module.check_mode)
    except ValidationError as e:
        module.fail_json(msg=str(e))
    except (NetlinkError, OSError) as e:
        module.fail_json(msg=str(e), exception=traceback.format_exc())
    before = result.pop("before")
    after = result.pop("after")
    if module._diff:
        result["diff"] = {"before": "\n".join(before) + "\n" if before else "",
                          "after": "\n".join(after) + "\n" if after else ""}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
