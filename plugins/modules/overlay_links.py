#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: overlay_links
short_description: Own the whole set of overlay links of a host in one call
version_added: 0.1.0
description:
  - Makes each listed overlay link (Geneve or VXLAN, see M(liqo.fabric.overlay_link) for the fields) present and
    deletes every other link whose name starts with one of O(owned_prefixes), so the link of a node that left the
    cluster goes away. One netlink session for all links; everything is validated before anything changes.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
options:
  links:
    description: The links, each with the options of M(liqo.fabric.overlay_link) (name, type, vni, remotes, local, dst_port, mtu, addresses, dev).
    type: list
    elements: dict
    default: []
  owned_prefixes:
    description: Links whose name starts with one of these and that are not listed are deleted.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Links of a node towards both gateway hosts
  liqo.fabric.overlay_links:
    owned_prefixes: [lovg, lovn]
    links:
      - {name: lovg1a2b3c4d, type: auto, vni: 65538, remotes: [172.30.0.2], local: 172.30.0.3, addresses: [10.80.0.3/32]}
"""

RETURN = r"""
type:
  description: The link kind used (V(geneve) or V(vxlan)) when links are listed.
  returned: when links are given
  type: str
created:
  description: Links created.
  returned: always
  type: list
  elements: str
updated:
  description: Links changed or recreated.
  returned: always
  type: list
  elements: str
deleted:
  description: Owned links removed.
  returned: always
  type: list
  elements: str
actions:
  description: What was done (or would be), for people.
  returned: always
  type: list
  elements: str
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.liqo.fabric.plugins.module_utils.overlay.link import (
    PYROUTE2_IMPORT_ERROR, OverlayError, ValidationError, sync_overlay_links)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            links=dict(type="list", elements="dict", default=[]),
            owned_prefixes=dict(type="list", elements="str", required=True),
        ),
        supports_check_mode=True,
    )
    if PYROUTE2_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("pyroute2"), exception=PYROUTE2_IMPORT_ERROR)
    try:
        result = sync_overlay_links(module.params["links"], module.params["owned_prefixes"], module.check_mode)
    except ValidationError as e:
        module.fail_json(msg=str(e))
    except (OverlayError, OSError) as e:
        module.fail_json(msg=str(e), exception=traceback.format_exc())
    for w in result.pop("warnings"):
        module.warn(w)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
