"""The pure checks of liqo.fabric.diagnose (module_utils/verify/diagnose.py); the playbook on a lab is
tests/e2e/test_diagnose.py."""
import email.utils

from ansible_collections.liqo.fabric.plugins.module_utils.verify import diagnose


def conf(name, pod, external, remapped_pod=None, remapped_external=None, conditions=None, shape=lambda v: [v]):
    """A Configuration as the API gives it in v1beta1 (Liqo's lists of one), or in another `shape`."""
    status = {"conditions": conditions or []}
    if remapped_pod:
        status["remote"] = {"cidr": {"pod": shape(remapped_pod), "external": shape(remapped_external)}}
    return {"kind": "Configuration", "metadata": {"name": name, "namespace": "liqo-tenant-" + name},
            "spec": {"remote": {"cidr": {"pod": shape(pod), "external": shape(external)}}}, "status": status}


def test_remaps_reported_and_overlaps_named():
    checks = diagnose.configuration_checks("a", [
        conf("b", "10.243.0.0/16", "10.70.0.0/16", "10.0.0.0/16", "10.1.0.0/16"),
        conf("c", "10.243.0.0/16", "10.70.0.0/16", "10.1.0.0/16", "10.2.0.0/16"),
        conf("d", "10.243.0.0/16", "10.70.0.0/16", conditions=[{"status": "False", "message": "pools too small"}]),
    ], "fix-it")
    by = {(c["check"], c["object"]): c for c in checks}
    assert by[("Configuration remapped", "Configuration liqo-tenant-b/b")]["ok"]
    assert by[("Configuration remapped", "Configuration liqo-tenant-b/b")]["detail"].startswith("pod 10.243.0.0/16 -> 10.0.0.0/16")
    d = by[("Configuration remapped", "Configuration liqo-tenant-d/d")]
    assert not d["ok"] and d["cause"] == "the IPAM failed: pools too small" and d["fix"] == "fix-it"
    overlap = [c for c in checks if c["check"] == "remapped CIDRs do not overlap"][0]
    assert not overlap["ok"]
    assert "liqo-tenant-b/b (external 10.1.0.0/16) and Configuration liqo-tenant-c/c (pod 10.1.0.0/16)" in overlap["detail"]


def test_remaps_read_in_either_version_shape():
    """v1alpha1's strings read as v1beta1's lists; a remap that is not a CIDR is named."""
    checks = diagnose.configuration_checks("a", [
        conf("b", "10.243.0.0/16", "10.70.0.0/16", "10.0.0.0/16", "10.1.0.0/16", shape=lambda v: v),
        conf("c", "10.243.0.0/16", "10.70.0.0/16", "10.2.0.0/16", "bogus")], "fix-it")
    by = {(c["check"], c["object"], c["ok"]): c for c in checks}
    assert by[("Configuration remapped", "Configuration liqo-tenant-b/b", True)]["detail"] == \
        "pod 10.243.0.0/16 -> 10.0.0.0/16, external 10.70.0.0/16 -> 10.1.0.0/16"
    bad = by[("Configuration remapped", "Configuration liqo-tenant-c/c", False)]
    assert bad["detail"] == "status.remote.cidr.external: 'bogus'" and bad["cause"] == "not a CIDR"


def test_missing_crd_names_the_crd_and_the_install():
    crds = [{"spec": {"group": "networking.liqo.io", "names": {"kind": "Configuration"},
                      "versions": [{"name": "v1beta1", "served": True, "storage": True}]}}]
    checks = diagnose.crd_checks("a", crds, "install-it")
    ok = [c for c in checks if c["ok"]]
    assert [c["object"] for c in ok] == ["customresourcedefinition configurations.networking.liqo.io"]
    missing = [c for c in checks if not c["ok"]]
    assert len(missing) == 6 and all(c["fix"] == "install-it" for c in missing)


def test_conversion_webhook_without_ca_bundle_is_named():
    def crd(client):
        return {"spec": {"group": "networking.liqo.io", "names": {"kind": "GatewayServer"},
                         "versions": [{"name": "v1beta1", "served": True, "storage": True}],
                         "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client}}}}
    service = {"namespace": "liqo", "name": "liqo-fabric-webhook"}
    checks = [c for client in ({"service": service}, {"service": service, "caBundle": "Q0E="},
                               {"url": "https://127.0.0.1:1/convert", "caBundle": "Q0E="})
              for c in diagnose.crd_checks("a", [crd(client)], "install-it") if c["check"] == "CRD conversion webhook"]
    assert [c["ok"] for c in checks] == [False, True, True]
    assert "Service liqo/liqo-fabric-webhook" in checks[0]["cause"] and "v1alpha1" in checks[0]["cause"]
    assert "rollout restart" in checks[0]["fix"] and "conversion_webhook_url" in checks[0]["fix"]
    assert checks[2]["detail"] == "https://127.0.0.1:1/convert, caBundle set"


def test_conversion_webhook_liveness_probe():
    """With a probe: each converted CRD whose clientConfig is complete is probed (its kind and plural); a probe's
    error fails the check naming the webhook and carrying the error; an incomplete clientConfig is not probed."""
    def crd(kind, client):
        return {"spec": {"group": "networking.liqo.io", "names": {"kind": kind},
                         "versions": [{"name": "v1beta1", "served": True, "storage": True}],
                         "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client}}}}
    url = {"url": "https://10.0.0.9:9443/convert", "caBundle": "Q0E="}
    service = {"service": {"namespace": "liqo", "name": "liqo-fabric-webhook"}, "caBundle": "Q0E="}
    probed = []

    def probe(kind, plural):
        probed.append((kind, plural))
        return None if kind == "Configuration" else 'conversion webhook for networking.liqo.io/v1beta1, Kind=%s failed: Post "x": connection refused' % kind
    crds = [crd("Configuration", url), crd("GatewayServer", service), crd("GatewayClient", {"url": "https://x/convert"})]
    got = {c["object"].split()[1].split(".")[0]: c for c in diagnose.crd_checks("a", crds, "install-it", probe=probe)
           if c["check"] == "CRD conversion webhook"}
    assert probed == [("Configuration", "configurations"), ("GatewayServer", "gatewayservers")]
    assert got["configurations"]["ok"] and got["configurations"]["detail"] == \
        "https://10.0.0.9:9443/convert, caBundle set, answers (a v1alpha1 dry-run create converted)"
    bad = got["gatewayservers"]
    assert not bad["ok"] and bad["cause"].startswith("the conversion webhook (Service liqo/liqo-fabric-webhook) does not answer")
    assert bad["detail"].startswith("a v1alpha1 dry-run create failed: conversion webhook for networking.liqo.io/v1beta1")
    assert "endpoints liqo-fabric-webhook" in bad["fix"] and "--mode webhook" in bad["fix"]
    assert not got["gatewayclients"]["ok"] and "no caBundle" in got["gatewayclients"]["cause"]


def test_conversion_probe_is_a_dry_run_of_a_valid_v1alpha1_object():
    from tests.unit.test_crds import validate  # pylint: disable=import-outside-toplevel
    for kind, plural in (("Configuration", "configurations"), ("GatewayServer", "gatewayservers"),
                         ("GatewayClient", "gatewayclients")):
        path, query, body = diagnose.conversion_probe_request(kind, plural)
        assert path == "/apis/networking.liqo.io/v1alpha1/namespaces/default/%s" % plural
        assert query == {"dryRun": "All", "timeout": "10s"}
        assert validate(dict(body, metadata={"name": "probe"})) == [], kind
        assert body["metadata"] == {"generateName": "liqo-fabric-diagnose-"}


def test_clock_skew_from_the_date_headers():
    now = 1_800_000_000.0
    same = diagnose.clock_skew_check("a/b", email.utils.formatdate(now, usegmt=True),
                                     email.utils.formatdate(now + 1, usegmt=True), now, now + 1)
    assert same["ok"] and "skew 0 s" in same["detail"]
    off = diagnose.clock_skew_check("a/b", email.utils.formatdate(now, usegmt=True),
                                    email.utils.formatdate(now + 60, usegmt=True), now, now)
    assert not off["ok"] and "skew 60 s" in off["detail"] and "NTP" in off["fix"]


def test_gateway_host_drift_and_a_dead_handshake():
    dataplane = {"gateways": [{"kind": "GatewayClient", "interface": "lwg1", "nat": {"changed": True},
                               "routes": {"changed": True, "added": ["0.0.0.0/0 dev lwg1"]}}], "sysctls": []}
    tunnels = [{"interface": {"name": "lwg1", "state": "present",
                              "peers": [{"endpoint": "192.0.2.1:51820", "latest_handshake_age": None}]}}]
    checks = diagnose.gateway_host_checks("gw", dataplane, tunnels, "fix-it")
    drift, sysctl, hs = checks
    assert not drift["ok"] and drift["detail"] == "differs: nat, routes; routes missing: 0.0.0.0/0 dev lwg1"
    assert sysctl["ok"]
    assert not hs["ok"] and "last handshake never" in hs["detail"] and "wrong public key" in hs["cause"]
    assert diagnose.gateway_host_checks("gw", {"skipped": True}, [], "f")[0]["ok"]


def test_node_drift_lists_what_differs():
    overlay = {"table": 18952, "links": {"actions": ["lov1: create link"]}, "routes": {"added": [], "removed": ["x"]},
               "rules": {"added": ["1900: from all to 10.0.0.0/16 lookup 18952"], "removed": []}, "nat": {"changed": False}}
    (c,) = diagnose.node_checks("n1", overlay, "fix-it")
    assert not c["ok"]
    assert c["detail"] == "lov1: create link; routes removed: x; rules missing: 1900: from all to 10.0.0.0/16 lookup 18952"


def test_the_report():
    text = diagnose.table([diagnose.check("a", "c1", "o1", True, "fine"),
                           diagnose.check("node-1 (local)", "c2", "o2", False, "bad", "because", "do this")])
    lines = text.splitlines()
    assert lines[0].startswith("PASS  a               c1")
    assert lines[1].startswith("FAIL  node-1 (local)  c2") and lines[1].endswith("o2: bad")
    assert lines[2:] == ["      cause: because", "      fix:   do this", "2 checks, 1 passed, 1 failed"]
