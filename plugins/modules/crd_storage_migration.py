#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: crd_storage_migration
short_description: Rewrite the objects of the networking.liqo.io CRDs in their storage version
version_added: 0.1.0
description:
  - For every CRD of O(group) (or of O(crds)) whose C(status.storedVersions) lists more than its storage version,
    rewrites each of its objects through the storage version (a PUT of the object as read, which changes nothing
    in it but makes etcd hold it in the storage version), then sets C(status.storedVersions) to the storage version
    alone. A CRD whose C(storedVersions) is already the storage version alone is left untouched, so a second run
    changes nothing.
  - Every object is read before the first write; a CRD whose objects cannot be read (the conversion webhook down)
    fails the run with nothing written.
  - An object the apiserver refuses through the storage version (it no longer validates there) fails the run
    naming it, and its CRD keeps its C(storedVersions).
  - The controller does the same at startup when it takes the Lease (docs/upgrade.md).
author: liqo.fabric developers (@liqo-fabric)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - liqo.fabric.attributes
  - liqo.fabric.kube
options:
  group:
    description: API group whose CRDs are migrated.
    type: str
    default: networking.liqo.io
  crds:
    description: Names of the CRDs to migrate (for example C(configurations.networking.liqo.io)); default, every
      CRD of O(group). A name that is not a CRD of O(group) fails the run before anything is written.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Objects of the fabric's CRDs stored in the storage version, storedVersions trimmed
  liqo.fabric.crd_storage_migration:
    kubeconfig: /etc/liqo/a.kubeconfig

- name: One CRD only, as a dry run
  liqo.fabric.crd_storage_migration:
    kubeconfig: /etc/liqo/a.kubeconfig
    crds: [configurations.networking.liqo.io]
  check_mode: true
"""

RETURN = r"""
crds:
  description: One entry per CRD looked at.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The CRD's name.
      type: str
    storage_version:
      description: Its storage version.
      type: str
    stored_versions_before:
      description: Its C(status.storedVersions) as read.
      type: list
      elements: str
    stored_versions:
      description: Its C(status.storedVersions) after the run (as it would be, in check mode).
      type: list
      elements: str
    objects:
      description: Objects rewritten (to rewrite, in check mode).
      type: int
    changed:
      description: Whether the CRD was (would be) migrated.
      type: bool
  sample:
    - name: configurations.networking.liqo.io
      storage_version: v1beta1
      stored_versions_before: [v1alpha1, v1beta1]
      stored_versions: [v1beta1]
      objects: 3
      changed: true
objects:
  description: Objects rewritten (to rewrite, in check mode), all CRDs together.
  returned: success
  type: int
  sample: 3
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.liqo.fabric.plugins.module_utils.api.storage_migration import MigrationError, diff, migrate
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import KUBE_ARG_SPEC, with_kube


def main():
    module = AnsibleModule(
        argument_spec=dict(**KUBE_ARG_SPEC, group=dict(type="str", default="networking.liqo.io"),
                           crds=dict(type="list", elements="str")),
        supports_check_mode=True,
    )
    p = module.params
    for i, name in enumerate(p["crds"] or []):
        if not name.endswith("." + p["group"]):
            module.fail_json(msg="crds[%d]: '%s' is not a CRD name of group %s (<plural>.%s)"
                             % (i, name, p["group"], p["group"]))
    report = with_kube(module, lambda kube: migrate(kube, p["group"], p["crds"], module.check_mode),
                       user_errors=(MigrationError,))
    result = {"changed": any(e["changed"] for e in report), "crds": report,
              "objects": sum(e["objects"] for e in report)}
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = diff(report)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
