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
import random
import time

from ansible_collections.liqo.fabric.plugins.module_utils.ipam.allocator import (
    Ipam, IpamError, configuration_owner, one_cidr, remote_status)
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import (
    ApiException, KubeError, set_condition)

LEDGER_NAMESPACE = "liqo"
LEDGER_NAME = "liqo-fabric-ipam"
LEDGER_KEY = "state.json"
CONDITION = "NetworkCIDRsConfigured"
MAX_CONFLICT_RETRIES = 20
# After a lost race, wait a random 0..min(attempt, 8) * BACKOFF_STEP seconds before re-reading, so a herd of
# allocators that all read the same ledger does not collide again on the next round.
BACKOFF_STEP = 0.01


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
        self.assumed = []          # check mode: the Configurations with the status they would get

    def as_dict(self):
        return {"changed": self.changed, "allocations": self.allocations, "errors": self.errors,
                "released": self.released, "status_updated": self.status_writes, "conflict_retries": self.retries}


NETWORK_CONFIGMAP = "liqo-fabric-network"
DEFAULT_LOCAL = {"external_cidr": "10.70.0.0/16", "internal_cidr": "10.80.0.0/16",
                 "pools": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"], "reserved": []}


def local_config(kube, given):
    """The local network parameters: each one `given` (not None) wins over ConfigMap liqo/liqo-fabric-network
    (written by playbooks/install.yml), which wins over the defaults. Raises KubeError without a pod CIDR."""
    data = {}
    if any(given.get(k) is None for k in ("pod_cidrs", "service_cidr", "external_cidr", "internal_cidr", "reserved")):
        cm = kube.get("ConfigMap", LEDGER_NAMESPACE, NETWORK_CONFIGMAP)
        data = (cm or {}).get("data") or {}
    from_cm = {"pod_cidrs": [c for c in (data.get("podCIDR") or "").split(",") if c] or None,
               "service_cidr": data.get("serviceCIDR") or None,
               "external_cidr": data.get("externalCIDR") or None,
               "internal_cidr": data.get("internalCIDR") or None,
               "reserved": [c for c in (data.get("reserved") or "").split(",") if c] if "reserved" in data else None}
    out = {}
    for key in ("pod_cidrs", "service_cidr", "external_cidr", "internal_cidr", "reserved", "pools"):
        value = given.get(key)
        if value is None:
            value = from_cm.get(key)
        if value is None:
            value = DEFAULT_LOCAL.get(key)
        out[key] = value
    if not out["pod_cidrs"]:
        raise KubeError("pod_cidrs: not given and ConfigMap %s/%s has no podCIDR (run liqo.fabric.install)"
                        % (LEDGER_NAMESPACE, NETWORK_CONFIGMAP))
    return out


def _read_ledger(kube):
    cm = kube.get("ConfigMap", LEDGER_NAMESPACE, LEDGER_NAME)
    if cm is None:
        return None, None
    return (cm.get("data") or {}).get(LEDGER_KEY), cm["metadata"]["resourceVersion"]


def _write_ledger(kube, text, resource_version):
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": LEDGER_NAME, "namespace": LEDGER_NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "liqo.fabric"}},
            "data": {LEDGER_KEY: text}}
    if resource_version is None:
        kube.create(body)  # 409 if someone created it first
    else:
        body["metadata"]["resourceVersion"] = resource_version
        kube.replace(body)


def _compute(ledger_text, local, configurations, namespace=None):
    """Pure part: (ipam, per-owner results, released) from the ledger text and the Configurations.

    With ``namespace``, ``configurations`` are that namespace's only: allocations owned by other
    namespaces are kept as the ledger has them (only this namespace's deleted owners are released).
    """
    if ledger_text:
        ipam = Ipam.loads(ledger_text, **local)
    else:
        ipam = Ipam(**local)
    results = ipam.adopt_configurations(configurations)
    present = [configuration_owner(c) for c in configurations]
    if namespace:
        prefix = namespace + "/"
        present.extend(o for o in ipam.owners() if not o.startswith(prefix))
    released = ipam.release_missing(present)
    return ipam, results, released


def _desired_status(conf, outcome):
    """The status for an allocation ({field: remapped}) or a refusal (IpamError). A refusal keeps the allocation
    in use, `outcome.kept` (the status's own when the error has none: a bad local configuration, which leaves
    the ledger alone): a live connection routes through it."""
    status = dict(conf.get("status") or {})
    generation = (conf.get("metadata") or {}).get("generation")
    if isinstance(outcome, IpamError):
        kept = getattr(outcome, "kept", None)
        kept = remote_status(status) if kept is None else kept
        message = str(outcome)
        if kept:
            status["remote"] = {"cidr": dict((f, [v]) for f, v in kept.items())}
            message += "; the allocation in use is kept (%s)" % ", ".join(
                "%s %s" % (f, kept[f]) for f in ("pod", "external") if f in kept)
        else:
            status.pop("remote", None)  # nothing allocated
        conditions, dummy = set_condition(status.get("conditions"), CONDITION, "False", outcome.reason,
                                          message, generation)
    else:
        spec_pod = (((conf.get("spec") or {}).get("remote") or {}).get("cidr") or {}).get("pod")
        # v1beta1's shape (the version the collection reads and writes): Liqo's list, of one CIDR
        status["remote"] = {"cidr": dict((f, [v]) for f, v in outcome.items())}
        conditions, dummy = set_condition(status.get("conditions"), CONDITION, "True", "Allocated",
                                          "pod CIDR %s remapped to %s" % (one_cidr(spec_pod, "spec.remote.cidr.pod"),
                                                                          outcome.get("pod")), generation)
    status["conditions"] = conditions
    return status


def _status_differs(old, new):
    def strip(status):
        s = dict(status or {})
        s["conditions"] = [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in s.get("conditions") or []]
        return s
    return strip(old) != strip(new)


def _mark_failed(kube, namespace, exc, check_mode):
    """A bad local configuration: every Configuration gets a False condition naming it and keeps the remote
    CIDRs in use. The ledger is left alone. Returns the owners whose status was (or would be) written."""
    written = []
    for conf in kube.list("Configuration", namespace):
        for dummy in range(5):
            status = _desired_status(conf, exc)
            if not _status_differs(conf.get("status"), status):
                break
            if check_mode:
                written.append(configuration_owner(conf))
                break
            body = dict(conf)
            body["status"] = status
            try:
                kube.replace_status(body)
                written.append(configuration_owner(conf))
                break
            except ApiException as err:
                if err.status == 404:
                    break
                if err.status != 409:
                    raise
            meta = conf["metadata"]
            conf = kube.get("Configuration", meta["namespace"], meta["name"])
            if conf is None:
                break
    return written


def reconcile(kube, local, namespace=None, check_mode=False):
    """Allocates remapped CIDRs for every Configuration (in `namespace`, or all) and writes their status.

    `local`: keyword arguments of Ipam (pod_cidrs, service_cidr, external_cidr, internal_cidr, reserved,
    pools). Raises IpamError for a bad local configuration (the ledger is not touched; each Configuration
    gets a False condition naming the problem and keeps its remote CIDRs) and KubeError for API trouble.
    A Configuration that cannot be served keeps the allocation it holds (see Ipam.adopt_configurations).
    """
    result = IpamReconcileResult()
    try:
        Ipam(**local)  # validates the local configuration before any allocation is computed
    except IpamError as exc:
        _mark_failed(kube, namespace, exc, check_mode)
        raise
    wrote = False
    for attempt in range(MAX_CONFLICT_RETRIES):
        result.retries = attempt
        if attempt:
            time.sleep(random.uniform(0, min(attempt, 8) * BACKOFF_STEP))
        ledger_text, ledger_rv = _read_ledger(kube)
        configurations = kube.list("Configuration", namespace)
        ipam, results, released = _compute(ledger_text, local, configurations, namespace)
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
            wrote = True
        result.changed = ledger_changed or wrote
        by_owner = {configuration_owner(c): c for c in configurations}
        stale = False
        for owner, outcome, _changed in results:
            conf = by_owner[owner]
            if isinstance(outcome, IpamError):
                result.errors[owner] = {"reason": outcome.reason, "message": str(outcome), "kept": outcome.kept}
            else:
                result.allocations[owner] = outcome
            status = _desired_status(conf, outcome)
            if not _status_differs(conf.get("status"), status):
                continue
            if owner not in result.status_writes:
                result.status_writes.append(owner)
            result.changed = True
            if check_mode:
                result.assumed.append(dict(conf, status=status))
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
            wrote = True
        if not stale:
            return result
        result.allocations, result.errors = {}, {}
    raise KubeError("ipam: gave up after %d conflicting writes; another allocator keeps winning" % MAX_CONFLICT_RETRIES)
