#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gateway_publish
short_description: Publish a gateway's status and its Connection
version_added: 0.1.0
description:
  - Writes the status of a C(GatewayServer)/C(GatewayClient) (endpoint, internalEndpoint, secretRef) and creates
    or updates the C(Connection) of the gateway, with C(status.value) C(Connecting), C(Connected) or C(Error),
    the latency measured by the probe and an C(Established) condition whose reason says why.
  - A gateway built from a ready plan gets the annotation C(fabric.liqo.io/built-generation) on its Connection. A
    held plan (a refused change of such a gateway) leaves the Connection to the live health probe, checks what its
    template renders to without applying it (O(manifests=apply) is a dry run, so its pods run on as last built), and
    the failure message says the gateway runs on as last built.
  - The plan comes from M(liqo.fabric.gateway_plan), the probe result from M(liqo.fabric.tunnel_probe).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes.no_diff
  - liqo.fabric.kube
options:
  plan:
    description: One element of RV(liqo.fabric.gateway_plan#module:gateways).
    type: dict
    required: true
  probe:
    description: The result of M(liqo.fabric.tunnel_probe) for this gateway, if it was probed.
    type: dict
  manifests:
    description:
      - What to do with the Deployment/Service the gateway's template (C(serverTemplateRef)/C(clientTemplateRef))
        renders to. V(dry_run) validates them with a server-side dry run (the agentless path, where the gateway
        runs on the host itself), V(apply) applies them (server-side apply), V(skip) does nothing.
    type: str
    choices: [dry_run, apply, skip]
    default: dry_run
"""

EXAMPLES = r"""
- name: Publish status and Connection
  liqo.fabric.gateway_publish:
    kubeconfig: /etc/liqo/kubeconfig
    plan: "{{ item }}"
    probe: "{{ probes[item.name] | default(omit) }}"
  loop: "{{ gateways.gateways }}"
  delegate_to: localhost
"""

RETURN = r"""
updated:
  description: What was (or would be) written.
  returned: always
  type: list
  elements: str
connection:
  description: Value and reason of the Connection.
  returned: always
  type: dict
manifest_error:
  description: Why the template's manifests could not be rendered or were rejected, else null.
  returned: always
  type: str
errors:
  description: On a manifest error or a refused field of the gateway (C(spec.endpoint.ports) of more than one port,
    C(serviceType) ExternalName, C(protocol) TCP, a missing or bad C(spec.secretRef) Secret, an ambiguous PublicKey),
    C(namespace/name) of the gateway -> its reason and message (the Connection is published first).
  returned: failure
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.api import publish
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import REFUSAL_REASONS, connection_value
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            plan=dict(type="dict", required=True),
            probe=dict(type="dict"),
            manifests=dict(type="str", choices=["dry_run", "apply", "skip"], default="dry_run"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    updated, manifest_error = with_kube(module, lambda kube: publish(kube, p["plan"], p["probe"], module.check_mode,
                                                                     p["manifests"]))
    value, reason, message = connection_value(p["plan"], p["probe"])
    result = dict(changed=bool(updated), updated=updated, manifest_error=manifest_error,
                  connection={"value": value, "reason": reason, "message": message})
    plan = p["plan"]
    # a refused change of a gateway built before: its tunnel runs on as it was
    held = " (refused: the gateway runs on as last built)" if plan.get("held") else ""
    # errors: per object, so the controller's Degraded condition carries the reason
    if (plan.get("error") or {}).get("reason") in REFUSAL_REASONS:
        # a field of the gateway refused (its Connection says so too, unless it is held)
        errors = {"%s/%s" % (plan["namespace"], plan["name"]): dict(plan["error"], message=plan["error"]["message"] + held)}
        module.fail_json(msg="%s %s/%s: %s%s" % (plan["kind"], plan["namespace"], plan["name"], plan["error"]["message"],
                                                 held), errors=errors, **result)
    if manifest_error:
        reason = (plan.get("error") or {}).get("reason") or "GatewayManifestRejected"
        errors = {"%s/%s" % (plan["namespace"], plan["name"]): {"reason": reason, "message": manifest_error + held}}
        module.fail_json(msg="gateway manifests: %s%s" % (manifest_error, held), errors=errors, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
