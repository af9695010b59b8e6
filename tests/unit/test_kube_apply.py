"""Pure parts of liqo.fabric.k8s_apply: input checks, Secret redaction, diff shaping, change detection."""
import base64
import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.liqo.fabric.plugins.module_utils.kube.apply import (
    REDACTED, ApplyError, api_version, check_definitions, content_changed, describe, diff_entry, fold_string_data,
    for_diff, has_condition, redact, secret_values)

GS = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
      "metadata": {"name": "s", "namespace": "t", "resourceVersion": "7", "generation": 2, "uid": "u",
                   "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"},
                   "managedFields": [{"manager": "liqo-fabric"}]},
      "spec": {"mtu": 1340}}


def secret(**fields):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k", "namespace": "t"}, **fields}


@pytest.mark.parametrize("kind,want", [("ConfigMap", "v1"), ("Namespace", "v1"), ("Deployment", "apps/v1"),
                                       ("GatewayServer", "networking.liqo.io/v1beta1"),
                                       ("CustomResourceDefinition", "apiextensions.k8s.io/v1"), ("Pony", None)])
def test_api_version(kind, want):
    assert api_version(kind) == want


@pytest.mark.parametrize("obj,want", [
    (GS, "GatewayServer t/s"),
    ({"kind": "Namespace", "metadata": {"name": "n"}}, "Namespace n"),
    ({"kind": "PublicKey", "metadata": {"namespace": "t"}}, "PublicKey t/*"),
])
def test_describe(obj, want):
    assert describe(obj) == want


@pytest.mark.parametrize("defs,state,message", [
    (["x"], "present", "definitions[0]: must be an object (dict), got str"),
    ([{"metadata": {"name": "a"}}], "present", "definitions[0]: kind is required"),
    ([{"kind": "Pony", "metadata": {"name": "a"}}], "present", "definitions[0]: kind 'Pony' is not supported"),
    ([{"kind": "ConfigMap", "apiVersion": "apps/v1", "metadata": {"name": "a", "namespace": "n"}}], "present",
     "definitions[0]: ConfigMap is served as apiVersion 'v1', not 'apps/v1'"),
    ([{"kind": "ConfigMap"}], "present", "definitions[0]: metadata is required"),
    ([{"kind": "Namespace", "metadata": {"name": "n"}}, {"kind": "ConfigMap", "metadata": {"name": "a"}}], "present",
     "definitions[1]: ConfigMap is namespaced: metadata.namespace is required"),
    ([{"kind": "ConfigMap", "metadata": {"namespace": "n"}}], "present", "definitions[0]: metadata.name is required"),
    ([{"kind": "Namespace", "metadata": {}}], "absent", "a nameless definition only selects namespaced kinds"),
    ([secret(data="abc")], "present", "definitions[0]: Secret t/k.data must be a dict"),
])
def test_check_definitions_names_the_bad_field(defs, state, message):
    with pytest.raises(ApplyError) as err:
        check_definitions(defs, state)
    assert message in str(err.value)


def test_check_definitions_fills_api_version_drops_cluster_namespace_and_copies():
    defs = [{"kind": "Namespace", "metadata": {"name": "n", "namespace": "x"}},
            {"kind": "PublicKey", "metadata": {"namespace": "n"}}]
    out = check_definitions(defs, "absent")
    assert out[0] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    assert out[1]["apiVersion"] == "networking.liqo.io/v1beta1"
    assert defs[0]["metadata"]["namespace"] == "x" and "apiVersion" not in defs[0]  # input untouched


def test_string_data_is_folded_into_data():
    out = check_definitions([secret(data={"a": "YQ=="}, stringData={"b": "bee", "a": "override"})], "present")[0]
    assert "stringData" not in out
    assert out["data"] == {"a": base64.b64encode(b"override").decode(), "b": base64.b64encode(b"bee").decode()}
    assert fold_string_data(secret(data={"a": "YQ=="})) == secret(data={"a": "YQ=="})


def test_secret_values_collects_every_value():
    defs = [secret(data={"a": "YWJj"}, stringData={"b": "plain", "c": ""}), {"kind": "ConfigMap", "data": {"x": "y"}}]
    assert secret_values(defs) == {"YWJj", "plain"}
    assert secret_values([secret(data="bad"), "junk"]) == set()


def test_redact_secret_keeps_keys_hides_values_and_drops_managed_fields():
    s = secret(data={"privateKey": "c2VjcmV0"}, stringData={"x": "y"})
    s["metadata"]["managedFields"] = [{}]
    s["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": '{"data": "c2VjcmV0"}'}
    out = redact(s)
    assert out["data"] == {"privateKey": REDACTED} and out["stringData"] == {"x": REDACTED}
    assert out["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == REDACTED
    assert "managedFields" not in out["metadata"]
    assert s["data"]["privateKey"] == "c2VjcmV0"  # a copy
    cm = {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    assert redact(cm) == cm and redact(None) is None


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=20), max_size=5))
def test_redacted_secret_contains_no_value(data):
    out = redact(secret(data=data))
    assert set(out["data"]) == set(data) and all(v == REDACTED for v in out["data"].values())


def test_for_diff_drops_bookkeeping_only():
    out = for_diff(GS)
    assert out["metadata"] == {"name": "s", "namespace": "t", "labels": {"a": "b"}}
    assert out["spec"] == {"mtu": 1340} and for_diff(None) == {}
    assert GS["metadata"]["resourceVersion"] == "7"


def test_content_changed_ignores_bookkeeping_but_sees_secret_data():
    other = copy.deepcopy(GS)
    other["metadata"].update(resourceVersion="8", generation=3, managedFields=[])
    assert not content_changed(GS, other)
    other["spec"]["mtu"] = 1400
    assert content_changed(GS, other) and content_changed(None, GS)
    assert content_changed(secret(data={"k": "YQ=="}), secret(data={"k": "Yg=="}))


def test_diff_entry_headers_and_changed_secret_keys():
    after = copy.deepcopy(GS)
    after["spec"]["mtu"] = 1400
    entry = diff_entry(GS, after)
    assert entry["before_header"] == entry["after_header"] == "GatewayServer t/s"
    assert entry["before"]["spec"]["mtu"] == 1340 and entry["after"]["spec"]["mtu"] == 1400
    assert diff_entry(None, GS)["before"] == {} and diff_entry(GS, None)["after"] == {}
    entry = diff_entry(secret(data={"a": "YQ==", "b": "Yg=="}), secret(data={"a": "YQ==", "b": "Yw==", "c": "Yw=="}))
    assert entry["before"]["data"] == {"a": REDACTED, "b": REDACTED}
    assert entry["after"]["data"] == {"a": REDACTED, "b": REDACTED + " (changed)", "c": REDACTED}


def test_has_condition():
    crd = {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                     {"type": "Established", "status": "False"}]}}
    assert has_condition(crd, "NamesAccepted", "True")
    assert not has_condition(crd, "Established", "True") and has_condition(crd, "Established", "False")
    assert not has_condition({}, "Established", "True") and not has_condition(None, "Established", "True")
