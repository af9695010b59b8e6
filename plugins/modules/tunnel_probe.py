#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: tunnel_probe
short_description: Check that a gateway's WireGuard tunnel carries traffic
version_added: 0.1.0
description:
  - Checks for a fresh WireGuard handshake with the expected peer, then sends don't-fragment pings of the full
    tunnel MTU to the peer's transit address through the tunnel interface; reports the latency.
  - Tells apart a missing handshake (wrong public key on either side, unreachable endpoint), an MTU problem
    (small probes pass, full-size ones do not) and a dead path.
  - Never changes anything.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
options:
  interface:
    description: The WireGuard interface.
    type: str
    required: true
  peer_public_key:
    description: Public key of the expected peer.
    type: str
    required: true
  address:
    description: Transit address of the peer, reached through O(interface).
    type: str
    required: true
  mtu:
    description: MTU of the tunnel; probes are this size.
    type: int
    default: 1340
  wait:
    description:
      - Seconds to keep probing until the tunnel is up. With V(0) one probe is made and a failure is not final
        (the Connection stays C(Connecting)); after a full wait a failure is final (C(Error)).
    type: float
    default: 0
"""

EXAMPLES = r"""
- name: Wait up to 10 s for the tunnel
  liqo.fabric.tunnel_probe:
    interface: lwg1a2b3c4d
    peer_public_key: "{{ remote_public_key }}"
    address: 169.254.18.1
    wait: 10
  register: probe
"""

RETURN = r"""
connected:
  description: Whether the handshake is fresh and full-size probes were answered.
  returned: always
  type: bool
reason:
  description: C(Established), C(NoInterface), C(NoPeer), C(NoHandshake), C(MTUMismatch) or C(ProbeFailed).
  returned: always
  type: str
message:
  description: What was seen, for people.
  returned: always
  type: str
latency_ms:
  description: Average round-trip time of the probes in milliseconds.
  returned: when a probe was answered
  type: float
final:
  description: Whether the result came after the full wait.
  returned: always
  type: bool
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.health.tunnel_probe import probe


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interface=dict(type="str", required=True),
            peer_public_key=dict(type="str", required=True),
            address=dict(type="str", required=True),
            mtu=dict(type="int", default=1340),
            wait=dict(type="float", default=0),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = probe(p["interface"], p["peer_public_key"], p["address"], p["mtu"], p["wait"])
    except Exception as exc:  # pylint: disable=broad-exception-caught
        module.fail_json(msg="probe of %s failed: %s" % (p["interface"], exc), exception=traceback.format_exc())
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
