#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: pod_iperf
short_description: iperf3 and ping as one of this host's pods (or as the host) for liqo.fabric.benchmark
version_added: 0.1.0
description:
  - With V(role=server), starts a one-off C(iperf3) server inside the network namespace of the pod whose address is
    O(address) (the host's own namespace when it is omitted), bound to O(bind) when given; it serves one test and
    exits, or is stopped by C(timeout) after O(seconds) + 60 s, so nothing outlives the benchmark.
  - With V(role=client), from the same kind of place, measures TCP throughput to O(target) for O(seconds) and the
    round-trip time of O(pings) pings, and returns both.
  - A pod's namespace is found as M(liqo.fabric.pod_probe) finds it (the peer of one of this host's veth links);
    nothing is needed inside the pod's image. It changes nothing else.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_check
attributes:
  platform:
    platforms: linux
requirements:
  - iperf3
  - ping (iputils)
  - pyroute2
options:
  role:
    description: Start the server, or run the client.
    type: str
    choices: [server, client]
    required: true
  address:
    description: The pod (its address) to run as; omitted, the host itself.
    type: str
  bind:
    description: The address the server listens on, or the client sends from.
    type: str
  target:
    description: The server's address (V(role=client)).
    type: str
  port:
    description: TCP port of the test.
    type: int
    default: 5301
  seconds:
    description: Duration of the throughput test.
    type: int
    default: 5
  pings:
    description: Pings for the round-trip time (10 ms apart), V(role=client).
    type: int
    default: 50
"""

EXAMPLES = r"""
- name: Server in a remote pod
  liqo.fabric.pod_iperf:
    role: server
    address: 10.243.1.2

- name: Client in a local pod, to the remote pod's remapped address
  liqo.fabric.pod_iperf:
    role: client
    address: 10.243.2.2
    target: 10.0.1.2
  register: measured
"""

RETURN = r"""
mbit_per_s:
  description: TCP throughput the receiver saw, in Mbit/s (V(role=client)).
  returned: when role is client
  type: float
retransmits:
  description: TCP retransmissions during the test (V(role=client)).
  returned: when role is client
  type: int
rtt_ms:
  description: Median round-trip time of the pings, in ms (V(role=client)).
  returned: when role is client
  type: float
pid:
  description: The server process (V(role=server)).
  returned: when role is server
  type: int
"""

import json
import shutil
import statistics

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.host import pod_netns


def where(module, address):
    if not address:
        return None
    found = pod_netns.pod_namespaces([address])
    if address not in found:
        module.fail_json(msg="address: no pod with %s is attached to this host" % address)
    return found[address]


def server(module, p, ns):
    argv = ["timeout", str(p["seconds"] + 60), "iperf3", "-s", "-1", "-p", str(p["port"])] + (["-B", p["bind"]] if p["bind"] else [])
    pid, error = pod_netns.start_in(ns, argv)  # listening, or already failed (port in use, bad bind address)
    if error is not None:
        module.fail_json(msg="iperf3 server on port %s: %s" % (p["port"], error))
    module.exit_json(changed=False, pid=pid)


def client(module, p, ns):
    if not p["target"]:
        module.fail_json(msg="target: required with role=client")
    argv = ["iperf3", "-c", p["target"], "-p", str(p["port"]), "-t", str(p["seconds"]), "-J"] + (
        ["-B", p["bind"]] if p["bind"] else [])
    rc, out = pod_netns.run_in(ns, argv, p["seconds"] + 30)
    try:
        data = json.loads(out)
    except ValueError:
        data = {"error": out.strip() or "no output"}
    if rc != 0 or data.get("error"):
        module.fail_json(msg="iperf3 to %s:%s: %s" % (p["target"], p["port"], data.get("error")))
    end = data["end"]
    mbit = end["sum_received"]["bits_per_second"] / 1e6
    retransmits = end.get("sum_sent", {}).get("retransmits", 0)
    ping = ["ping", "-n", "-c", str(p["pings"]), "-i", "0.01", "-W", "2", p["target"]] + (["-I", p["bind"]] if p["bind"] else [])
    rc, out = pod_netns.run_in(ns, ping, p["pings"] * 0.05 + 10)
    rtts = [float(line.split("time=")[1].split()[0]) for line in out.splitlines() if "time=" in line]
    module.exit_json(changed=False, mbit_per_s=round(mbit, 1), retransmits=retransmits,
                     rtt_ms=round(statistics.median(rtts), 3) if rtts else None)


def main():
    module = AnsibleModule(
        argument_spec=dict(role=dict(type="str", choices=["server", "client"], required=True), address=dict(type="str"),
                           bind=dict(type="str"), target=dict(type="str"), port=dict(type="int", default=5301),
                           seconds=dict(type="int", default=5), pings=dict(type="int", default=50)),
        supports_check_mode=False,
    )
    p = module.params
    if not shutil.which("iperf3"):
        module.fail_json(msg="iperf3 is not installed on this host (Debian: apt install iperf3)")
    if p["seconds"] < 1 or p["pings"] < 1 or not 1 <= p["port"] <= 65535:
        module.fail_json(msg="seconds and pings must be >= 1 and port 1-65535, got %s, %s, %s" % (p["seconds"], p["pings"], p["port"]))
    ns = where(module, p["address"])
    (server if p["role"] == "server" else client)(module, p, ns)


if __name__ == "__main__":
    main()
