"""liqo.fabric.k8s_apply against a real apiserver (one lab cluster): server-side apply and its change reporting,
check mode as a dry run, diffs, validation errors naming the field, deletes, and Secret data never shown."""
import base64
import json
import os
import shutil

import pytest

from tests.ansible_run import run_module
from tests.e2e.fabric import kubectl

pytestmark = pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")
MODULE = "liqo.fabric.k8s_apply"


@pytest.fixture(scope="module")
def lab(lab1):
    return lab1


@pytest.fixture
def ns(lab):
    """A fresh namespace name (the lab has no namespace controller, so namespaces are never deleted)."""
    return "k8sapply-" + os.urandom(3).hex()


def apply(lab, definitions, check=False, diff=False, **args):
    return run_module(MODULE, dict(kubeconfig=lab["a"].kubeconfig, definitions=definitions, **args),
                      check=check, diff=diff)


def ok(res):
    assert res["rc"] == 0 and not res.get("failed"), res.get("msg") or res["stdout"][-3000:]
    return res


def get_json(lab, *args):
    out = kubectl(lab["a"], "get", *args, "-o", "json", check=False)
    return json.loads(out) if out.strip() else None


def namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def configmap(ns, name="settings", **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
            "data": data or {"mode": "fast"}}


def gateway_server(ns, mtu=1340, name="server"):
    return {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
            "metadata": {"name": name, "namespace": ns, "labels": {"liqo.io/remote-cluster-id": "peer"}},
            "spec": {"endpoint": {"port": 51820, "serviceType": "NodePort"}, "mtu": mtu,
                     "serverTemplateRef": {"apiVersion": "networking.liqo.io/v1beta1", "kind": "WgGatewayServerTemplate",
                                           "name": "wireguard-server", "namespace": "liqo"}}}


def test_create_then_rerun_is_unchanged_then_a_field_change_is_changed(lab, ns):
    defs = [namespace(ns), configmap(ns), gateway_server(ns)]
    first = ok(apply(lab, defs))
    assert first["changed"] is True
    assert [(r["kind"], r["metadata"]["name"]) for r in first["resources"]] == [
        ("Namespace", ns), ("ConfigMap", "settings"), ("GatewayServer", "server")]
    assert all("managedFields" not in r["metadata"] for r in first["resources"])
    assert "result" not in first  # several definitions
    stored = get_json(lab, "gatewayservers.networking.liqo.io", "server", "-n", ns, "--show-managed-fields")
    assert stored["spec"]["mtu"] == 1340 and stored["spec"]["endpoint"]["port"] == 51820
    assert any(m["manager"] == "liqo-fabric" and m["operation"] == "Apply" for m in stored["metadata"]["managedFields"])

    again = ok(apply(lab, defs))
    assert again["changed"] is False
    assert get_json(lab, "gatewayservers.networking.liqo.io", "server", "-n", ns)["metadata"]["resourceVersion"] == \
        stored["metadata"]["resourceVersion"]

    defs[2] = gateway_server(ns, mtu=1400)
    changed = ok(apply(lab, defs))
    assert changed["changed"] is True
    assert get_json(lab, "gatewayservers.networking.liqo.io", "server", "-n", ns)["spec"]["mtu"] == 1400
    assert ok(apply(lab, defs))["changed"] is False


def test_single_definition_returns_result_like_kubernetes_core(lab, ns):
    ok(apply(lab, [namespace(ns)]))
    res = ok(apply(lab, [configmap(ns, name="one")]))
    assert res["changed"] is True
    assert res["result"]["metadata"]["name"] == "one" and res["result"]["data"] == {"mode": "fast"}
    assert res["result"] == res["resources"][0]


def test_check_mode_is_a_dry_run_that_persists_nothing(lab, ns):
    # a new namespace and objects in it: reported as changes, nothing created
    res = ok(apply(lab, [namespace(ns), configmap(ns), gateway_server(ns)], check=True))
    assert res["changed"] is True and len(res["resources"]) == 3
    assert get_json(lab, "namespace", ns) is None
    # an existing object: the dry run reports the change and the server keeps the old value
    ok(apply(lab, [namespace(ns), gateway_server(ns)]))
    before = get_json(lab, "gatewayservers.networking.liqo.io", "server", "-n", ns)
    res = ok(apply(lab, [gateway_server(ns, mtu=1500)], check=True))
    assert res["changed"] is True and res["result"]["spec"]["mtu"] == 1500  # as the dry run returned it
    after = get_json(lab, "gatewayservers.networking.liqo.io", "server", "-n", ns)
    assert after["spec"]["mtu"] == 1340 and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # unchanged in check mode too
    assert ok(apply(lab, [gateway_server(ns)], check=True))["changed"] is False
    # and the dry run is validated by the apiserver
    bad = apply(lab, [gateway_server(ns, mtu=100)], check=True)
    assert bad.get("failed") and "spec.mtu" in bad["msg"]


def test_diff_shows_the_changed_field_without_bookkeeping(lab, ns):
    ok(apply(lab, [namespace(ns), gateway_server(ns)]))
    res = ok(apply(lab, [gateway_server(ns, mtu=1420)], diff=True))
    assert res["changed"] is True
    (entry,) = res["diff"]
    assert entry["before"]["spec"]["mtu"] == 1340 and entry["after"]["spec"]["mtu"] == 1420
    assert entry["before_header"] == f"GatewayServer {ns}/server"
    for side in ("before", "after"):
        for noise in ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"):
            assert noise not in entry[side]["metadata"], (side, noise)
    # an unchanged object has no diff entry
    assert ok(apply(lab, [gateway_server(ns, mtu=1420)], diff=True))["diff"] == []


def test_invalid_object_fails_naming_the_object_and_the_field(lab, ns):
    ok(apply(lab, [namespace(ns)]))
    res = apply(lab, [configmap(ns), gateway_server(ns, mtu=100)])
    assert res.get("failed") and res["rc"] != 0
    assert f"GatewayServer {ns}/server" in res["msg"] and "spec.mtu" in res["msg"] and "422" in res["msg"], res["msg"]
    assert get_json(lab, "gatewayservers.networking.liqo.io", "server", "-n", ns) is None
    # the objects before it were applied (in order)
    assert get_json(lab, "configmap", "settings", "-n", ns)["data"] == {"mode": "fast"}


def test_bad_input_fails_before_any_call(lab, ns):
    res = apply(lab, [{"apiVersion": "v1", "kind": "Pony", "metadata": {"name": "x", "namespace": ns}}])
    assert res.get("failed") and "definitions[0]: kind 'Pony' is not supported" in res["msg"]
    res = apply(lab, [namespace(ns), {"kind": "ConfigMap", "metadata": {"name": "x"}}])
    assert res.get("failed") and "definitions[1]: ConfigMap is namespaced: metadata.namespace is required" in res["msg"]
    res = apply(lab, [{"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": ns}}])
    assert res.get("failed") and "served as apiVersion 'v1', not 'apps/v1'" in res["msg"]
    assert get_json(lab, "namespace", ns) is None  # nothing was applied


def test_delete_then_delete_again_and_nameless_selects_by_labels(lab, ns):
    keep = configmap(ns, name="keep")
    keep["metadata"]["labels"] = {"role": "keep"}
    drop = [configmap(ns, name=f"drop{i}") for i in range(2)]
    for d in drop:
        d["metadata"]["labels"] = {"role": "drop"}
    ok(apply(lab, [namespace(ns), gateway_server(ns), keep, *drop]))

    res = ok(apply(lab, [gateway_server(ns)], state="absent", wait=True))
    assert res["changed"] is True and res["deleted"] == [f"GatewayServer {ns}/server"]
    assert get_json(lab, "gatewayservers.networking.liqo.io", "server", "-n", ns) is None
    res = ok(apply(lab, [gateway_server(ns)], state="absent", wait=True))
    assert res["changed"] is False and res["deleted"] == []

    nameless = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "labels": {"role": "drop"}}}
    res = ok(apply(lab, [nameless], state="absent", check=True))
    assert res["changed"] is True and sorted(res["deleted"]) == [f"ConfigMap {ns}/drop0", f"ConfigMap {ns}/drop1"]
    assert len(get_json(lab, "configmaps", "-n", ns, "-l", "role=drop")["items"]) == 2  # check mode kept them
    res = ok(apply(lab, [nameless], state="absent", wait=True))
    assert res["changed"] is True and len(res["deleted"]) == 2
    assert get_json(lab, "configmaps", "-n", ns, "-l", "role=drop")["items"] == []
    assert get_json(lab, "configmap", "keep", "-n", ns) is not None
    assert ok(apply(lab, [nameless], state="absent"))["changed"] is False


def test_wait_for_deletion_names_the_finalizer_that_holds_it(lab, ns):
    held = configmap(ns, name="held")
    held["metadata"]["finalizers"] = ["test.liqo.io/hold"]
    ok(apply(lab, [namespace(ns), held]))
    try:
        res = apply(lab, [held], state="absent", wait=True, wait_timeout=1)
        assert res.get("failed") and f"ConfigMap {ns}/held" in res["msg"] and "test.liqo.io/hold" in res["msg"]
    finally:
        kubectl(lab["a"], "patch", "configmap", "held", "-n", ns, "--type", "merge", "-p",
                json.dumps({"metadata": {"finalizers": None}}))
    assert get_json(lab, "configmap", "held", "-n", ns) is None


def test_secret_data_is_never_in_the_output(lab, ns):
    secret_value = "s3cr3t-" + os.urandom(8).hex()
    other_value = "other-" + os.urandom(8).hex()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys", "namespace": ns},
              "stringData": {"privateKey": secret_value},
              "data": {"other": base64.b64encode(other_value.encode()).decode()}}
    outputs = []
    res = ok(apply(lab, [namespace(ns), secret], diff=True))
    outputs.append(res)
    assert res["changed"] is True and res["resources"][1]["data"] == {"other": "VALUE_REDACTED",
                                                                      "privateKey": "VALUE_REDACTED"}
    stored = get_json(lab, "secret", "keys", "-n", ns)
    assert base64.b64decode(stored["data"]["privateKey"]).decode() == secret_value  # it was written
    again = ok(apply(lab, [namespace(ns), secret], diff=True))  # stringData: unchanged on a rerun too
    outputs.append(again)
    assert again["changed"] is False
    secret["stringData"]["privateKey"] = secret_value + "x"
    outputs.append(ok(apply(lab, [secret], diff=True, check=True)))
    assert outputs[-1]["changed"] is True
    assert base64.b64decode(get_json(lab, "secret", "keys", "-n", ns)["data"]["privateKey"]).decode() == secret_value
    outputs.append(ok(apply(lab, [secret], diff=True)))
    assert outputs[-1]["changed"] is True and outputs[-1]["result"]["data"]["privateKey"] == "VALUE_REDACTED"
    assert outputs[-1]["diff"][0]["after"]["data"] == {"other": "VALUE_REDACTED", "privateKey": "VALUE_REDACTED (changed)"}
    outputs.append(ok(apply(lab, [secret], state="absent", diff=True)))
    for out in outputs:
        text = out["stdout"] + out["stderr"]
        for value in (secret_value, other_value):
            assert value not in text and base64.b64encode(value.encode()).decode() not in text
    assert "VALUE_REDACTED" in outputs[0]["stdout"]
