#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: peer_health
short_description: Run the live health probe of a gateway host's tunnels
version_added: 0.2.0
description:
  - Starts (O(state=present)) or stops (O(state=absent)) one probe process per gateway on the gateway host.
    Each pings the peer's transit address through the tunnel (UDP port 12345 by default, answered by the
    peer's own probe process) once per O(gateways[].interval) seconds; O(gateways[].threshold) consecutive
    losses set the gateway's Connection to C(Error), an answer sets it back to C(Connected), and the latency is
    written to C(status.latency) (at most every 10 s while it stays Connected).
  - Each process serves C(GET /metrics) (C(liqo_peer_is_connected), C(liqo_peer_latency_us),
    C(liqo_peer_receive_bytes_total), C(liqo_peer_transmit_bytes_total), labels C(driver) and C(cluster_id))
    and C(GET /status) over HTTP on its Unix socket C(<state_dir>/<interface>.sock).
  - Its files (C(<interface>.pid), C(<interface>.sock)) are mode 0600 in O(state_dir) (0700); stopping removes
    them, and the directory with the last one.
  - A process already running with the same parameters is left alone (not changed).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
options:
  gateways:
    description: The gateways of this host to probe (or, with O(state=absent), to stop probing).
    type: list
    elements: dict
    default: []
    suboptions:
      interface:
        description: The gateway's WireGuard interface.
        type: str
        required: true
      address:
        description: The peer's transit address (the plan's C(probe_address)). Not needed with O(state=absent).
        type: str
      namespace:
        description: Namespace of the gateway and its Connection. Not needed with O(state=absent).
        type: str
      connection_name:
        description: Name of the gateway's Connection. Not needed with O(state=absent).
        type: str
      remote_cluster_id:
        description: The remote cluster's id (the C(cluster_id) label of the metrics).
        type: str
      public_key:
        description: The peer's public key (whose WireGuard counters the byte metrics report).
        type: str
      port:
        description: UDP port of the probe on both ends.
        type: int
        default: 12345
      interval:
        description: Seconds between two pings.
        type: float
        default: 1.0
      threshold:
        description: Consecutive lost pings that make the Connection C(Error).
        type: int
        default: 3
  plans:
    description:
      - Entries of M(liqo.fabric.gateway_plan)'s C(gateways) instead of O(gateways), as the gateway role passes
        its plan. A ready gateway without an error is probed (peer's C(probe_address), C(namespace),
        C(connection_name), C(remote_cluster_id), peer's public key); a held one (C(held), a refused change of a
        gateway built before) keeps its probe as it runs; the probe of any other is stopped.
    type: list
    elements: dict
  state:
    description: Whether the probe processes of O(gateways) run.
    type: str
    choices: [present, absent]
    default: present
  exclusive:
    description: With O(state=present), also stop the probe processes in O(state_dir) of interfaces not in O(gateways).
    type: bool
    default: false
  state_dir:
    description: Directory of the probe processes' pid and socket files.
    type: path
    default: /run/liqo-fabric-health
  kubeconfig:
    description:
      - Kubeconfig on the gateway host the probe processes write the Connections with. Without it they only
        serve their state and metrics.
    type: path
"""

EXAMPLES = r"""
- name: Probe the tunnel of a gateway continuously
  liqo.fabric.peer_health:
    kubeconfig: /etc/liqo-fabric/kubeconfig
    gateways:
      - interface: lwg1a2b3c4d
        address: 169.254.18.1
        namespace: liqo-tenant-b
        connection_name: server
        remote_cluster_id: cluster-b

- name: Stop it
  liqo.fabric.peer_health:
    gateways: [{interface: lwg1a2b3c4d}]
    state: absent
"""

RETURN = r"""
started:
  description: Interfaces whose probe process was (or in check mode would be) started or restarted.
  returned: always
  type: list
  elements: str
stopped:
  description: Interfaces whose probe process (or its leftover files) was (or would be) removed.
  returned: always
  type: list
  elements: str
health:
  description: The state each running probe process reports (value, reason, latency_us, losses, pid).
  returned: with O(state=present), not in check mode
  type: dict
manifest:
  description:
    - What this host must keep running, for the controller's drift checks (boot_id, netns, kind C(gateway),
      C(health) with each process's state_dir and interface); the gateway role declares it with C(set_stats).
  returned: with O(state=present) and gateways to probe, not in check mode
  type: dict
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.health.host import HealthError, apply, from_plans


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gateways=dict(type="list", elements="dict", default=[], options=dict(
                interface=dict(type="str", required=True), address=dict(type="str"), namespace=dict(type="str"),
                connection_name=dict(type="str"), remote_cluster_id=dict(type="str"),
                public_key=dict(type="str", no_log=False), port=dict(type="int", default=12345),
                interval=dict(type="float", default=1.0), threshold=dict(type="int", default=3))),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            exclusive=dict(type="bool", default=False),
            state_dir=dict(type="path", default="/run/liqo-fabric-health"),
            kubeconfig=dict(type="path"),
            plans=dict(type="list", elements="dict"),
        ),
        mutually_exclusive=[("gateways", "plans")],
        supports_check_mode=True,
    )
    p = module.params
    try:
        gateways, halt = (p["gateways"], []) if p["plans"] is None else from_plans(p["plans"])
        if p["state"] == "absent" and p["plans"] is not None:
            gateways, halt = [{"interface": x["interface"]} for x in p["plans"] if isinstance(x, dict) and x.get("interface")], []
        result = apply(gateways, p["state"], p["state_dir"], p["kubeconfig"], p["exclusive"], module.check_mode, halt)
    except HealthError as exc:
        module.fail_json(msg=str(exc))
    except Exception as exc:  # pylint: disable=broad-exception-caught
        module.fail_json(msg="peer_health failed: %s" % exc, exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
