#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: diagnose_api
short_description: The API side of liqo.fabric.diagnose, for one cluster
version_added: 0.1.0
description:
  - Reads the fabric's objects of one cluster and returns checks, each naming the object it looked at and,
    when it fails, the likely cause and the fix; writes nothing.
  - Checks the CRDs (installed, versions served and stored; for the converted kinds, that the conversion webhook
    answers, by a v1alpha1 dry-run create the apiserver converts through it, which writes nothing), each
    Configuration remapped by the IPAM and no two remaps overlapping, per gateway its key Secret (never shown),
    the peer's PublicKey, equal MTUs on both sides and its Connection; with O(remote_kubeconfig), the skew
    between the two apiservers' clocks.
  - The host side (WireGuard handshakes, NAT, routes, rules, overlay) is checked by the playbook
    C(liqo.fabric.diagnose) on the gateway hosts and nodes.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
  - liqo.fabric.remote_kube
options:
  remote_kubeconfig:
    description: Kubeconfig of the peer cluster, for the clock skew check (optional).
    required: false
  cluster:
    description: Name of this cluster in the checks' C(where) field.
    type: str
    default: local
"""

EXAMPLES = r"""
- name: The API side of the fabric
  liqo.fabric.diagnose_api:
    kubeconfig: /etc/liqo/a.kubeconfig
    remote_kubeconfig: /etc/liqo/b.kubeconfig
  register: api_checks

- name: Show the failed checks
  ansible.builtin.debug:
    msg: "{{ api_checks.checks | rejectattr('ok') | list }}"
"""

RETURN = r"""
checks:
  description: One entry per check.
  returned: always
  type: list
  elements: dict
  contains:
    where:
      description: The cluster (O(cluster)) or host the check looked at.
      type: str
    check:
      description: What was checked.
      type: str
    object:
      description: The object looked at.
      type: str
    ok:
      description: Whether the check passed.
      type: bool
    detail:
      description: What was found.
      type: str
    cause:
      description: The likely cause of a failure (empty when it passed).
      type: str
    fix:
      description: What fixes it (empty when it passed).
      type: str
  sample:
    - {where: local, check: MTU equal on both sides, object: GatewayClient liqo-tenant-b/b, ok: false,
       detail: "here 1340, the peer 1300", cause: "the two gateways were given different MTUs",
       fix: "set the same spec.mtu on both sides (connect -e mtu=N)"}
cluster_id:
  description: The cluster's id, null when it has none (a failed check says so).
  returned: always
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import KEY_SECRET_LABEL, KINDS, user_secret_name
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, ApiException, Kube, KubeError, with_kube
from ansible_collections.liqo.fabric.plugins.module_utils.verify import diagnose


def conversion_probe(kube):
    """probe(kind, plural) for diagnose.crd_checks: None when the apiserver converted a v1alpha1 dry-run create
    through the kind's webhook, else the apiserver's error."""
    def probe(kind, plural):
        path, query, body = diagnose.conversion_probe_request(kind, plural)
        try:
            kube.request("POST", path, query, body)
        except ApiException as exc:
            return exc.message
        return None
    return probe


def gather(kube, p):
    where = p["cluster"]
    kc = "-e kubeconfig=%s" % (p["kubeconfig"] or "...")
    checks = diagnose.crd_checks(where, kube.list("CustomResourceDefinition"),
                                 "ansible-playbook liqo.fabric.install %s -e pod_cidr=..." % kc, probe=conversion_probe(kube))
    if any(not c["ok"] for c in checks):
        return checks  # without the CRDs nothing else can be read
    checks += diagnose.configuration_checks(where, kube.list("Configuration"),
                                            "ansible-playbook liqo.fabric.reconcile_ipam %s" % kc)
    gateways = [dict(g, kind=k) for k in KINDS for g in kube.list(k)]
    secrets = kube.list("Secret", label_selector=KEY_SECRET_LABEL + "=true")
    for g in gateways:  # the users' own key Secrets (spec.secretRef)
        name = user_secret_name(g)
        if name and kube.get("Secret", g["metadata"]["namespace"], name):
            secrets.append(kube.get("Secret", g["metadata"]["namespace"], name))
    checks += diagnose.gateway_checks(where, gateways, secrets, kube.list("PublicKey"), kube.list("Connection"),
                                      "ansible-playbook -i INVENTORY liqo.fabric.reconcile_gateway %s -e gateway_group=..." % kc,
                                      local_cluster_id=kube.cluster_id())
    if p["remote_kubeconfig"]:
        remote = Kube(p["remote_kubeconfig"])
        try:
            kube.request("GET", "/version")
            local_seen = time.time()
            remote.request("GET", "/version")
            remote_seen = time.time()
            checks.append(diagnose.clock_skew_check("%s/remote" % where, kube.conn.last_date, remote.conn.last_date,
                                                    local_seen, remote_seen))
        finally:
            remote.close()
    return checks


def main():
    module = AnsibleModule(
        argument_spec=dict(**KUBE_ARG_SPEC, remote_kubeconfig=dict(type="path"), cluster=dict(type="str", default="local")),
        supports_check_mode=True,
    )

    def work(kube):
        checks = gather(kube, module.params)
        try:
            cluster_id = kube.cluster_id()
        except KubeError as exc:  # no identity yet is a finding, not a failure of the diagnosis
            cluster_id = None
            checks.append(diagnose.check(module.params["cluster"], "cluster identity", "ConfigMap liqo/liqo-clusterid-configmap",
                                         False, str(exc), "the cluster was never installed",
                                         "ansible-playbook liqo.fabric.install -e kubeconfig=... -e pod_cidr=..."))
        return {"checks": checks, "cluster_id": cluster_id}

    out = with_kube(module, work)
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
