"""CRDs in deploy/crds: structure, versions, printer columns, and the seeds' YAML against the schemas.

Validation uses `jsonschema` (already in the venv through the test requirements' dependencies) on the
openAPIV3Schema; the apiserver-side check of the same cases is tests/e2e/test_crds_apiserver.py.
"""
import copy
import glob
import os
import re

import jsonschema
import pytest
import yaml

from plugins.module_utils.api.conversion import convert
from tests.unit.seed_examples import seed_examples, seed_path, seed_table_headers, texts_from_copy, texts_from_seed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CRD_DIR = os.path.join(ROOT, "deploy", "crds")
TEMPLATE_DIR = os.path.join(ROOT, "deploy", "templates")
GROUP = "networking.liqo.io"
KINDS = {
    "Configuration": "configurations", "GatewayServer": "gatewayservers", "GatewayClient": "gatewayclients",
    "Connection": "connections", "PublicKey": "publickeies",
    "WgGatewayServerTemplate": "wggatewayservertemplates", "WgGatewayClientTemplate": "wggatewayclienttemplates",
}
# Default (priority 0) columns after NAMESPACE/NAME, as the seeds print them, with the field they show (v1beta1's:
# a Configuration's CIDR is the first element of its list there, the string itself in v1alpha1).
COLUMNS = {
    "configurations": [("DESIRED POD CIDR", ".spec.remote.cidr.pod[0]"), ("REMAPPED POD CIDR", ".status.remote.cidr.pod[0]"),
                       ("AGE", ".metadata.creationTimestamp")],
    "gatewayservers": [("TEMPLATE NAME", ".spec.serverTemplateRef.name"), ("IP", ".status.endpoint.addresses[0]"),
                       ("PORT", ".status.endpoint.port"), ("AGE", ".metadata.creationTimestamp")],
    "gatewayclients": [("TEMPLATE NAME", ".spec.clientTemplateRef.name"), ("IP", ".spec.endpoint.addresses[0]"),
                       ("PORT", ".spec.endpoint.port"), ("AGE", ".metadata.creationTimestamp")],
    "connections": [("TYPE", ".spec.type"), ("STATUS", ".status.value"), ("AGE", ".metadata.creationTimestamp")],
    "publickeies": [("AGE", ".metadata.creationTimestamp")],
    "wggatewayservertemplates": [("AGE", ".metadata.creationTimestamp")],
    "wggatewayclienttemplates": [("AGE", ".metadata.creationTimestamp")],
}
WITH_STATUS = {"Configuration", "GatewayServer", "GatewayClient", "Connection"}


def load_crds():
    crds = {}
    for path in sorted(glob.glob(os.path.join(CRD_DIR, "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        assert len(docs) == 1, "%s: one CRD per file" % path
        crds[docs[0]["spec"]["names"]["kind"]] = (os.path.basename(path), docs[0])
    return crds


CRDS = load_crds()


def schema_of(kind, version="v1beta1"):
    crd = CRDS[kind][1]
    return next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]


def validate(obj):
    kind = obj["kind"]
    version = obj["apiVersion"].split("/")[1]
    validator = jsonschema.Draft4Validator(schema_of(kind, version))
    return sorted(validator.iter_errors(obj), key=lambda e: list(e.path))


def test_one_file_per_kind_named_after_the_plural():
    assert set(CRDS) == set(KINDS)
    for kind, (fname, crd) in CRDS.items():
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["kind"] == "CustomResourceDefinition"
        names = crd["spec"]["names"]
        assert names["plural"] == KINDS[kind] and fname == "%s_%s.yaml" % (GROUP, names["plural"])
        assert crd["metadata"]["name"] == "%s.%s" % (names["plural"], GROUP)
        assert crd["spec"]["group"] == GROUP and crd["spec"]["scope"] == "Namespaced"
        assert names["singular"] == kind.lower() and names["listKind"] == kind + "List"


# Kinds whose v1alpha1 (the seeds') and v1beta1 (Liqo's) shapes differ: converted by the conversion webhook.
CONVERTED = {"Configuration", "GatewayServer", "GatewayClient"}
# What only v1beta1 has, per kind (the converter keeps it in an annotation of the v1alpha1 object).
V1BETA1_ONLY = {
    "GatewayServer": ["spec.endpoint.ports", "spec.endpoint.nodePorts", "spec.secretRef", "spec.serviceAnnotations",
                      "spec.serviceLabels", "status.endpoint.ports"],
    "GatewayClient": ["spec.endpoint.ports", "spec.secretRef"],
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_both_versions_served_v1beta1_stored_webhook_where_shapes_differ(kind):
    crd = CRDS[kind][1]
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert set(versions) == {"v1alpha1", "v1beta1"}
    assert all(v["served"] for v in versions.values())
    assert versions["v1beta1"]["storage"] is True and versions["v1alpha1"]["storage"] is False
    conversion = crd["spec"].get("conversion", {"strategy": "None"})
    if kind in CONVERTED:
        assert conversion["strategy"] == "Webhook" and conversion["webhook"]["conversionReviewVersions"] == ["v1"]
        # url: null, so that `kubectl apply` over a CRD the agentless install pointed at a URL leaves one of the two
        assert conversion["webhook"]["clientConfig"] == {
            "url": None, "service": {"namespace": "liqo", "name": "liqo-fabric-webhook", "path": "/convert", "port": 443}}
        assert versions["v1alpha1"]["schema"] != versions["v1beta1"]["schema"]
    else:  # same shape in both versions: the apiserver itself changes apiVersion, no webhook to depend on
        assert conversion == {"strategy": "None"}
        assert versions["v1alpha1"]["schema"] == versions["v1beta1"]["schema"]
    assert versions["v1alpha1"].get("subresources") == versions["v1beta1"].get("subresources")
    # the same columns; a Configuration's CIDR column reads the list's element in v1beta1
    assert versions["v1alpha1"]["additionalPrinterColumns"] == [
        dict(c, jsonPath=re.sub(r"(\.cidr\.\w+)\[0\]$", r"\1", c["jsonPath"])) for c in versions["v1beta1"]["additionalPrinterColumns"]]
    assert ("status" in versions["v1beta1"].get("subresources", {})) == (kind in WITH_STATUS)


def _node(schema, dotted):
    for part in dotted.split("."):
        schema = (schema.get("properties") or {}).get(part) if schema else None
    return schema


@pytest.mark.parametrize("kind", sorted(V1BETA1_ONLY))
def test_v1alpha1_has_only_the_seeds_fields_and_refuses_v1beta1_ones(kind):
    """v1beta1-only fields are absent from v1alpha1, except the spec's: declared there only to be refused (422
    naming the field) rather than silently pruned by the apiserver."""
    for dotted in V1BETA1_ONLY[kind]:
        assert _node(schema_of(kind, "v1beta1"), dotted), dotted
        alpha = _node(schema_of(kind, "v1alpha1"), dotted)
        assert alpha is None if dotted.startswith("status.") else alpha["not"] == {}, dotted
        if dotted.startswith("spec."):
            obj = _seed(kind)
            _set(obj, dotted, [51820] if dotted.endswith("orts") else {"name": "x"})
            assert [list(e.path) for e in validate(obj)] == [dotted.split(".")], dotted
    assert _node(schema_of(kind, "v1alpha1"), "spec.endpoint")["required"][-1] == "port"


def test_configuration_cidrs_strings_in_v1alpha1_lists_in_v1beta1():
    for dotted in ("spec.local.cidr.pod", "spec.remote.cidr.pod", "spec.remote.cidr.external", "status.remote.cidr.pod"):
        assert _node(schema_of("Configuration", "v1alpha1"), dotted)["type"] == "string"
        assert _node(schema_of("Configuration", "v1beta1"), dotted)["items"]["type"] == "string"
    conf = _seed("Configuration")
    conf["spec"]["remote"]["cidr"]["pod"] = ["10.243.0.0/16"]
    assert [list(e.path) for e in validate(conf)] == [["spec", "remote", "cidr", "pod"]]  # a list is not the seeds' shape
    conf["apiVersion"] = GROUP + "/v1beta1"
    assert [list(e.path) for e in validate(conf)] == [["spec", "remote", "cidr", "external"]]  # nor a string Liqo's
    conf["spec"]["remote"]["cidr"]["external"] = ["10.70.0.0/16"]
    assert validate(conf) == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_printer_columns_as_the_seeds_show(kind):
    plural = KINDS[kind]
    cols = next(v for v in CRDS[kind][1]["spec"]["versions"] if v["name"] == "v1beta1")["additionalPrinterColumns"]
    default = [(c["name"].upper(), c["jsonPath"]) for c in cols if c.get("priority", 0) == 0]
    assert default == COLUMNS[plural]
    seen = seed_table_headers()
    if plural in seen:
        assert ["NAMESPACE", "NAME"] + [c[0] for c in default] == seen[plural]
    age = [c for c in cols if c["name"] == "Age"]
    assert age and age[0]["type"] == "date"


INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def _walk(node, path, problems, in_junctor=False):
    """Structural-schema rules a 1.20 apiserver enforces, plus: no CEL, RE2-compatible patterns."""
    if not isinstance(node, dict):
        return
    if "x-kubernetes-validations" in node:
        problems.append("%s: CEL rules are not enforced by a 1.20 apiserver" % path)
    if node.get("uniqueItems"):
        problems.append("%s: uniqueItems is forbidden in structural schemas" % path)
    if in_junctor:
        for bad in ("type", "description", "default", "additionalProperties", "nullable"):
            if bad in node:
                problems.append("%s: %s inside anyOf/allOf/oneOf/not" % (path, bad))
    elif "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields") and not node.get("x-kubernetes-int-or-string"):
        problems.append("%s: no type" % path)
    if "pattern" in node:
        re.compile(node["pattern"])
        if "(?" in node["pattern"] or re.search(r"\\[1-9]", node["pattern"]):
            problems.append("%s: pattern not RE2-compatible" % path)
    for key, sub in (node.get("properties") or {}).items():
        _walk(sub, "%s.%s" % (path, key), problems, in_junctor)
    if isinstance(node.get("items"), dict):
        _walk(node["items"], path + "[]", problems, in_junctor)
    if isinstance(node.get("additionalProperties"), dict):
        _walk(node["additionalProperties"], path + "{}", problems, in_junctor)
    for junctor in ("anyOf", "allOf", "oneOf"):
        if junctor == "anyOf" and node.get("x-kubernetes-int-or-string") and node[junctor] == INT_OR_STRING:
            continue  # the one shape of types the apiserver allows in a junctor
        for i, sub in enumerate(node.get(junctor) or []):
            _walk(sub, "%s.%s[%d]" % (path, junctor, i), problems, True)
    if "not" in node:
        _walk(node["not"], path + ".not", problems, True)


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural_and_1_20_enforceable(kind, version):
    problems = []
    _walk(schema_of(kind, version), kind, problems)
    assert problems == []


def test_seed_copy_is_verbatim():
    path = seed_path()
    if not path:
        pytest.skip("../shared/seeds/003_* is not next to the repository: only the stored copy is used")
    assert texts_from_copy() == texts_from_seed(path)


def test_seed_examples_cover_the_kinds():
    kinds = [obj["kind"] for dummy, obj in seed_examples()]
    assert kinds == ["Configuration", "GatewayServer", "GatewayClient", "PublicKey", "PublicKey"]
    assert {obj["apiVersion"] for dummy, obj in seed_examples()} == {GROUP + "/v1alpha1"}


@pytest.mark.parametrize("index", range(5))
@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_seed_examples_are_valid_in_both_versions(index, version):
    """As written (v1alpha1) and as the conversion webhook gives them in v1beta1."""
    obj = convert(seed_examples()[index][1], "%s/%s" % (GROUP, version))
    assert validate(obj) == []


def _seed(kind, index=0, version="v1alpha1"):
    """The seeds' example of `kind` in `version` (converted as the webhook does)."""
    return convert([o for dummy, o in seed_examples() if o["kind"] == kind][index], "%s/%s" % (GROUP, version))


def _set(obj, dotted, value):
    parts = dotted.split(".")
    for p in parts[:-1]:
        obj = obj.setdefault(p, {})
    if value is _DELETE:
        del obj[parts[-1]]
    else:
        obj[parts[-1]] = value


_DELETE = object()
INVALID = [
    ("Configuration", "spec.remote.cidr.pod", "10.243.0.300/16"),
    ("Configuration", "spec.remote.cidr.pod", "10.243.0.0/33"),
    ("Configuration", "spec.remote.cidr.pod", "10.243.0.0"),
    ("Configuration", "spec.remote.cidr.pod", ["10.243.0.0/16", "10.244.0.0/16"]),
    ("Configuration", "spec.remote.cidr.pod", []),
    ("Configuration", "spec.remote.cidr.pod", ["bogus"]),
    ("Configuration", "spec.remote.cidr.pod", 5),
    ("Configuration", "spec.remote.cidr.pod", True),
    ("Configuration", "spec.remote.cidr.pod", {}),
    ("Configuration", "spec.remote.cidr.pod", [["10.243.0.0/16"]]),
    ("Configuration", "spec.local.cidr.external", ["10.243.0.0/16", "10.1.0.0/16"]),
    ("Configuration", "spec.remote.cidr.external", ["10.70.0.0/33"]),
    ("Configuration", "status.remote.cidr.external", ["10.72.0.0/99"]),
    ("Configuration", "spec.remote.cidr.external", "fd00::/64"),
    ("Configuration", "status.remote.cidr.pod", "10.71.0.0/99"),
    ("Configuration", "status.conditions", [{"type": "Ready", "status": "Maybe", "reason": "X", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]),
    ("GatewayServer", "spec.mtu", 70000),
    ("GatewayServer", "spec.mtu", 500),
    ("GatewayServer", "spec.mtu", "1400"),
    ("GatewayServer", "spec.mtu", "Auto"),
    ("GatewayServer", "status.mtu.source", "guessed"),
    ("GatewayServer", "spec.endpoint.port", 0),
    ("GatewayServer", "spec.endpoint.port", 65536),
    ("GatewayServer", "spec.endpoint.port", "51820"),
    ("GatewayServer", "spec.endpoint.port", _DELETE),
    ("GatewayServer", "spec.endpoint.ports", [51820, 0]),
    ("GatewayServer", "spec.endpoint.nodePort", -1),
    ("GatewayServer", "spec.endpoint.nodePort", 65536),
    ("GatewayServer", "spec.endpoint.loadBalancerIP", "1.2.3"),
    ("GatewayServer", "status.endpoint.addresses", ["10.42.3.256"]),
    ("GatewayServer", "status.endpoint.protocol", "SCTP"),
    ("GatewayServer", "status.internalEndpoint.ip", "10.80.0.1/16"),
    ("GatewayClient", "spec.endpoint.addresses", ["10.42.3.540"]),
    ("GatewayClient", "spec.endpoint.addresses", []),
    ("GatewayClient", "spec.endpoint.port", 0),
    ("GatewayClient", "spec.mtu", 70000),
    ("GatewayClient", "spec.mtu", "automatic"),
    ("PublicKey", "spec.publicKey", "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn1="),
    ("PublicKey", "spec.publicKey", "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10"),
    ("PublicKey", "spec.publicKey", "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10=="),
    ("PublicKey", "spec.publicKey", "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWm!awsLxu7hn10="),
]


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
@pytest.mark.parametrize("kind, field, value", INVALID, ids=["%s:%s=%r" % (k, f, v if v is not _DELETE else "<deleted>") for k, f, v in INVALID])
def test_invalid_objects_rejected(kind, field, value, version):
    obj = _seed(kind, version=version)
    assert validate(obj) == []
    _set(obj, field, value)
    assert validate(obj), "schema accepted %s=%r" % (field, value)


# Liqo's shape, accepted by the schema; the gateway refuses ExternalName and TCP with a reason (test_gateway_fields)
LIQO_VALUES = [
    ("Configuration", "spec.remote.cidr.external", _DELETE),
    ("Configuration", "spec.remote.cidr.pod", ["10.243.0.0/16"]),
    ("Configuration", "spec.remote.cidr.external", ["10.70.0.0/16"]),
    ("Configuration", "status.remote.cidr.pod", ["10.71.0.0/16"]),
    ("GatewayServer", "spec.endpoint.serviceType", "ExternalName"),
    ("GatewayClient", "spec.endpoint.protocol", "TCP"),
    ("GatewayServer", "spec.mtu", "auto"),
    ("GatewayClient", "spec.mtu", "auto"),
    ("GatewayClient", "spec.mtu", 1380),
    ("GatewayServer", "status.mtu", {"value": 1312, "source": "probed", "probed": 1312, "pathMTU": 1372}),
]


@pytest.mark.parametrize("kind, field, value", LIQO_VALUES, ids=["%s:%s" % (k, f) for k, f, v in LIQO_VALUES])
def test_liqo_values_accepted_by_the_schema(kind, field, value):
    obj = _seed(kind, version="v1beta1")
    _set(obj, field, value)
    assert validate(obj) == []


def test_port_and_ports_mutually_exclusive_nodeport_zero_allowed():
    obj = _seed("GatewayServer", version="v1beta1")
    obj["spec"]["endpoint"]["ports"] = [51820, 51821]
    assert validate(obj)
    del obj["spec"]["endpoint"]["port"]
    assert validate(obj) == []
    obj["spec"]["endpoint"].update({"nodePort": 0, "loadBalancerIP": ""})
    assert validate(obj) == []
    obj["spec"]["endpoint"]["nodePorts"] = [30000]
    assert validate(obj)


def test_client_accepts_dns_names_and_minimal_server_is_valid():
    obj = _seed("GatewayClient")
    obj["spec"]["endpoint"]["addresses"] = ["gw.example.com", "10.0.0.1"]
    assert validate(obj) == []
    assert validate({"apiVersion": GROUP + "/v1beta1", "kind": "GatewayServer", "metadata": {"name": "s"},
                     "spec": {"endpoint": {"port": 51820}}}) == []


def test_connection_enums():
    conn = {"apiVersion": GROUP + "/v1beta1", "kind": "Connection", "metadata": {"name": "c"},
            "spec": {"type": "Client", "gatewayRef": {"kind": "GatewayClient", "name": "client"}},
            "status": {"value": "Connected", "latency": {"value": "1.2ms", "timestamp": "2026-01-01T00:00:00Z"}}}
    assert validate(conn) == []
    for field, value in (("type", "Peer"), ("value", "Up")):
        bad = copy.deepcopy(conn)
        (bad["spec"] if field == "type" else bad["status"])[field] = value
        assert validate(bad)
    del conn["spec"]["gatewayRef"]
    assert validate(conn)


@pytest.mark.parametrize("fname", ["wireguard-server.yaml", "wireguard-client.yaml"])
def test_default_templates_are_valid(fname):
    with open(os.path.join(TEMPLATE_DIR, fname), encoding="utf-8") as f:
        obj = yaml.safe_load(f)
    assert obj["metadata"] == {"name": fname[:-5], "namespace": "liqo", "labels": {"networking.liqo.io/gatewaytemplate": "true"}}
    assert validate(obj) == []


def _jsonpath(obj, path):
    for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        key, idx = part
        if obj is None:
            return None
        obj = obj.get(key) if key else (obj[int(idx)] if isinstance(obj, list) and int(idx) < len(obj) else None)
    return obj


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1"])
def test_printer_columns_show_the_seed_rows(version):
    """With the status the fabric writes, each version's columns give the values the seed's tables show."""
    conf = _seed("Configuration", version=version)
    conf["status"] = {"remote": {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}}}
    if version == "v1alpha1":
        conf["status"] = convert(dict(conf, apiVersion=GROUP + "/v1beta1"), conf["apiVersion"])["status"]
    server = _seed("GatewayServer", version=version)
    server["status"] = {"endpoint": {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"}}
    client = _seed("GatewayClient", version=version)
    rows = {}
    for obj, kind in ((conf, "Configuration"), (server, "GatewayServer"), (client, "GatewayClient")):
        assert validate(obj) == []
        cols = next(v for v in CRDS[kind][1]["spec"]["versions"] if v["name"] == version)["additionalPrinterColumns"]
        rows[kind] = [_jsonpath(obj, c["jsonPath"]) for c in cols if c.get("priority", 0) == 0 and c["name"] != "Age"]
    assert rows == {"Configuration": ["10.243.0.0/16", "10.71.0.0/16"], "GatewayServer": ["wireguard-server", "10.42.3.54", 32133],
                    "GatewayClient": ["wireguard-client", "10.42.3.54", 32133]}
