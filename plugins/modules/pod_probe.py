#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: pod_probe
short_description: Pings from this host's pods (or the host) as the pods themselves would
version_added: 0.1.0
description:
  - Runs each probe's ping (don't fragment, its payload size) inside the network namespace of the pod whose
    address is the probe's C(from_address), or in the host's own namespace when it is null, and returns each
    probe with C(ok), C(rtt_ms) and C(error). A pod's namespace is the one at the other end of one of this
    host's veth links that holds the address, so nothing is needed inside the pod's image.
  - A probe with a C(port) (from M(liqo.fabric.verify_services)) is a TCP test instead, a 1 s C(iperf3) client to
    C(to_address):C(port) (it needs the server M(liqo.fabric.pod_iperf) starts); it returns C(mbit_per_s).
  - Read only, it sends ICMP echo requests (or the TCP test) and changes nothing. The probes come from
    M(liqo.fabric.verify_plan).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
attributes:
  platform:
    platforms: linux
requirements:
  - pyroute2
  - ping (iputils)
  - iperf3 (TCP probes only)
options:
  probes:
    description: Probes (C(from_address), C(to_address), C(size), C(port) for a TCP probe, and any other keys, returned as
      given).
    type: list
    elements: dict
    required: true
  count:
    description: Echo requests per probe (10 ms apart); a probe passes when one is answered.
    type: int
    default: 3
  timeout:
    description: Seconds to wait for an answer after the last request.
    type: int
    default: 2
  parallel:
    description: Probes run at the same time.
    type: int
    default: 8
"""

EXAMPLES = r"""
- name: Ping the remote pods from this node's pods
  liqo.fabric.pod_probe:
    probes: "{{ verify_planned.probes.local[inventory_hostname] | default([]) }}"
  register: probed
"""

RETURN = r"""
results:
  description: The probes with C(ok) (bool), C(rtt_ms) (average, null when unanswered) and C(error) (why not).
  returned: always
  type: list
  elements: dict
"""

import json
import re
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.host import pod_netns

RTT = re.compile(r"= [\d.]+/([\d.]+)/")


def tcp(probe, where, timeout, out):
    """A TCP probe: a 1 s iperf3 test to to_address:port (an iperf3 server of liqo.fabric.pod_iperf)."""
    argv = ["iperf3", "-c", probe["to_address"], "-p", str(probe["port"]), "-t", "1", "-J",
            "--connect-timeout", str(timeout * 1000)]
    rc, text = 1, ""
    try:
        rc, text = pod_netns.run_in(where.get(probe.get("from_address")), argv, timeout + 15)
        data = json.loads(text)
    except ValueError:
        data = {"error": text.strip() or "iperf3 printed nothing"}
    except Exception as exc:  # pylint: disable=broad-except  # reported per probe
        data = {"error": str(exc)}
    if rc != 0 or data.get("error"):
        out["error"] = "TCP to %s:%s: %s" % (probe["to_address"], probe["port"], data.get("error") or "iperf3 failed")
        return out
    out["ok"] = True
    out["mbit_per_s"] = round(data["end"]["sum_received"]["bits_per_second"] / 1e6, 1)
    return out


def one(probe, where, count, timeout):
    out = dict(probe, ok=False, rtt_ms=None, error=None)
    if probe.get("from_address") and probe["from_address"] not in where:
        out["error"] = "pod %s's network namespace is not attached to this host" % probe["from_address"]
        return out
    if probe.get("port"):
        return tcp(probe, where, timeout, out)
    argv = ["ping", "-n", "-q", "-c", str(count), "-i", "0.01", "-W", str(timeout), "-M", "do", "-s", str(probe["size"]),
            probe["to_address"]]
    try:
        rc, text = pod_netns.run_in(where.get(probe.get("from_address")), argv, timeout + count)
    except Exception as exc:  # pylint: disable=broad-except  # reported per probe
        out["error"] = str(exc)
        return out
    match = RTT.search(text)
    out["ok"] = rc == 0
    out["rtt_ms"] = float(match.group(1)) if match else None
    if rc != 0:
        loss = re.search(r"(\d+)% packet loss", text)
        out["error"] = "no answer (%s%% loss)" % loss.group(1) if loss else (text.strip().splitlines() or ["ping failed"])[-1]
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(probes=dict(type="list", elements="dict", required=True), count=dict(type="int", default=3),
                           timeout=dict(type="int", default=2), parallel=dict(type="int", default=8)),
        supports_check_mode=True,
    )
    p = module.params
    for i, probe in enumerate(p["probes"]):
        if not probe.get("to_address") or not probe.get("size"):
            module.fail_json(msg="probes[%d]: to_address and size are required, got %r" % (i, probe))
    if p["count"] < 1 or p["timeout"] < 1 or p["parallel"] < 1:
        module.fail_json(msg="count, timeout and parallel must be >= 1, got %s, %s, %s" % (p["count"], p["timeout"], p["parallel"]))
    try:
        where = pod_netns.pod_namespaces({x["from_address"] for x in p["probes"] if x.get("from_address")})
    except Exception as exc:  # pylint: disable=broad-except
        module.fail_json(msg="pods of this host: %s" % exc)
    with ThreadPoolExecutor(max_workers=p["parallel"]) as pool:
        results = list(pool.map(lambda x: one(x, where, p["count"], p["timeout"]), p["probes"]))
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
