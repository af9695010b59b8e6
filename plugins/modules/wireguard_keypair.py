#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: wireguard_keypair
short_description: Generate a WireGuard key pair (X25519, base64 like wg genkey / wg pubkey)
version_added: 0.1.0
description:
  - With O(path), keeps a private key file on the target. The key is generated and written with mode
    C(0600) only when the file does not exist (never overwritten); an existing file is read, validated and
    its public key returned. The private key is not returned unless O(return_private_key=true).
  - Without O(path), generates a fresh key pair in memory on every run (no change on the host, so
    the task reports no change). This is how the gateway role creates the key it stores in a Kubernetes Secret;
    it needs O(return_private_key=true).
  - O(return_private_key=true) is refused unless the task sets C(no_log=true), so the private key
    cannot reach logs or the console by accident. Keep it in a no_log variable or a Secret only.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
attributes:
  check_mode:
    details: In check mode a missing O(path) is not written and RV(public_key) is null.
requirements:
  - cryptography (X25519; there is no fallback without it)
options:
  path:
    description: Private key file, created with mode C(0600) if absent. Its directory must exist.
    type: path
  return_private_key:
    description:
      - Also return the private key as RV(private_key). The task must set C(no_log=true).
    type: bool
    default: false
seealso:
  - module: liqo.fabric.wireguard_interface
"""

EXAMPLES = r"""
- name: Key file on the gateway host, public key for the peer
  liqo.fabric.wireguard_keypair:
    path: /etc/liqo/wireguard/private.key
  register: gw_key

- name: Key pair for a Kubernetes Secret (never printed)
  liqo.fabric.wireguard_keypair:
    return_private_key: true
  register: new_key
  no_log: true

- name: Store it
  liqo.fabric.k8s_apply:
    kubeconfig: /etc/liqo/kubeconfig
    definitions:
      - apiVersion: v1
        kind: Secret
        metadata: {name: gateway-keys, namespace: liqo}
        stringData:
          privateKey: "{{ new_key.private_key }}"
          publicKey: "{{ new_key.public_key }}"
  no_log: true
"""

RETURN = r"""
public_key:
  description: Public key, base64 (as C(wg pubkey) prints it). Null in check mode when the file would be created.
  returned: always
  type: str
  sample: gPcH5ew9HYctno8aXsSTgQbIXT6xLC4fWiFgFwRVxho=
private_key:
  description: Private key, base64. Only with O(return_private_key=true) on a C(no_log) task.
  returned: when return_private_key is true
  type: str
path:
  description: The private key file.
  returned: when path is given
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (
    encode_key, generate_keypair, public_key, read_private_key_file, write_private_key_file)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path"),
            return_private_key=dict(type="bool", default=False, no_log=False),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    want_private = module.params["return_private_key"]
    if want_private and not module.no_log:
        module.fail_json(msg="return_private_key: set no_log: true on the task to receive the private key")
    result = dict(changed=False)
    try:
        if path is None:
            priv, pub = generate_keypair()
        elif os.path.exists(path):
            priv = encode_key(read_private_key_file(path, field="path"))
            pub = public_key(priv)
        elif module.check_mode:
            priv = pub = None
            result["changed"] = True
        else:
            priv, pub = generate_keypair()
            result["changed"] = write_private_key_file(path, priv)
            if not result["changed"]:  # created concurrently: use the winner's key
                priv = encode_key(read_private_key_file(path, field="path"))
                pub = public_key(priv)
    except (WireGuardError, OSError) as e:
        module.fail_json(msg=str(e))
    result["public_key"] = pub
    if path is not None:
        result["path"] = path
    if want_private:
        result["private_key"] = priv
    module.exit_json(**result)


if __name__ == "__main__":
    main()
