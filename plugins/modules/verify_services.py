#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: verify_services
short_description: The Services liqo.fabric.verify reaches remote pods through (clusters with kube-proxy)
version_added: 0.1.0
description:
  - With V(state=present), makes in each of the two connected clusters a selector-less Service
    C(liqo/liqo-fabric-verify) of type NodePort whose only endpoint (an Endpoints object) is a pod of the other
    cluster at the address this cluster's IPAM remapped it to - how Liqo's users reach remote pods - and returns
    the TCP probes for M(liqo.fabric.pod_probe) (from a local pod to the Service's ClusterIP and to its NodePort on
    the pod's own node) and the iperf3 servers for M(liqo.fabric.pod_iperf) (in the remote pod).
  - With V(state=absent), deletes them (a Service an interrupted run left is replaced by the next run).
  - The pods are chosen as M(liqo.fabric.verify_plan) chooses the benchmark's - on nodes that are not gateway
    hosts when there are some.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_check
  - liqo.fabric.kube
  - liqo.fabric.remote_kube
options:
  state:
    description: Make the Services (V(present)) or delete them (V(absent)).
    type: str
    choices: [present, absent]
    default: present
"""

EXAMPLES = r"""
- name: Services to probe through
  liqo.fabric.verify_services:
    kubeconfig: /etc/liqo/a.kubeconfig
    remote_kubeconfig: /etc/liqo/b.kubeconfig
  register: verify_services

- name: Gone again
  liqo.fabric.verify_services:
    kubeconfig: /etc/liqo/a.kubeconfig
    remote_kubeconfig: /etc/liqo/b.kubeconfig
    state: absent
"""

RETURN = r"""
probes:
  description:
    - C(local) and C(remote), each a dict of node name to its TCP probes (the keys of M(liqo.fabric.verify_plan)'s
      probes, with C(size) V(TCP) and C(port)).
  returned: when O(state=present)
  type: dict
servers:
  description: C(local) and C(remote), each a dict of node name to the servers it starts (C(address), C(port)).
  returned: when O(state=present)
  type: dict
services:
  description: C(local) and C(remote), C(namespace/name clusterIP nodePort) of each Service.
  returned: when O(state=present)
  type: dict
deleted:
  description: C(Kind namespace/name) of each object deleted.
  returned: when O(state=absent)
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.kube.apply import (
    ApplyError, apply_all, check_definitions, delete_all)
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, REMOTE_KUBE_ARG_SPEC, Kube, with_kube
from ansible_collections.liqo.fabric.plugins.module_utils.verify import probes as verify
from ansible_collections.liqo.fabric.plugins.module_utils.verify import services as vs


def present(sides):
    ids = {name: k.cluster_id() for name, k in sides.items()}
    pods = {name: k.list("Pod") for name, k in sides.items()}
    gateway_nodes = {name: {n["metadata"]["name"] for n in k.list("Node", label_selector=verify.GATEWAY_HOST_LABEL + "=true")}
                     for name, k in sides.items()}
    out = {"probes": {}, "servers": {"local": {}, "remote": {}}, "services": {}}
    for name, other in (("local", "remote"), ("remote", "local")):
        k = sides[name]
        entry = vs.plan(name, other, pods[name], pods[other], k.list("Configuration"), ids[other], k.list("Node"),
                        gateway_nodes[name], gateway_nodes[other])
        _changed, applied, _diffs = apply_all(k, check_definitions(entry["manifests"], "present"))
        service = next(o for o in applied if o.get("kind") == "Service")
        rows = vs.probes(entry, service)
        out["probes"][name] = {entry["client"]["node"]: rows}
        out["servers"][other].setdefault(entry["server"]["node"], []).extend(vs.servers(entry))
        out["services"][name] = "%s/%s %s %s" % (vs.NAMESPACE, vs.NAME, rows[0]["to_address"], rows[1]["port"])
    return dict(out, changed=True)


def absent(sides):
    deleted = []
    for k in sides.values():
        gone, _resources, _diffs = delete_all(k, check_definitions(vs.manifests("0.0.0.0"), "absent"))
        deleted += gone
    return {"changed": bool(deleted), "deleted": deleted}


def main():
    module = AnsibleModule(
        argument_spec=dict(**KUBE_ARG_SPEC, **REMOTE_KUBE_ARG_SPEC,
                           state=dict(type="str", choices=["present", "absent"], default="present")),
        supports_check_mode=False,
    )

    def work(local):
        remote = Kube(module.params["remote_kubeconfig"])
        try:
            sides = {"local": local, "remote": remote}
            return present(sides) if module.params["state"] == "present" else absent(sides)
        finally:
            remote.close()

    module.exit_json(**with_kube(module, work, user_errors=(verify.VerifyError, ApplyError)))


if __name__ == "__main__":
    main()
