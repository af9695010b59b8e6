#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: overlay_link
short_description: Geneve or VXLAN overlay link from a node to the gateway (or back)
version_added: 0.1.0
description:
  - Creates, updates or removes one overlay link. V(geneve) is point to point to O(remotes[0]);
    V(vxlan) runs in unicast mode with learning off and one static flooding entry
    (C(00:00:00:00:00:00 dst REMOTE)) per address in O(remotes), the exact set.
  - O(type=auto) picks V(geneve) when the kernel supports it (module loaded, built in, or a scratch
    link can be created and is removed at once), else V(vxlan). The choice is returned in RV(type).
  - Idempotent. Attributes the kernel fixes at creation (kind, VNI, port, local address, underlay
    device, geneve remote, learning) make the link be recreated; MTU, addresses and FDB entries
    are changed in place.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
options:
  name:
    description: Link name (1-15 characters).
    type: str
    required: true
  type:
    description: Encapsulation. V(auto) prefers geneve and falls back to vxlan.
    type: str
    default: auto
    choices: [auto, geneve, vxlan]
  vni:
    description: Virtual network identifier (1..16777215). Required with O(state=present).
    type: int
  remotes:
    description:
      - Underlay addresses of the other end(s). Geneve takes exactly one; VXLAN gets one static
        flooding FDB entry per address and entries not listed are removed.
    type: list
    elements: str
    default: []
    aliases: [remote]
  local:
    description: Local underlay address (VXLAN source address; ignored by geneve).
    type: str
  dst_port:
    description: UDP destination port. Defaults to 6081 for geneve and 4789 for VXLAN.
    type: int
  mtu:
    description: Link MTU. Left to the kernel when omitted.
    type: int
  addresses:
    description: Addresses in CIDR form the link must carry (exact set; IPv6 link-local addresses are left alone).
    type: list
    elements: str
    default: []
  dev:
    description: Underlay device the VXLAN socket is bound to (must exist). Geneve has no such binding and ignores it.
    type: str
  state:
    description: V(present) creates or updates the link, V(absent) removes it.
    type: str
    default: present
    choices: [present, absent]
notes:
  - Runs on the target host (use the C(liqo.fabric.netns) connection for a network namespace). Needs CAP_NET_ADMIN.
requirements:
  - pyroute2
"""

EXAMPLES = r"""
- name: Overlay from a node to the active gateway
  liqo.fabric.overlay_link:
    name: liqo-tunnel
    type: auto
    vni: 18952
    remotes: [192.168.77.1]
    local: 192.168.77.2
    mtu: 1340
    addresses: [10.80.0.2/24]

- name: Gateway side of a VXLAN overlay towards three nodes
  liqo.fabric.overlay_link:
    name: liqo-vxlan
    type: vxlan
    vni: 200
    remotes: [192.168.77.2, 192.168.77.3, 192.168.77.4]
    dev: eth0
    addresses: [10.80.0.1/24]

- name: Remove it
  liqo.fabric.overlay_link:
    name: liqo-vxlan
    state: absent
"""

RETURN = r"""
type:
  description: The encapsulation in use after O(type=auto) was resolved.
  returned: when O(state=present)
  type: str
  sample: vxlan
geneve_supported:
  description: Whether the kernel can create geneve links.
  returned: when O(state=present)
  type: bool
  sample: false
dst_port:
  description: UDP destination port in use.
  returned: when O(state=present)
  type: int
  sample: 4789
actions:
  description: What was (or, in check mode, would be) done.
  returned: always
  type: list
  elements: str
  sample: ["liqo-tunnel: create link", "liqo-tunnel: add address 10.80.0.2/24", "liqo-tunnel: set up"]
ifindex:
  description: Interface index of the link, null when it does not exist.
  returned: always
  type: int
  sample: 7
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.liqo.fabric.plugins.module_utils.overlay.link import (
    PYROUTE2_IMPORT_ERROR,
    OverlayError,
    ValidationError,
    sync_overlay_link,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            type=dict(type="str", default="auto", choices=["auto", "geneve", "vxlan"]),
            vni=dict(type="int"),
            remotes=dict(type="list", elements="str", default=[], aliases=["remote"]),
            local=dict(type="str"),
            dst_port=dict(type="int"),
            mtu=dict(type="int"),
            addresses=dict(type="list", elements="str", default=[]),
            dev=dict(type="str"),
            state=dict(type="str", default="present", choices=["present", "absent"]),
        ),
        required_if=[("state", "present", ["vni"])],
        supports_check_mode=True,
    )
    if PYROUTE2_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("pyroute2"), exception=PYROUTE2_IMPORT_ERROR)
    p = module.params
    try:
        result = sync_overlay_link(p, state=p["state"], check=module.check_mode)
    except ValidationError as e:
        module.fail_json(msg=str(e))
    except (OverlayError, OSError) as e:
        module.fail_json(msg=str(e), exception=traceback.format_exc())
    for w in result.pop("warnings"):
        module.warn(w)
    before = result.pop("before")
    after = result.pop("after")
    if module._diff:
        result["diff"] = {"before": before or {}, "after": after or {}}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
