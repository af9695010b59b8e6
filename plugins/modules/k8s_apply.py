#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: k8s_apply
short_description: Apply or delete Kubernetes objects with server-side apply, fast
version_added: 0.1.0
description:
  - Applies a list of objects in order (a Namespace before the objects in it) with server-side apply, one
    C(PATCH) per object (C(application/apply-patch+yaml), C(force=true)), or deletes them.
  - Talks to the apiserver with the collection's small REST client, so a task costs a fraction of what
    C(kubernetes.core.k8s) costs (no import of the official client).
  - Reports C(changed) only when an object really changed (its C(resourceVersion) moved); applying the same
    definitions again changes nothing.
  - Check mode is a server-side dry run (C(dryRun=All)), so the apiserver validates and defaults the objects
    and nothing is persisted. Diff mode shows each changed object before and after, without the apiserver's
    bookkeeping (C(managedFields), C(resourceVersion), C(generation), C(uid), C(creationTimestamp)).
  - The data of Secrets (C(data), C(stringData)) is never returned, neither in results nor in diffs.
  - Supported kinds are those of the collection's client (core Namespace, Secret, ConfigMap, Service, ...,
    apps Deployment and DaemonSet, CustomResourceDefinition and the C(networking.liqo.io) kinds); another kind
    fails naming the supported ones.
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
  - liqo.fabric.kube
options:
  definitions:
    description:
      - The objects, applied (or deleted) in the order given. Each needs C(kind), C(metadata.name) and, for
        namespaced kinds, C(metadata.namespace); C(apiVersion) is filled in when left out.
      - With O(state=absent), a namespaced definition without C(metadata.name) stands for every object of its
        kind in its namespace that carries its C(metadata.labels) (all of them when it has none).
    type: list
    elements: dict
    required: true
  state:
    description: V(present) applies the objects, V(absent) deletes them (a missing object is fine).
    type: str
    choices: [present, absent]
    default: present
  field_manager:
    description: Field manager of the server-side apply.
    type: str
    default: liqo-fabric
  wait:
    description:
      - With O(state=absent), wait until the deleted objects are gone (finalizers done).
      - With O(state=present) and O(wait_condition), wait until every object has that condition.
    type: bool
    default: false
  wait_condition:
    description: Condition in C(status.conditions) to wait for with O(wait=true) and O(state=present).
    type: dict
    suboptions:
      type:
        description: The condition's type, for example V(Established) for a CustomResourceDefinition.
        type: str
        required: true
      status:
        description: The status it must have.
        type: str
        default: "True"
  wait_timeout:
    description: Seconds to wait for each object.
    type: int
    default: 120
seealso:
  - module: liqo.fabric.cluster_info
"""

EXAMPLES = r"""
- name: Tenant namespace and the Configuration in it
  liqo.fabric.k8s_apply:
    kubeconfig: /etc/liqo/kubeconfig
    definitions:
      - {apiVersion: v1, kind: Namespace, metadata: {name: liqo-tenant-b}}
      - apiVersion: networking.liqo.io/v1beta1
        kind: Configuration
        metadata: {name: cluster-b, namespace: liqo-tenant-b}
        spec:
          remote:
            cidr: {pod: [10.243.0.0/16], external: [10.70.0.0/16]}

- name: CRDs, applied and then waited for
  vars:
    crd_files: "{{ query('ansible.builtin.fileglob', 'crds/*.yaml') }}"
  liqo.fabric.k8s_apply:
    kubeconfig: /etc/liqo/kubeconfig
    definitions: "{{ query('ansible.builtin.file', *crd_files) | map('ansible.builtin.from_yaml') | list }}"
    wait: true
    wait_condition: {type: Established}

- name: Every PublicKey of the namespace, and the key Secrets with a label
  liqo.fabric.k8s_apply:
    kubeconfig: /etc/liqo/kubeconfig
    state: absent
    wait: true
    definitions:
      - {apiVersion: networking.liqo.io/v1beta1, kind: PublicKey, metadata: {namespace: liqo-tenant-b}}
      - {apiVersion: v1, kind: Secret, metadata: {namespace: liqo-tenant-b, labels: {networking.liqo.io/gateway-keys: "true"}}}
"""

RETURN = r"""
resources:
  description:
    - The objects as the apiserver returned them, in order (in check mode, as the dry run returned them;
      with O(state=absent), the deleted objects). C(managedFields) are left out, Secret data values are
      replaced by C(VALUE_REDACTED).
  returned: always
  type: list
  elements: dict
result:
  description: The only element of RV(resources) when O(definitions) has exactly one named object, as
    C(kubernetes.core.k8s) returns it.
  returned: when O(definitions) has one named object and it was applied or deleted
  type: dict
assumed:
  description: Check mode only, consumed by the collection's action plugin (not shown in the task's result) the
    objects this run would have written (or deleted), for the next steps of the same check-mode run.
  returned: in check mode
  type: list
  elements: dict
deleted:
  description: C(Kind namespace/name) of each object deleted (or that would be, in check mode).
  returned: when O(state=absent)
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.kube.apply import (
    ApplyError, apply_all, check_definitions, delete_all, redact, secret_values, wait_condition, wait_deleted)
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def main():
    module = AnsibleModule(
        argument_spec=dict(
            **KUBE_ARG_SPEC,
            definitions=dict(type="list", elements="dict", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            field_manager=dict(type="str", default="liqo-fabric"),
            wait=dict(type="bool", default=False),
            wait_condition=dict(type="dict", options=dict(type=dict(type="str", required=True),
                                                          status=dict(type="str", default="True"))),
            wait_timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    # Secret values stay out of everything the module prints, its echo of the arguments included
    module.no_log_values.update(v for v in secret_values(p["definitions"]) if len(v) >= 6)
    raw = p["definitions"]
    p["definitions"] = [redact(d) for d in raw]
    try:
        definitions = check_definitions(raw, p["state"])
    except ApplyError as exc:
        module.fail_json(msg=str(exc))
    if p["wait_timeout"] < 0:
        module.fail_json(msg="wait_timeout: must be >= 0, got %s" % p["wait_timeout"])

    def work(kube):
        out = {}
        if p["state"] == "present":
            changed, resources, diffs = apply_all(kube, definitions, module.check_mode, p["field_manager"])
            if p["wait"] and p["wait_condition"] and not module.check_mode:
                wait_condition(kube, resources, p["wait_condition"]["type"], p["wait_condition"]["status"],
                               p["wait_timeout"])
        else:
            deleted, resources, diffs = delete_all(kube, definitions, module.check_mode)
            changed, out["deleted"] = bool(deleted), deleted
            if p["wait"] and not module.check_mode:
                wait_deleted(kube, resources, p["wait_timeout"])
        out.update(changed=changed, resources=resources)
        if module.check_mode:  # what a check-mode run's next steps see (plugin_utils/check_plan.py)
            out["assumed"] = resources if p["state"] == "present" else [dict(r, absent=True) for r in resources]
        if len(definitions) == 1 and definitions[0]["metadata"].get("name") and len(resources) == 1:
            out["result"] = resources[0]
        if module._diff:  # pylint: disable=protected-access
            out["diff"] = diffs
        return out

    module.exit_json(**with_kube(module, work, user_errors=(ApplyError,)))


if __name__ == "__main__":
    main()
