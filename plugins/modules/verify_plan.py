#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: verify_plan
short_description: The probes of liqo.fabric.verify between two connected clusters
version_added: 0.1.0
description:
  - Reads the Running pods (with their own address) of both clusters, and each cluster's remap of the other's
    pod CIDR, and returns what every node of each cluster probes with M(liqo.fabric.pod_probe) - from one pod per
    node (every pod with O(full)) and from the node itself, to one pod per remote node (every remote pod with
    O(full)), at the address this cluster's IPAM remapped it to, with a small and a full-size packet (the
    gateway's MTU, don't fragment). Writes nothing.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
  - liqo.fabric.remote_kube
options:
  full:
    description: Every pod pair instead of one pod per node pair.
    type: bool
    default: false
  benchmark:
    description: Also return RV(benchmark), the pair of pods and the tunnel addresses liqo.fabric.benchmark measures.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: What each node probes
  liqo.fabric.verify_plan:
    kubeconfig: /etc/liqo/a.kubeconfig
    remote_kubeconfig: /etc/liqo/b.kubeconfig
  register: verify_planned
"""

RETURN = r"""
probes:
  description:
    - C(local) and C(remote) (the cluster of O(kubeconfig) and of O(remote_kubeconfig)), each a dict of node name
      to its probes; a probe has C(cluster), C(peer), C(from) (a pod C(namespace/name) or C(node NAME)),
      C(from_address) (null for the node itself), C(from_node), C(to), C(node) (the remote pod's node),
      C(original) (its address), C(to_address) (remapped), C(size) (ICMP payload bytes).
  returned: always
  type: dict
skipped:
  description:
    - Probes not run, with C(cluster), C(peer), C(from) and C(reason) - the host network of gateway hosts (Nodes
      labelled C(liqo.io/gateway-host=true)), whose own traffic leaves with the tunnel's transit address, which
      the peer's nodes do not route back; their pods are probed.
  returned: always
  type: list
  elements: dict
benchmark:
  description:
    - With O(benchmark), C(client) (a local pod - C(pod), C(node), C(address) - on a node that is not a gateway host
      when there is one), C(server) (a remote pod likewise, with C(target), its remapped address) and C(transit)
      (C(local) and C(remote), the gateways' tunnel addresses).
  returned: when O(benchmark) is true
  type: dict
cluster_ids:
  description: C(local) and C(remote) cluster ids.
  returned: always
  type: dict
mtu:
  description:
    - C(local) and C(remote), each the tunnel MTU the full-size probes use (C(value)) and where it comes from
      (C(source) - C(probed) with C(spec.mtu) auto, C(configured) or C(default)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import DEFAULT_MTU, KINDS, TRANSIT, gateway_mtu, mtu_source
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import (
    KUBE_ARG_SPEC, REMOTE_CLUSTER_ID_LABEL, REMOTE_KUBE_ARG_SPEC, Kube, with_kube)
from ansible_collections.liqo.fabric.plugins.module_utils.verify import probes as verify

GATEWAY_HOST_LABEL = verify.GATEWAY_HOST_LABEL
ROLES = {"GatewayServer": "Server", "GatewayClient": "Client"}


def _gateway(kube, peer_id):
    for kind in KINDS:
        for gw in kube.list(kind, label_selector="%s=%s" % (REMOTE_CLUSTER_ID_LABEL, peer_id)):
            return dict(gw, kind=kind)
    raise verify.VerifyError("no GatewayServer or GatewayClient labelled %s=%s (connect the clusters first)"
                             % (REMOTE_CLUSTER_ID_LABEL, peer_id))


def work(local, p):
    remote = Kube(p["remote_kubeconfig"])
    try:
        sides = {"local": local, "remote": remote}
        ids = {name: k.cluster_id() for name, k in sides.items()}
        pods = {name: k.list("Pod") for name, k in sides.items()}
        probes, skipped, gateway_nodes, gateways, confs, mtus = {}, [], {}, {}, {}, {}
        for name, other in (("local", "remote"), ("remote", "local")):
            k = sides[name]
            gateway_nodes[name] = {n["metadata"]["name"] for n in k.list("Node", label_selector=GATEWAY_HOST_LABEL + "=true")}
            gateways[name], confs[name] = _gateway(k, ids[other]), k.list("Configuration")
            # spec.mtu auto: the MTU its gateway host found (status.mtu), the default before its first probe
            mtus[name] = {"value": gateway_mtu(gateways[name]) or DEFAULT_MTU, "source": mtu_source(gateways[name])}
            probes[name], skip = verify.plan(name, other, pods[name], pods[other], confs[name], ids[other],
                                             mtus[name]["value"], p["full"], gateway_nodes[name])
            skipped += skip
        out = {"probes": probes, "skipped": skipped, "cluster_ids": ids, "mtu": mtus}
        if p["benchmark"]:
            out["benchmark"] = verify.benchmark_pair("local", pods["local"], pods["remote"], confs["local"], ids["remote"],
                                                     gateway_nodes["local"], gateway_nodes["remote"])
            out["benchmark"]["transit"] = {name: TRANSIT[ROLES[gw["kind"]]][0].split("/")[0] for name, gw in gateways.items()}
        return out
    finally:
        remote.close()


def main():
    module = AnsibleModule(
        argument_spec=dict(**KUBE_ARG_SPEC, **REMOTE_KUBE_ARG_SPEC,
                           full=dict(type="bool", default=False), benchmark=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    out = with_kube(module, lambda kube: work(kube, module.params), user_errors=(verify.VerifyError,))
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
