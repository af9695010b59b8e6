#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: crd_conversion_webhook
short_description: Point the CRDs' conversion webhook at the webhook that serves the cluster
version_added: 0.1.0
description:
  - Returns O(definitions) with C(spec.conversion.webhook.clientConfig) of every CRD whose conversion
    strategy is C(Webhook) set to where the conversion webhook (C(python -m controller --mode webhook), or the
    controller with C(--webhook-cert)) is reached by the cluster's apiserver. Reads the cluster, writes nothing.
  - With O(url), that URL and O(ca_bundle) (a webhook outside the cluster, for example on the apiserver's host).
  - Without O(url), the ConfigMap C(kube-system/liqo-fabric-conversion-webhook) (keys C(url) and C(caBundle)) when
    it exists; an out-of-cluster webhook registers itself there (the lab's does, see docs/lab.md).
  - Otherwise the definitions are returned unchanged, for the in-cluster Service C(liqo/liqo-fabric-webhook) of the
    deploy manifests, whose C(caBundle) the in-cluster webhook writes itself (deploy/crds/README.md).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
options:
  definitions:
    description: The CRDs (as read from deploy/crds); other objects are returned unchanged.
    type: list
    elements: dict
    required: true
  url:
    description: HTTPS URL of the webhook's C(/convert), reachable by the apiserver.
    type: str
  ca_bundle:
    description: Base64 of the PEM CA certificate(s) that signed the webhook's serving certificate (with O(url)).
    type: str
"""

EXAMPLES = r"""
- name: Where the conversion webhook is
  liqo.fabric.crd_conversion_webhook:
    kubeconfig: /etc/liqo/a.kubeconfig
    definitions: "{{ query('ansible.builtin.file', *query('ansible.builtin.fileglob', 'crds/*.yaml')) | map('ansible.builtin.from_yaml') | list }}"
  register: crds

- name: The CRDs, pointing at it
  liqo.fabric.k8s_apply:
    kubeconfig: /etc/liqo/a.kubeconfig
    definitions: "{{ crds.definitions }}"
"""

RETURN = r"""
definitions:
  description: O(definitions) with the webhook's C(clientConfig) in the CRDs converted by the webhook.
  returned: success
  type: list
  elements: dict
webhook:
  description: Where the webhook is, as C(clientConfig) without the CA (C(url) or C(service)), and from where
    (C(parameters), C(configmap) or C(manifests)).
  returned: success
  type: dict
  sample: {source: configmap, url: "https://127.0.0.1:40123/convert"}
"""

import base64
import binascii
import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube

REGISTRATION = ("kube-system", "liqo-fabric-conversion-webhook")


def client_config(definitions, url, ca_bundle):
    """The definitions with clientConfig {url, caBundle} in every CRD of strategy Webhook."""
    out = copy.deepcopy(definitions)
    for crd in out:
        if crd.get("kind") != "CustomResourceDefinition":
            continue
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            conversion.setdefault("webhook", {})["clientConfig"] = {"url": url, "caBundle": ca_bundle}
    return out


def without_null_url(definitions):
    """The definitions without the files' `url: null` (there for kubectl apply over a URL-pointed CRD): an applied
    object names only what it sets."""
    out = copy.deepcopy(definitions)
    for crd in out:
        config = (((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig")
        if isinstance(config, dict) and "url" in config and config["url"] is None:
            del config["url"]
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(**KUBE_ARG_SPEC, definitions=dict(type="list", elements="dict", required=True),
                           url=dict(type="str"), ca_bundle=dict(type="str")),
        required_together=[("url", "ca_bundle")],
        supports_check_mode=True,
    )
    p = module.params
    url, ca_bundle, source = p["url"], p["ca_bundle"], "parameters"
    if not url:
        cm = with_kube(module, lambda kube: kube.get("ConfigMap", *REGISTRATION))
        data = (cm or {}).get("data") or {}
        url, ca_bundle, source = data.get("url"), data.get("caBundle", ""), "configmap"
    if not url:
        module.exit_json(changed=False, definitions=without_null_url(p["definitions"]), webhook={"source": "manifests"})
    where = "url" if source == "parameters" else "ConfigMap %s/%s" % REGISTRATION
    if not url.startswith("https://"):
        module.fail_json(msg="%s: the conversion webhook's URL must be https://, got %r" % (where, url))
    try:
        if b"BEGIN CERTIFICATE" not in base64.b64decode(ca_bundle, validate=True):
            raise ValueError("no PEM certificate")
    except (binascii.Error, ValueError) as exc:
        module.fail_json(msg="%s: caBundle must be the base64 of PEM CA certificates (%s)" % (where, exc))
    module.exit_json(changed=False, definitions=client_config(p["definitions"], url, ca_bundle),
                     webhook={"source": source, "url": url})


if __name__ == "__main__":
    main()
