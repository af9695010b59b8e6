# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes side of a gateway: read its CRs, keep its key Secret, publish status and Connection."""

from __future__ import annotations

import base64

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.keys import GatewayKeyError, keys_from_secret
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import (
    KEY_SECRET_LABEL, KINDS, connection_object, plan, published_mtu, user_secret_name)
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.template import TemplateError, render_gateway_template
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import (
    ApiException, REMOTE_CLUSTER_ID_LABEL, now_rfc3339, set_condition)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (
    CHECK_MODE_PRIVATE_KEY, CHECK_MODE_PUBLIC_KEY, generate_keypair)

CONDITION = "Established"
# On a gateway's Connection: the gateway generation last built. A refused change of a gateway built before
# (an error, not ready) holds it: its tunnel, probe and the overlay's routes stay as they are.
BUILT_ANNOTATION = "fabric.liqo.io/built-generation"


def list_gateways(kube, namespace=None, name=None, kinds=None):
    out = []
    for kind in kinds or list(KINDS):
        for obj in kube.list(kind, namespace):
            obj.setdefault("kind", kind)
            if name and obj["metadata"]["name"] != name:
                continue
            out.append(obj)
    return out


def _owner_ref(gateway):
    return {"apiVersion": "networking.liqo.io/v1beta1", "kind": gateway["kind"], "name": gateway["metadata"]["name"],
            "uid": gateway["metadata"]["uid"], "controller": False, "blockOwnerDeletion": False}


def existing_public_key(kube, gateway, secret_name):
    """The public key of the gateway's key Secret, None when it has none yet (or the user's is unusable)."""
    if user_secret_name(gateway):
        try:
            return user_keys(kube, gateway)[0]
        except GatewayKeyError:
            return None
    data = (kube.get("Secret", gateway["metadata"]["namespace"], secret_name) or {}).get("data") or {}
    return base64.b64decode(data["publicKey"]).decode() if "publicKey" in data else None


def user_keys(kube, gateway):
    """(public key, private key) from the user's Secret named by spec.secretRef (never written here).
    Raises GatewayKeyError naming the field and the Secret."""
    ns, name = gateway["metadata"]["namespace"], user_secret_name(gateway)
    secret = kube.get("Secret", ns, name)
    if secret is None:
        raise GatewayKeyError("SecretNotFound", "spec.secretRef: Secret %s/%s of %s %s not found (it must hold the"
                              " gateway's WireGuard private key in data.privateKey)"
                              % (ns, name, gateway["kind"], gateway["metadata"]["name"]))
    return keys_from_secret(secret, gateway["kind"], ns, gateway["metadata"]["name"])


def ensure_key_secret(kube, gateway, secret_name, check_mode=False):
    """Keys of the gateway, creating its key Secret once (private key generated here, written only to the
    Secret). Returns (public_key, private_key, created); the keys are None in check mode before creation.
    A gateway with spec.secretRef uses the user's keys: nothing is generated or written (GatewayKeyError
    when they cannot be used)."""
    if user_secret_name(gateway):
        public, private = user_keys(kube, gateway)
        return public, private, False
    ns = gateway["metadata"]["namespace"]
    secret = kube.get("Secret", ns, secret_name)
    data = (secret or {}).get("data") or {}
    if "publicKey" in data and "privateKey" in data:
        return base64.b64decode(data["publicKey"]).decode(), base64.b64decode(data["privateKey"]).decode(), False
    if check_mode:
        return CHECK_MODE_PUBLIC_KEY, CHECK_MODE_PRIVATE_KEY, True
    private, public = generate_keypair()
    body = {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret_name, "namespace": ns, "ownerReferences": [_owner_ref(gateway)],
                         "labels": {KEY_SECRET_LABEL: "true",
                                    REMOTE_CLUSTER_ID_LABEL: (gateway["metadata"].get("labels") or {}).get(
                                        REMOTE_CLUSTER_ID_LABEL, "")}},
            "type": "Opaque", "stringData": {"privateKey": private, "publicKey": public}}
    if secret is None:
        kube.create(body)
    else:  # a Secret without keys (e.g. created by hand, empty): fill it
        kube.patch("Secret", ns, secret_name, {"stringData": body["stringData"]})
    return public, private, True


def gateway_plans(kube, endpoint_address, internal_cidr, namespace=None, name=None, kinds=None, check_mode=False,
                  validate=True):
    """(plans, private_keys, changed): one plan per gateway, key Secrets created where missing;
    private_keys maps a plan's interface name to its private key (never put into a plan).

    Each gateway's template is rendered and its manifests validated (server-side dry run) first: a gateway
    whose manifests fail gets an error and is not ready (nothing is built for it, no key Secret is created).
    validate=False skips that (a teardown)."""
    cluster_id = kube.cluster_id()
    gateways = list_gateways(kube, namespace, name, kinds)
    confs = kube.list("Configuration")
    pks = kube.list("PublicKey")
    siblings = {}
    plans, keys, changed = [], {}, False
    for gw in gateways:
        ns = gw["metadata"]["namespace"]
        if ns not in siblings:
            siblings[ns] = list_gateways(kube, ns)
        p = plan(gw, confs, pks, cluster_id, endpoint_address, internal_cidr, namespace_gateways=siblings[ns]).to_result()
        if validate:
            check_manifests(kube, gw, p)
        if p["error"] and p["error"]["reason"] in MANIFEST_REASONS + KEY_REASONS:  # never built: no key Secret written
            p["public_key"] = existing_public_key(kube, gw, p["secret_name"])
        else:
            try:
                p["public_key"], keys[p["interface"]], created = ensure_key_secret(kube, gw, p["secret_name"], check_mode)
            except GatewayKeyError as exc:
                key_error(p, exc)
                created = False
            changed = changed or created
        plans.append(p)
    hold_built(kube, plans)
    return plans, keys, changed


def hold_built(kube, plans):
    """Marks `held` the plans refused by an error (not ready) whose gateway was built before (its Connection says
    so): their dataplane, health probe and overlay routes are kept as they are; nothing is rebuilt from the
    refused spec and nothing torn down. A gateway being deleted or never built is not held."""
    for p in plans:
        p["held"] = False
        if p["ready"] or not p.get("error") or not p.get("remote_cluster_id"):
            continue
        conn = kube.get("Connection", p["namespace"], p["connection_name"]) or {}
        meta = conn.get("metadata") or {}
        owners = [o.get("uid") for o in meta.get("ownerReferences") or []]
        if (meta.get("annotations") or {}).get(BUILT_ANNOTATION) and p.get("uid") in owners:
            p["held"] = True
    return plans


KEY_REASONS = ("SecretNotFound", "InvalidSecretKey")


def key_error(plan_, exc):
    """Marks the plan an error (not ready): the user's key Secret cannot be used. Its earlier error is kept."""
    if not plan_.get("error") or plan_["error"]["reason"] == "MTUMismatch":
        plan_["error"] = {"reason": exc.reason, "message": str(exc)}
    plan_["ready"] = False
    plan_["peer"] = None
    return plan_


MANIFEST_REASONS = ("InvalidGatewayTemplate", "GatewayManifestRejected")


def built_gateways(kube, cluster_id, configurations):
    """Plans of the gateways the gateway role builds or holds (the overlay routes through these only): not
    being deleted, and ready with valid manifests, or held (see hold_built). Read-only: no key Secret is
    created."""
    pks = None
    out = []
    gateways = list_gateways(kube)
    for gw in gateways:
        if gw["metadata"].get("deletionTimestamp"):
            continue
        if pks is None:
            pks = kube.list("PublicKey")
        p = plan(gw, configurations, pks, cluster_id, None, need_endpoint=False,
                 namespace_gateways=[g for g in gateways if g["metadata"]["namespace"] == gw["metadata"]["namespace"]]).to_result()
        if p["ready"] and user_secret_name(gw):
            try:
                user_keys(kube, gw)
            except GatewayKeyError as exc:
                key_error(p, exc)
        if p["ready"]:
            check_manifests(kube, gw, p)
        if p["ready"] or hold_built(kube, [p])[0]["held"]:
            out.append(p)
    return out


def manifest_problem(kube, gateway, plan_):
    """Why the gateway's template cannot give valid in-cluster manifests: (reason, message), or None.
    Renders the template and validates every object with a server-side dry run (nothing is persisted)."""
    objs, error = render_manifests(kube, gateway, plan_)
    if error:
        return MANIFEST_REASONS[0], error
    for obj in objs:
        try:
            kube.apply(obj, dry_run=True)
        except ApiException as exc:
            if exc.status == 404 and kube.assumed_namespace(obj["metadata"].get("namespace")):
                continue  # check mode: its namespace is only planned, the objects cannot be dry-run there yet
            return MANIFEST_REASONS[1], "%s %s rendered from the template: rejected by the apiserver (%s): %s" % (
                obj["kind"], obj["metadata"].get("name"), exc.status, _api_message(exc))
    return None


def check_manifests(kube, gateway, plan_):
    """Marks the plan an error (not ready) when its manifests are invalid; keeps an earlier error (the CR's
    own fields are reported first). Records that the manifests were validated (publish skips a second check)."""
    if plan_.get("error") and plan_["error"]["reason"] not in ("MTUMismatch",):
        return plan_
    problem = manifest_problem(kube, gateway, plan_)
    plan_["manifests_checked"] = True
    if problem:
        plan_["error"] = {"reason": problem[0], "message": problem[1]}
        plan_["ready"] = False
    return plan_


TEMPLATE_REF = {"GatewayServer": "serverTemplateRef", "GatewayClient": "clientTemplateRef"}


def render_manifests(kube, gateway, plan_):
    """The in-cluster Deployment/Service the gateway's template renders to: ([objects], error or None)."""
    ref = (gateway.get("spec") or {}).get(TEMPLATE_REF[gateway["kind"]]) or {}
    if not ref.get("name"):
        return [], None
    tmpl = kube.get(ref.get("kind") or ("Wg%sTemplate" % gateway["kind"]), ref.get("namespace") or "liqo", ref["name"])
    if tmpl is None:
        return [], "%s.%s: template %s/%s not found" % ("spec", TEMPLATE_REF[gateway["kind"]],
                                                        ref.get("namespace") or "liqo", ref["name"])
    gw = dict(gateway)
    gw["status"] = dict(gateway.get("status") or {}, **plan_["status"])
    try:
        rendered = render_gateway_template(tmpl, gw)
    except TemplateError as exc:
        return [], str(exc)
    spec = rendered.get("spec") or {}
    out = []
    if spec.get("service"):
        out.append(service_with_gateway_fields(dict(spec["service"], apiVersion="v1", kind="Service"), gateway))
    if spec.get("deployment"):
        out.append(dict(spec["deployment"], apiVersion="apps/v1", kind="Deployment"))
    return out, None


def service_with_gateway_fields(service, gateway):
    """The rendered Service with the GatewayServer's own Service fields, whatever the template says:
    spec.serviceLabels / spec.serviceAnnotations merged into its metadata (they win over the template's, as in
    Liqo) and spec.endpoint.loadBalancerIP set on a LoadBalancer Service (endpoint_spec refuses it otherwise)."""
    spec = gateway.get("spec") or {}
    meta = dict(service.get("metadata") or {})
    for field, key in (("serviceLabels", "labels"), ("serviceAnnotations", "annotations")):
        extra = spec.get(field) or {}
        if extra:
            meta[key] = dict(meta.get(key) or {}, **dict((str(k), str(v)) for k, v in extra.items()))
    service = dict(service, metadata=meta)
    lb_ip = (spec.get("endpoint") or {}).get("loadBalancerIP")
    svc_spec = service.get("spec") or {}
    if lb_ip and svc_spec.get("type") == "LoadBalancer":
        service["spec"] = dict(svc_spec, loadBalancerIP=lb_ip)
    return service


def _strip_times(conditions):
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions or []]


def publish(kube, plan_, probe=None, check_mode=False, manifests="dry_run"):
    """Writes the gateway's status fields, creates/updates its Connection and validates (server-side dry
    run) or applies the in-cluster manifests its template renders to. Returns (changed, manifest error)."""
    changed = []
    kind, ns, name = plan_["kind"], plan_["namespace"], plan_["name"]
    gw = kube.get(kind, ns, name)
    if gw is None:
        return changed, None
    gw.setdefault("kind", kind)
    live_mtu = (gw.get("status") or {}).get("mtu") or {}
    if plan_.get("mtu_auto") and not (probe or {}).get("mtu_status") and live_mtu.get("source") == "probed":
        # the live probe of the path wrote it after this run planned: newer than the plan's
        plan_ = dict(plan_, status=dict(plan_["status"], mtu=live_mtu))
    manifest_error = None
    if manifests == "apply" and plan_.get("held"):
        manifests = "dry_run"   # a held gateway's pods run on as last built: its new rendering is checked, not rolled
    if manifests == "dry_run" and plan_.get("manifests_checked"):  # validated by the plan step of this run
        if (plan_.get("error") or {}).get("reason") in MANIFEST_REASONS:
            manifest_error = plan_["error"]["message"]
    elif manifests != "skip":
        objs, manifest_error = render_manifests(kube, gw, plan_)
        for obj in objs:
            try:
                if kube.apply(obj, dry_run=manifests == "dry_run" or check_mode) and manifests == "apply":
                    changed.append("%s %s/%s applied" % (obj["kind"], ns, obj["metadata"]["name"]))
            except ApiException as exc:
                if exc.status == 404 and kube.assumed_namespace(ns):
                    continue  # check mode: its namespace is only planned
                manifest_error = "%s %s: rejected by the apiserver (%s): %s" % (
                    obj["kind"], obj["metadata"].get("name"), exc.status, _api_message(exc))
    want = dict(gw.get("status") or {})
    want.update(plan_["status"])
    if published_mtu(plan_, probe):
        want["mtu"] = published_mtu(plan_, probe)
    if want != (gw.get("status") or {}):
        changed.append("%s/%s/%s status" % (kind, ns, name))
        if not check_mode:
            gw["status"] = want
            kube.replace_status(gw)

    # the live health probe (peer_health) patches the Connection's status too: a write that lost the race
    # to it reads the Connection again and retries
    for attempt in range(3):
        try:
            done = []
            _publish_connection(kube, plan_, probe, gw, check_mode, done)
            changed.extend(done)
            break
        except ApiException as exc:
            if exc.status != 409 or attempt == 2:
                raise
    return changed, manifest_error


def _publish_connection(kube, plan_, probe, gw, check_mode, changed):
    """Creates/updates the gateway's Connection; appends what changed to `changed`. A held gateway's Connection is
    left to its live health probe; a built one records the generation built."""
    if plan_.get("held"):
        return
    ns = plan_["namespace"]
    conn, reason, message = connection_object(plan_, probe, now_rfc3339())
    cur = kube.get("Connection", ns, plan_["connection_name"])
    if cur is None:
        changed.append("Connection/%s/%s created" % (ns, plan_["connection_name"]))
        if check_mode:
            return
        conn["metadata"]["ownerReferences"] = [_owner_ref(gw)]
        status = conn.pop("status")
        cur = kube.create(conn)
        cur["status"] = {}
        conn["status"] = status
    status = dict(cur.get("status") or {})
    status["value"] = conn["status"]["value"]
    if "latency" in conn["status"]:
        status["latency"] = conn["status"]["latency"]
    elif status.get("value") != "Connected":
        status.pop("latency", None)
    if "mtu" in conn["status"]:
        status["mtu"] = conn["status"]["mtu"]
    established = "True" if status["value"] == "Connected" else "False"
    status["conditions"], dummy = set_condition(status.get("conditions"), CONDITION, established, reason,
                                                message or reason, plan_.get("generation"))
    old = cur.get("status") or {}
    # latency changes on every probe: it alone is no reason to report a change
    same = (old.get("value") == status["value"]
            and _strip_times(old.get("conditions")) == _strip_times(status["conditions"])
            and ("latency" in old) == ("latency" in status) and old.get("mtu") == status.get("mtu"))
    if not same:
        changed.append("Connection/%s/%s %s" % (ns, plan_["connection_name"], status["value"]))
    if not same or status.get("latency") != old.get("latency"):
        if not check_mode:
            cur["status"] = status
            cur.setdefault("kind", "Connection")
            kube.replace_status(cur)
    built = str(plan_.get("generation") or "")
    if plan_.get("ready") and ((cur.get("metadata") or {}).get("annotations") or {}).get(BUILT_ANNOTATION) != built:
        changed.append("Connection/%s/%s built generation %s" % (ns, plan_["connection_name"], built))
        if not check_mode:
            kube.patch("Connection", ns, plan_["connection_name"], {"metadata": {"annotations": {BUILT_ANNOTATION: built}}})


def _api_message(exc):
    return exc.message if hasattr(exc, "message") else exc.reason
