# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks of liqo.fabric.diagnose: each names what it looked at and, when it fails, the likely cause and
the fix. Pure functions over API objects and module results (no I/O), so the module, the filters and the
tests share them. A check: {where, check, object, ok, detail, cause, fix}."""

from __future__ import annotations

import email.utils
import ipaddress

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.plan import (
    MTU_ANNOTATION, MTU_AUTO, cidr_fields, peer_public_key, secret_name, user_secret_name)
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import PLURALS, REMOTE_CLUSTER_ID_LABEL

GROUP = "networking.liqo.io"
HANDSHAKE_MAX_AGE = 180  # s: WireGuard renews a handshake every 2 min on a live tunnel
CLOCK_SKEW_MAX = 5.0     # s: the apiservers' Date headers have 1 s resolution


def check(where, name, obj, ok, detail="", cause="", fix=""):
    return {"where": where, "check": name, "object": obj, "ok": bool(ok), "detail": detail,
            "cause": "" if ok else cause, "fix": "" if ok else fix}


def _ref(obj):
    meta = obj.get("metadata") or {}
    return "%s %s/%s" % (obj.get("kind"), meta.get("namespace"), meta.get("name")) if meta.get("namespace") else \
        "%s %s" % (obj.get("kind"), meta.get("name"))


def _remote_id(obj):
    return ((obj.get("metadata") or {}).get("labels") or {}).get(REMOTE_CLUSTER_ID_LABEL)


# ------------------------------------------------------------------------------------------------- API
def crd_checks(where, crds, install_fix, probe=None):
    """Every kind of the fabric has its CRD, served in some version, with v1beta1 stored. `probe(kind, plural)`
    (see conversion_probe_request) proves a converted kind's webhook answers: None, or the apiserver's error."""
    by_kind = {(c.get("spec") or {}).get("names", {}).get("kind"): c for c in crds
               if (c.get("spec") or {}).get("group") == GROUP}
    out = []
    for kind, plural in sorted(PLURALS.items()):
        crd = by_kind.get(kind)
        name = "customresourcedefinition %s.%s" % (plural, GROUP)
        if crd is None:
            out.append(check(where, "CRD installed", name, False, "", "the fabric's API is not installed on this cluster",
                             install_fix))
            continue
        versions = crd["spec"].get("versions") or []
        served = [v["name"] for v in versions if v.get("served")]
        stored = [v["name"] for v in versions if v.get("storage")]
        out.append(check(where, "CRD installed", name, served and stored,
                         "served %s, stored %s" % (",".join(served) or "none", ",".join(stored) or "none"),
                         "no version is served or stored", install_fix))
        conversion = crd["spec"].get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            client = (conversion.get("webhook") or {}).get("clientConfig") or {}
            configured = webhook_check(where, name, client)
            if configured["ok"] and probe is not None:
                configured = webhook_liveness_check(configured, client, probe(kind, plural))
            out.append(configured)
    return out


def _webhook_target(client):
    service = client.get("service") or {}
    return client["url"] if client.get("url") else "Service %s/%s" % (service.get("namespace"), service.get("name"))


def webhook_check(where, name, client):
    """A CRD converted by the webhook (deploy/crds/README.md) names a webhook the apiserver can trust: a URL with
    its CA (agentless install, the lab) or the in-cluster Service with the caBundle the controller's init
    container writes. Without one, every v1alpha1 request of the kind fails."""
    where_to = _webhook_target(client)
    return check(where, "CRD conversion webhook", name, bool(client.get("caBundle")) and (client.get("url") or client.get("service")),
                 "%s, caBundle set" % where_to,
                 "the conversion webhook (%s) has no caBundle: every v1alpha1 request of this kind fails" % where_to,
                 "in-cluster: the controller's init container sets it (kubectl apply -k deploy/, then "
                 "kubectl -n liqo rollout restart deployment/liqo-fabric-controller); agentless: ansible-playbook "
                 "liqo.fabric.install with -e conversion_webhook_url=... -e conversion_webhook_ca_bundle=... "
                 "(deploy/crds/README.md)")


# A minimal valid v1alpha1 object of each converted kind. Created with dryRun=All, nothing is written, but the
# apiserver converts it to the storage version (v1beta1) and the answer back to v1alpha1: a real round trip through
# the webhook, by URL (agentless) or Service (in-cluster) alike, with the apiserver's own TLS trust (the caBundle).
PROBE_SPECS = {
    "Configuration": {"remote": {"cidr": {"pod": "10.243.0.0/16"}}},
    "GatewayServer": {"endpoint": {"port": 51820}},
    "GatewayClient": {"endpoint": {"addresses": ["192.0.2.1"], "port": 51820}},
}
PROBE_NAMESPACE = "default"  # exists in every cluster; a dry run needs an existing namespace
PROBE_TIMEOUT = "10s"        # the apiserver gives up on the webhook after this (its own default is 30 s)


def conversion_probe_request(kind, plural):
    """(path, query, body) of the dry-run create of a v1alpha1 `kind` that makes the apiserver call its webhook."""
    body = {"apiVersion": "%s/v1alpha1" % GROUP, "kind": kind,
            "metadata": {"generateName": "liqo-fabric-diagnose-"}, "spec": PROBE_SPECS[kind]}
    return ("/apis/%s/v1alpha1/namespaces/%s/%s" % (GROUP, PROBE_NAMESPACE, plural),
            {"dryRun": "All", "timeout": PROBE_TIMEOUT}, body)


def webhook_liveness_check(configured, client, error):
    """The configuration check `configured`, failed when the probe's dry run got `error` (the apiserver's message)."""
    if not error:
        return dict(configured, detail=configured["detail"] + ", answers (a v1alpha1 dry-run create converted)")
    where_to = _webhook_target(client)
    return dict(configured, ok=False, detail="a v1alpha1 dry-run create failed: %s" % error,
                cause="the conversion webhook (%s) does not answer: every v1alpha1 request of this kind fails" % where_to,
                fix="in-cluster: kubectl -n liqo get pods -l app.kubernetes.io/name=liqo-fabric-controller and kubectl "
                    "-n liqo get endpoints liqo-fabric-webhook (every controller replica serves it on 9443); agentless: "
                    "start it where the URL points, python -m controller --mode webhook --webhook-cert C --webhook-key K "
                    "--webhook-address A --webhook-port P (deploy/crds/README.md)")


def configuration_checks(where, confs, reconcile_fix):
    """Each Configuration remapped by the IPAM, and no two remaps overlapping."""
    out, remaps = [], []
    for conf in confs:
        # one CIDR string each, whichever version's shape (Liqo's list of one in v1beta1)
        status = cidr_fields(((conf.get("status") or {}).get("remote") or {}).get("cidr"))
        spec = cidr_fields(((conf.get("spec") or {}).get("remote") or {}).get("cidr"))
        ok = bool(status.get("pod"))
        cond = next((c for c in (conf.get("status") or {}).get("conditions") or [] if c.get("status") == "False"), None)
        out.append(check(where, "Configuration remapped", _ref(conf), ok,
                         "pod %s -> %s, external %s -> %s" % (spec.get("pod"), status.get("pod"), spec.get("external"),
                                                              status.get("external")) if ok else "no status.remote.cidr",
                         "the IPAM failed: %s" % cond.get("message") if cond else "the IPAM has not run since it was created",
                         reconcile_fix))
        for field in ("pod", "external"):
            if status.get(field):
                try:
                    remaps.append((ipaddress.ip_network(status[field], strict=False), _ref(conf), field))
                except ValueError:
                    out.append(check(where, "Configuration remapped", _ref(conf), False, "status.remote.cidr.%s: %r"
                                     % (field, status[field]), "not a CIDR", reconcile_fix))
    overlaps = ["%s (%s %s) and %s (%s %s)" % (a[1], a[2], a[0], b[1], b[2], b[0])
                for i, a in enumerate(remaps) for b in remaps[i + 1:] if a[0].overlaps(b[0])]
    out.append(check(where, "remapped CIDRs do not overlap", "%d remapped CIDRs" % len(remaps), not overlaps,
                     "; ".join(overlaps), "two peers were given overlapping remaps (a ledger edited by hand?)",
                     reconcile_fix))
    return out


def gateway_checks(where, gateways, secrets, public_keys, connections, gateway_fix, local_cluster_id=None):
    """Per gateway: its key Secret (the fabric's or the user's spec.secretRef), the peer's PublicKey (matched
    as the gateway matches it: gateway.peer_public_key), equal MTUs, its Connection."""
    out = []
    secret_by_name = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in secrets}
    for gw in gateways:
        meta, spec = gw["metadata"], gw.get("spec") or {}
        ns, kind, ref = meta["namespace"], gw["kind"], _ref(gw)
        sname = user_secret_name(gw) or secret_name(kind, meta["name"])
        data = (secret_by_name.get((ns, sname)) or {}).get("data") or {}
        needed = ("privateKey",) if user_secret_name(gw) else ("privateKey", "publicKey")
        out.append(check(where, "gateway keys present", "%s (Secret %s/%s)" % (ref, ns, sname),
                         all(k in data for k in needed), "%s set (not shown)" % " and ".join(needed),
                         "the key Secret is missing or incomplete: the gateway was never planned, or it was deleted",
                         gateway_fix))
        remote = _remote_id(gw)
        found, ambiguous = peer_public_key(public_keys, gw, local_cluster_id,
                                           [g for g in gateways if g["metadata"]["namespace"] == ns])
        pks = [found] if found else []
        out.append(check(where, "peer's PublicKey present", "%s (%s=%s)" % (ref, REMOTE_CLUSTER_ID_LABEL, remote),
                         bool(pks), ", ".join(_ref(p) for p in pks) or ambiguous or "",
                         ambiguous or "the remote cluster's PublicKey was not applied here (in namespace %s)" % ns,
                         "apply the PublicKey the peer generates (ansible-playbook liqo.fabric.generate_publickey on it)"))
        if pks and spec.get("mtu") == MTU_AUTO:
            remote_mtu = ((pks[0]["metadata"].get("annotations") or {}).get(MTU_ANNOTATION))
            status = (gw.get("status") or {}).get("mtu") or {}
            out.append(check(where, "path MTU probed", ref, status.get("source") == "probed",
                             "tunnel MTU %s (%s), the path carries %s, the peer announced %s" % (
                                 status.get("value"), status.get("source") or "no status", status.get("pathMTU"),
                                 remote_mtu if remote_mtu is not None else "nothing"),
                             "spec.mtu is auto but no probe of the path reached the gateway's status yet: the tunnel"
                             " runs the default MTU",
                             "check the gateway host's live probe (peer_health) and the tunnel's handshake; "
                             "docs/path-mtu.md"))
        elif pks:
            remote_mtu = ((pks[0]["metadata"].get("annotations") or {}).get(MTU_ANNOTATION))
            mtu = spec.get("mtu", 1340)
            # a peer with auto announces what it found, and follows this side's MTU when smaller
            same = remote_mtu is None or str(remote_mtu) == str(mtu) or str(remote_mtu) == MTU_AUTO
            out.append(check(where, "MTU equal on both sides", ref, same,
                             "here %s, the peer %s" % (mtu, remote_mtu if remote_mtu is not None else "not announced"),
                             "the two gateways were given different MTUs: packets of the larger size are dropped",
                             "set the same spec.mtu on both sides (connect -e mtu=N)"))
        conn = next((c for c in connections if c["metadata"]["namespace"] == ns and _remote_id(c) == remote), None)
        value = ((conn or {}).get("status") or {}).get("value")
        cond = next((c for c in ((conn or {}).get("status") or {}).get("conditions") or []), {})
        latency = ((conn or {}).get("status") or {}).get("latency") or {}
        latency = latency.get("value") if isinstance(latency, dict) else latency
        out.append(check(where, "Connection Connected", _ref(conn) if conn else "%s: no Connection" % ref,
                         value == "Connected", "%s%s" % (value or "none", ", latency %s" % latency if latency else ""),
                         cond.get("message") or "the gateway was never brought up on its gateway host", gateway_fix))
    return out


def clock_skew_check(where, local_date, remote_date, local_seen, remote_seen):
    """The two apiservers' clocks, from their Date headers, each corrected by when this machine read it."""
    if not (local_date and remote_date):
        return check(where, "apiserver clocks agree", "Date headers", False, "no Date header from an apiserver",
                     "an apiserver (or a proxy) sends no Date header", "")
    a = email.utils.parsedate_to_datetime(local_date).timestamp() - local_seen
    b = email.utils.parsedate_to_datetime(remote_date).timestamp() - remote_seen
    skew = abs(a - b)
    return check(where, "apiserver clocks agree", "Date headers of both apiservers", skew <= CLOCK_SKEW_MAX,
                 "skew %.0f s (<= %.0f s wanted, 1 s resolution)" % (skew, CLOCK_SKEW_MAX),
                 "the clusters' clocks differ: expiring credentials and certificates fail on one side",
                 "synchronise both clusters' clocks (NTP)")


# ------------------------------------------------------------------------------------------- hosts
def gateway_host_checks(host, dataplane, tunnels, fix):
    """From a check-mode run of gateway_dataplane (what it would change) and wireguard_info per interface."""
    out = []
    if not dataplane or dataplane.get("skipped"):
        return [check(host, "gateway dataplane matches the plan", host, True, "no gateway to build on this host")]
    if dataplane.get("failed"):
        return [check(host, "gateway dataplane matches the plan", host, False, dataplane.get("msg", ""),
                      "the host could not be read", fix)]
    for gw in dataplane.get("gateways") or []:
        parts = [p for p in ("wireguard", "nat", "routes", "rules") if (gw.get(p) or {}).get("changed")]
        details = []
        for p in ("routes", "rules"):
            for verb in ("added", "replaced", "removed"):
                details += ["%s %s: %s" % (p, "missing" if verb == "added" else verb, x) for x in (gw.get(p) or {}).get(verb) or []]
        out.append(check(host, "gateway dataplane matches the plan", "%s %s" % (gw.get("kind"), gw.get("interface")),
                         not parts, "WireGuard interface, NAT table, tunnel routes and rules as planned" if not parts else
                         "differs: %s%s" % (", ".join(parts), ("; " + "; ".join(details[:6])) if details else ""),
                         "kernel state changed behind the fabric's back (drift), or never applied on this host", fix))
    sysctls = dataplane.get("sysctls") or []
    out.append(check(host, "forwarding and rp_filter sysctls", host, not sysctls,
                     "net.ipv4.ip_forward=1, rp_filter loose or off" if not sysctls else "would change: %s" % ", ".join(sysctls),
                     "a sysctl was reset (a reboot, another tool): forwarded or asymmetric traffic is dropped", fix))
    for info in tunnels or []:
        iface = info.get("interface") or {}
        name = iface.get("name") or info.get("item")
        if iface.get("state") != "present":
            out.append(check(host, "WireGuard handshake recent", name, False, "no such interface",
                             "the tunnel is not built on this host", fix))
            continue
        for peer in iface.get("peers") or [{}]:
            age = peer.get("latest_handshake_age")
            ok = age is not None and age <= HANDSHAKE_MAX_AGE
            seen = "never" if age is None else "%d s ago" % age
            out.append(check(host, "WireGuard handshake recent", "%s peer %s" % (name, peer.get("endpoint") or "-"), ok,
                             "last handshake %s, rx %s B, tx %s B" % (seen, peer.get("rx_bytes", 0), peer.get("tx_bytes", 0)),
                             "no handshake: wrong public key on one side, the server's endpoint unreachable (firewall,"
                             " NodePort, address) or the peer's gateway down",
                             "compare the PublicKeys of both sides; check UDP reachability of the endpoint"))
    return out


def node_checks(host, overlay, fix):
    """From a check-mode run of overlay_dataplane on a node: what it would change is drift."""
    if not overlay or overlay.get("skipped"):
        return [check(host, "overlay matches the plan", host, True, "no overlay planned for this host")]
    if overlay.get("failed"):
        return [check(host, "overlay matches the plan", host, False, overlay.get("msg", ""), "the node could not be read", fix)]
    diffs = list((overlay.get("links") or {}).get("actions") or [])
    for part in ("routes", "rules"):
        for verb in ("added", "replaced", "removed"):
            diffs += ["%s %s: %s" % (part, "missing" if verb == "added" else verb, x)
                      for x in (overlay.get(part) or {}).get(verb) or []]
    if (overlay.get("nat") or {}).get("changed"):
        diffs.append("masquerade bypass table %s differs" % overlay["nat"].get("table"))
    return [check(host, "overlay matches the plan", "%s (links, table %s, rules, bypass)" % (host, overlay.get("table")),
                  not diffs, "links up, routes and rules as planned" if not diffs else "; ".join(diffs[:8]),
                  "kernel state changed behind the fabric's back (drift), or the node was never reconciled", fix)]


# ------------------------------------------------------------------------------------------ report
def table(checks):
    """The short report: a line per check, the cause and fix under each failure, a summary line."""
    lines = []
    width = max([len(c["where"]) for c in checks] or [0])
    for c in checks:
        detail = (": " + c["detail"]) if c["detail"] else ""
        lines.append("%s  %-*s  %-36s %s%s" % ("PASS" if c["ok"] else "FAIL", width, c["where"], c["check"], c["object"], detail))
        if not c["ok"]:
            if c["cause"]:
                lines.append("      cause: %s" % c["cause"])
            if c["fix"]:
                lines.append("      fix:   %s" % c["fix"])
    failed = len([c for c in checks if not c["ok"]])
    lines.append("%d checks, %d passed, %d failed" % (len(checks), len(checks) - failed, failed))
    return "\n".join(lines)
