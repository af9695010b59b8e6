#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: peer_health_hold
short_description: Hold or release the WireGuard session restarts of a gateway host's health probes
version_added: 0.1.0
description:
  - A probe process of M(liqo.fabric.peer_health) that loses C(threshold) pings in a row restarts the gateway's
    WireGuard session (removes the peer and adds it back), so a peer that came back is reached at once.
  - During a key rotation (playbook C(liqo.fabric.rotate_keys)) the pings go unanswered from one side's switch to
    the other side's adopt; a restart then would drop the packets WireGuard keeps for the new key's handshake.
    The rotation holds the restarts of both gateways first and releases them at its end.
  - A hold lasts O(seconds) and then ends by itself (a run that stopped half-way); O(seconds=0) releases it. A
    probe still without an answer when its hold ends restarts the session then.
  - Only running probes are held; the hold is the file C(<state_dir>/<interface>.hold) (mode 0600), which stopping
    the probe removes.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
options:
  interfaces:
    description: WireGuard interfaces of this host whose probes hold (or release) their session restarts.
    type: list
    elements: str
    required: true
  seconds:
    description: How long the hold lasts from now, at most 3600; C(0) releases it.
    type: int
    required: true
  state_dir:
    description: Directory of the probe processes' files (M(liqo.fabric.peer_health)'s O(liqo.fabric.peer_health#module:state_dir)).
    type: path
    default: /run/liqo-fabric-health
"""

EXAMPLES = r"""
- name: The probe of the gateway holds its session restarts for two minutes
  liqo.fabric.peer_health_hold:
    interfaces: [lwg1a2b3c4d]
    seconds: 120

- name: And restarts them again
  liqo.fabric.peer_health_hold:
    interfaces: [lwg1a2b3c4d]
    seconds: 0
"""

RETURN = r"""
held:
  description: Interfaces whose probe now holds its restarts (or would, in check mode).
  returned: always
  type: list
  elements: str
released:
  description: Interfaces whose hold was (or would be) removed.
  returned: always
  type: list
  elements: str
not_running:
  description: Interfaces of O(interfaces) without a running probe on this host (nothing to hold).
  returned: always
  type: list
  elements: str
until:
  description: End of the hold, in seconds since the epoch; null when nothing was held or in check mode.
  returned: always
  type: float
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.health.host import HealthError, apply_hold


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interfaces=dict(type="list", elements="str", required=True),
            seconds=dict(type="int", required=True),
            state_dir=dict(type="path", default="/run/liqo-fabric-health"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = apply_hold(p["interfaces"], p["seconds"], p["state_dir"], module.check_mode)
    except HealthError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught
        module.fail_json(msg="peer_health_hold failed: %s" % exc, exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
