# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IPAM's state in the Kubernetes API and the reconcile of Configurations.

The ledger is one ConfigMap (`liqo/liqo-fabric-ipam`, key `state.json`) written with its
resourceVersion: of two allocators that read the same ledger, only the first write lands and the other
re-reads and recomputes, so no prefix is ever handed out twice. Configuration status is a projection of
the ledger (status.remote.cidr + a NetworkCIDRsConfigured condition); a lost ledger is rebuilt from those
statuses. A deleted Configuration's prefixes are released on the next reconcile.
"""

from __future__ import annotations

import json

from ansible_collections.liqo.fabric.plugins.module_utils.ipam import (
    Ipam, IpamError, configuration_owner)
from ansible_collections.liqo.fabric.plugins.module_utils.kube_client import (
    ApiException, KubeError, set_condition)

LEDGER_NAMESPACE = "liqo"
LEDGER_NAME = "liqo-fabric-ipam"
LEDGER_KEY = "state.json"
CONDITION = "NetworkCIDRsConfigured"
MAX_CONFLICT_RETRIES = 20


class IpamReconcileResult:
    def __init__(self):
        self.changed = False
        self.allocations = {}      # owner -> {"pod": ..., "external": ...}
        self.errors = {}           # owner -> {"reason": ..., "message": ...}
        self.released = []         # [{"owner", "field", "original", "remapped"}]
        self.status_writes = []    # owners whose status was (or would be) written
        self.ledger_before = None
        self.ledger_after = None
        self.retries = 0

    def as_dict(self):
        return {"changed": self.changed, "allocations": self.allocations, "errors": self.errors,
                "released": self.released, "status_updated": self.status_writes, "conflict_retries": self.retries}


def _read_ledger(kube):
    try:
        cm = kube.core.read_namespaced_config_map(LEDGER_NAME, LEDGER_NAMESPACE)
    except ApiException as exc:
        if exc.status == 404:
            return None, None
        raise
    return (cm.data or {}).get(LEDGER_KEY), cm.metadata.resource_version


def _write_ledger(kube, text, resource_version):
    body = {"metadata": {"name": LEDGER_NAME, "namespace": LEDGER_NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "liqo.fabric"}},
            "data": {LEDGER_KEY: text}}
    if resource_version is None:
        kube.core.create_namespaced_config_map(LEDGER_NAMESPACE, body)  # 409 if someone created it first
    else:
        body["metadata"]["resourceVersion"] = resource_version
        kube.core.replace_namespaced_config_map(LEDGER_NAME, LEDGER_NAMESPACE, body)


def _compute(ledger_text, local, configurations):
    """Pure part: (ipam, per-owner results, released) from the ledger text and the Configurations."""
    if ledger_text:
        ipam = Ipam.loads(ledger_text, **local)
    else:
        ipam = Ipam(**local)
    results = ipam.adopt_configurations(configurations)
    released = ipam.release_missing([configuration_owner(c) for c in configurations])
    return ipam, results, released


def _desired_status(conf, outcome):
    status = dict(conf.get("status") or {})
    generation = (conf.get("metadata") or {}).get("generation")
    if isinstance(outcome, IpamError):
        status.pop("remote", None)  # nothing allocated
        conditions, _ = set_condition(status.get("conditions"), CONDITION, "False", outcome.reason,
                                      str(outcome), generation)
    else:
        status["remote"] = {"cidr": dict(outcome)}
        conditions, _ = set_condition(status.get("conditions"), CONDITION, "True", "Allocated",
                                      "pod CIDR %s remapped to %s" % (
                                          ((conf.get("spec") or {}).get("remote") or {}).get("cidr", {}).get("pod"),
                                          outcome.get("pod")), generation)
    status["conditions"] = conditions
    return status


def _status_differs(old, new):
    def strip(status):
        s = dict(status or {})
        s["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in s.get("conditions") or []]
        return s
    return strip(old) != strip(new)


def reconcile(kube, local, namespace=None, check_mode=False):
    """Allocates remapped CIDRs for every Configuration (in `namespace`, or all) and writes their status.

    `local`: keyword arguments of Ipam (pod_cidrs, service_cidr, external_cidr, internal_cidr, reserved,
    pools). Raises IpamError for a bad local configuration (nothing written) and KubeError for API trouble.
    """
    result = IpamReconcileResult()
    Ipam(**local)  # validates the local configuration before anything is read or written
    for attempt in range(MAX_CONFLICT_RETRIES):
        result.retries = attempt
        ledger_text, ledger_rv = _read_ledger(kube)
        configurations = kube.list("Configuration", namespace)
        ipam, results, released = _compute(ledger_text, local, configurations)
        new_text = ipam.dumps()
        result.ledger_before = json.loads(ledger_text) if ledger_text else None
        result.ledger_after = json.loads(new_text)
        result.released = [a.to_dict() for a in released]
        ledger_changed = new_text != (ledger_text or "")
        if ledger_changed and not check_mode:
            try:
                _write_ledger(kube, new_text, ledger_rv)
            except ApiException as exc:
                if exc.status == 409:
                    continue  # another allocator committed first: recompute from its ledger
                raise
        result.changed = ledger_changed
        by_owner = {configuration_owner(c): c for c in configurations}
        stale = False
        for owner, outcome, _changed in results:
            conf = by_owner[owner]
            if isinstance(outcome, IpamError):
                result.errors[owner] = {"reason": outcome.reason, "message": str(outcome)}
            else:
                result.allocations[owner] = outcome
            status = _desired_status(conf, outcome)
            if not _status_differs(conf.get("status"), status):
                continue
            result.status_writes.append(owner)
            result.changed = True
            if check_mode:
                continue
            body = dict(conf)
            body["status"] = status
            try:
                kube.replace_status(body)
            except ApiException as exc:
                if exc.status in (404, 409):  # deleted or changed meanwhile: the next pass sees it
                    stale = True
                    break
                raise
        if not stale:
            return result
        result.allocations, result.errors, result.status_writes = {}, {}, []
    raise KubeError("ipam: gave up after %d conflicting writes; another allocator keeps winning" % MAX_CONFLICT_RETRIES)
