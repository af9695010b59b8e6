#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_key_rotation
short_description: One API step of a gateway's WireGuard key rotation
version_added: 0.1.0
description:
  - The API side of rotating a gateway's WireGuard keys with overlap (playbook C(liqo.fabric.rotate_keys),
    docs/key-rotation.md). Each step is idempotent; the dataplane follows with the gateway role.
  - V(prepare) adds a next key pair to the gateway's key Secret (generated inside the module, written only
    to the Secret); V(announce) annotates the gateway's PublicKey in the peer cluster with the next public
    key; V(promote) makes the next key the Secret's only key (the old private key is overwritten) and stamps
    the rotation time; V(adopt) makes the next key the PublicKey's C(spec.publicKey).
  - Only public keys are returned or shown in a diff.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
  - liqo.fabric.kube
attributes:
  check_mode:
    details: Nothing is written; V(prepare) returns the placeholder key a check-mode plan uses.
  diff_mode:
    details: The Secret's public keys and whether private keys are set; the PublicKey's key and annotation.
options:
  step:
    description: The step (see the description).
    type: str
    required: true
    choices: [prepare, announce, promote, adopt]
  namespace:
    description:
      - V(prepare), V(promote) - the namespace of the gateway (the tenant namespace of the peer).
      - V(announce), V(adopt) - the namespace of the PublicKey in the peer's cluster.
    type: str
    required: true
  remote_cluster_id:
    description: V(prepare), V(promote) - the peer's cluster id (the gateway's C(liqo.io/remote-cluster-id) label).
    type: str
  name:
    description: V(announce), V(adopt) - the PublicKey's name (this cluster's name in the peer's cluster).
    type: str
  next_public_key:
    description:
      - V(announce), V(promote), V(adopt) - the next public key, as V(prepare) returned it.
    type: str
"""

EXAMPLES = r"""
- name: Next key of the gateway to cluster B
  liqo.fabric.gateway_key_rotation:
    kubeconfig: a.kubeconfig
    step: prepare
    namespace: liqo-tenant-b
    remote_cluster_id: b
  register: next_key

- name: Cluster B learns it
  liqo.fabric.gateway_key_rotation:
    kubeconfig: b.kubeconfig
    step: announce
    namespace: liqo-tenant-a
    name: a
    next_public_key: "{{ next_key.next_public_key }}"
"""

RETURN = r"""
kind:
  description: V(prepare), V(promote) - the gateway's kind.
  returned: prepare, promote
  type: str
name:
  description: The gateway's (V(prepare), V(promote)) or the PublicKey's name.
  returned: always
  type: str
secret:
  description: The gateway's key Secret.
  returned: prepare, promote
  type: str
public_key:
  description: The gateway's current public key (after V(promote) the new one).
  returned: prepare, promote
  type: str
next_public_key:
  description: The next public key in the Secret.
  returned: prepare
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import key_rotation as kr
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def _work(p, check):
    def work(kube):
        if p["step"] in ("prepare", "promote"):
            gw = kr.find_gateway(kube, p["namespace"], p["remote_cluster_id"])
            if p["step"] == "prepare":
                return kr.prepare(kube, gw, check)
            return kr.promote(kube, gw, p["next_public_key"], check)
        fn = kr.announce if p["step"] == "announce" else kr.adopt
        return fn(kube, p["namespace"], p["name"], p["next_public_key"], check)
    return work


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            step=dict(type="str", required=True, choices=["prepare", "announce", "promote", "adopt"]),
            namespace=dict(type="str", required=True),
            remote_cluster_id=dict(type="str"),
            name=dict(type="str"),
            next_public_key=dict(type="str", no_log=False),
        ),
        required_if=[("step", "prepare", ["remote_cluster_id"]),
                     ("step", "promote", ["remote_cluster_id", "next_public_key"]),
                     ("step", "announce", ["name", "next_public_key"]),
                     ("step", "adopt", ["name", "next_public_key"])],
        supports_check_mode=True,
    )
    result, diff = with_kube(module, _work(module.params, module.check_mode), user_errors=(kr.RotationError,))
    if diff and module._diff:  # pylint: disable=protected-access
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
