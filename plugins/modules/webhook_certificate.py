#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: webhook_certificate
short_description: Make the in-cluster conversion webhook's certificate and trust it in the CRDs
version_added: 0.1.0
description:
  - The certificate of the conversion webhook served by the controller pods behind Service O(service) (deploy/),
    kept in Secret O(namespace)/O(secret_name) with C(ca.crt), C(tls.crt) and C(tls.key), made when absent and renewed when
    it is unreadable, not for the Service or within O(renew_days) of its end; replicas racing to make it end up
    with the same one (create, or read the winner's).
  - Sets the CA as C(caBundle) of the CRDs O(crds) whose conversion strategy is C(Webhook) (a merge patch of that
    field alone).
  - With O(dest), writes C(tls.crt) and C(tls.key) there (0600) for C(--webhook-cert) / C(--webhook-key).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_check
  - liqo.fabric.kube
requirements:
  - cryptography
options:
  namespace:
    description: Namespace of the Secret and the Service.
    type: str
    default: liqo
  secret_name:
    description: Name of the Secret.
    type: str
    default: liqo-fabric-webhook-tls
  service:
    description: Name of the webhook's Service (the certificate is for C(<service>.<namespace>.svc)).
    type: str
    default: liqo-fabric-webhook
  crds:
    description: The CRDs converted by the webhook.
    type: list
    elements: str
    default: [configurations.networking.liqo.io, gatewayservers.networking.liqo.io, gatewayclients.networking.liqo.io]
  dest:
    description: Directory where C(tls.crt) and C(tls.key) are written (created 0700).
    type: path
  renew_days:
    description: Renew the certificate when it ends in fewer days.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: The conversion webhook's certificate
  liqo.fabric.webhook_certificate:
    dest: /run/liqo-fabric/webhook
"""

RETURN = r"""
changes:
  description: What was made, renewed or patched.
  returned: success
  type: list
  elements: str
  sample: ["Secret liqo/liqo-fabric-webhook-tls: made", "CustomResourceDefinition configurations.networking.liqo.io: caBundle"]
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.liqo.fabric.plugins.module_utils.kube import webhook_cert
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def _write(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def main():
    module = AnsibleModule(
        argument_spec=dict(**KUBE_ARG_SPEC, namespace=dict(type="str", default="liqo"),
                           secret_name=dict(type="str", default="liqo-fabric-webhook-tls"),
                           service=dict(type="str", default="liqo-fabric-webhook"),
                           crds=dict(type="list", elements="str", default=[
                               "configurations.networking.liqo.io", "gatewayservers.networking.liqo.io",
                               "gatewayclients.networking.liqo.io"]),
                           dest=dict(type="path"), renew_days=dict(type="int", default=30)),
        supports_check_mode=False,
    )
    if not webhook_cert.HAS_CRYPTOGRAPHY:
        module.fail_json(msg=missing_required_lib("cryptography"))
    p = module.params
    pems, changes = with_kube(module, lambda kube: webhook_cert.ensure(
        kube, p["namespace"], p["secret_name"], p["service"], p["crds"], renew_days=p["renew_days"]), user_errors=(RuntimeError,))
    if p["dest"]:
        os.makedirs(p["dest"], mode=0o700, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            _write(os.path.join(p["dest"], name), pems[name])
    module.exit_json(changed=bool(changes), changes=changes)


if __name__ == "__main__":
    main()
