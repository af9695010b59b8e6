"""The v1alpha1 <-> v1beta1 converter (plugins/module_utils/api/conversion.py).

Table-driven cases for every field that differs, the errors, and round-trip properties (hypothesis) over
the seeds' v1alpha1 examples, Liqo-shaped v1beta1 examples and generated objects of both versions.
"""
import copy
import json
import os

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.module_utils.api.conversion import ANNOTATION, ConversionError, convert
from tests.unit.seed_examples import seed_examples

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
A = "networking.liqo.io/v1alpha1"
B = "networking.liqo.io/v1beta1"


def liqo_examples():
    with open(os.path.join(ROOT, "tests", "unit", "data", "liqo_v1beta1_examples.yaml"), encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def obj(api_version, kind, spec=None, status=None, annotations=None):
    out = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ns"}}
    if annotations:
        out["metadata"]["annotations"] = annotations
    if spec is not None:
        out["spec"] = spec
    if status is not None:
        out["status"] = status
    return out


def kept(o):
    return json.loads(o["metadata"]["annotations"][ANNOTATION])


# (kind, v1beta1 spec, v1alpha1 spec, kept in the annotation or None)
DOWN = [
    ("Configuration", {"remote": {"cidr": {"pod": ["10.243.0.0/16"], "external": ["10.70.0.0/16"]}}},
     {"remote": {"cidr": {"pod": "10.243.0.0/16", "external": "10.70.0.0/16"}}}, None),
    ("Configuration", {"remote": {"cidr": {"pod": ["10.243.0.0/16"]}}},
     {"remote": {"cidr": {"pod": "10.243.0.0/16"}}}, None),
    ("Configuration", {"local": {"cidr": {"pod": ["10.244.0.0/16"]}}, "remote": {"cidr": {"pod": ["10.1.0.0/16"]}}},
     {"local": {"cidr": {"pod": "10.244.0.0/16"}}, "remote": {"cidr": {"pod": "10.1.0.0/16"}}}, None),
    ("GatewayServer", {"endpoint": {"port": 51820, "serviceType": "NodePort", "nodePort": 30000}, "mtu": 1340},
     {"endpoint": {"port": 51820, "serviceType": "NodePort", "nodePort": 30000}, "mtu": 1340}, None),
    ("GatewayServer", {"endpoint": {"ports": [51820, 51821], "nodePorts": [32133, 32134], "serviceType": "NodePort"}},
     {"endpoint": {"port": 51820, "nodePort": 32133, "serviceType": "NodePort"}},
     {"spec.endpoint.ports": [51820, 51821], "spec.endpoint.nodePorts": [32133, 32134]}),
    ("GatewayServer", {"endpoint": {"port": 1, "loadBalancerIP": "10.42.7.9", "serviceType": "LoadBalancer"},
                       "secretRef": {"name": "keys"}, "serviceLabels": {"a": "b"}, "serviceAnnotations": {"c": "d"}},
     {"endpoint": {"port": 1, "loadBalancerIP": "10.42.7.9", "serviceType": "LoadBalancer"}},
     {"spec.secretRef": {"name": "keys"}, "spec.serviceLabels": {"a": "b"}, "spec.serviceAnnotations": {"c": "d"}}),
    ("GatewayClient", {"endpoint": {"addresses": ["10.42.3.54"], "ports": [32133], "protocol": "UDP"},
                       "secretRef": {"name": "k"}},
     {"endpoint": {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"}},
     {"spec.endpoint.ports": [32133], "spec.secretRef": {"name": "k"}}),
    ("GatewayClient", {"endpoint": {"addresses": ["gw.example.org"], "port": 51820, "protocol": "TCP"}, "mtu": 1400},
     {"endpoint": {"addresses": ["gw.example.org"], "port": 51820, "protocol": "TCP"}, "mtu": 1400}, None),
    ("PublicKey", {"publicKey": "NB+3xA4a0SIVsta9zwWn/mPc4J86GPmUdSChJG5rxlk="},
     {"publicKey": "NB+3xA4a0SIVsta9zwWn/mPc4J86GPmUdSChJG5rxlk="}, None),
    ("Connection", {"type": "Server", "gatewayRef": {"name": "g"}}, {"type": "Server", "gatewayRef": {"name": "g"}}, None),
]


@pytest.mark.parametrize("kind,spec_b,spec_a,kept_fields", DOWN, ids=["%s-%d" % (c[0], i) for i, c in enumerate(DOWN)])
def test_down_and_back_up(kind, spec_b, spec_a, kept_fields):
    b = obj(B, kind, spec=spec_b)
    a = convert(b, A)
    assert a["apiVersion"] == A and a["spec"] == spec_a
    if kept_fields is None:
        assert "annotations" not in a["metadata"]
    else:
        assert kept(a) == kept_fields
    assert b == obj(B, kind, spec=spec_b), "the input is left untouched"
    assert convert(a, B) == b


STATUS = [
    ("Configuration", {"remote": {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ok", "message": "",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
     {"remote": {"cidr": {"pod": "10.71.0.0/16", "external": "10.72.0.0/16"}},
      "conditions": [{"type": "Ready", "status": "True", "reason": "Ok", "message": "",
                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    ("GatewayServer", {"endpoint": {"addresses": ["10.42.3.54"], "ports": [32133], "protocol": "UDP"},
                       "internalEndpoint": {"ip": "10.80.0.2", "node": "n1"}},
     {"endpoint": {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"},
      "internalEndpoint": {"ip": "10.80.0.2", "node": "n1"}}),
]


@pytest.mark.parametrize("kind,status_b,status_a", STATUS)
def test_status_converts_both_ways(kind, status_b, status_a):
    b = obj(B, kind, spec={}, status=status_b)
    a = convert(b, A)
    assert a["status"] == status_a
    assert convert(a, B) == b


def test_seed_examples_go_up_without_annotation_and_come_back():
    for dummy, a in seed_examples():
        b = convert(a, B)
        assert b["apiVersion"] == B
        assert ANNOTATION not in (b["metadata"].get("annotations") or {})
        assert convert(b, A) == a, a["kind"]
    conf = next(a for dummy, a in seed_examples() if a["kind"] == "Configuration")
    assert convert(conf, B)["spec"]["remote"]["cidr"] == {"pod": ["10.243.0.0/16"], "external": ["10.70.0.0/16"]}
    client = next(a for dummy, a in seed_examples() if a["kind"] == "GatewayClient")
    assert convert(client, B)["spec"]["endpoint"] == {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"}


def test_liqo_examples_round_trip_through_v1alpha1():
    for b in liqo_examples():
        a = convert(b, A)
        assert a["apiVersion"] == A
        assert convert(a, B) == b, b["metadata"]["name"]
        assert convert(convert(a, B), A) == a


def test_edit_in_v1alpha1_wins_over_kept_list():
    b = obj(B, "GatewayServer", spec={"endpoint": {"ports": [51820, 51821]}})
    a = convert(b, A)
    a["spec"]["endpoint"]["port"] = 40000
    assert convert(a, B)["spec"]["endpoint"] == {"port": 40000}


CIDR_PATHS = [(s, p, f) for s, p in (("spec", "local"), ("spec", "remote"), ("status", "remote")) for f in ("pod", "external")]


@pytest.mark.parametrize("section,part,field", CIDR_PATHS, ids=[".".join(c) for c in CIDR_PATHS])
def test_every_configuration_cidr_is_a_string_in_v1alpha1_a_list_of_one_in_v1beta1(section, part, field):
    """Each of the six CIDR fields: [c] in v1beta1 <-> c in v1alpha1, both ways, no annotation."""
    def build(version, value):
        o = obj(version, "Configuration", spec={"remote": {"cidr": {"pod": "10.9.0.0/16" if version == A else ["10.9.0.0/16"]}}})
        o.setdefault(section, {}).setdefault(part, {}).setdefault("cidr", {})[field] = value
        return o
    b, a = build(B, ["10.243.0.0/16"]), build(A, "10.243.0.0/16")
    assert convert(b, A) == a and convert(a, B) == b
    assert "annotations" not in convert(b, A)["metadata"]


def test_v1alpha1_edit_of_a_cidr_reaches_v1beta1_as_a_list():
    a = convert(obj(B, "Configuration", spec={"remote": {"cidr": {"pod": ["10.1.0.0/16"]}}}), A)
    a["spec"]["remote"]["cidr"]["pod"] = "10.9.0.0/16"
    a["status"] = {"remote": {"cidr": {"pod": "10.71.0.0/16"}}}
    back = convert(a, B)
    assert back["spec"]["remote"]["cidr"]["pod"] == ["10.9.0.0/16"]
    assert back["status"]["remote"]["cidr"]["pod"] == ["10.71.0.0/16"]


def test_v1beta1_cidr_string_stored_before_lists_only_reads_in_v1alpha1_and_applies_back_as_a_list():
    """An object stored while v1beta1 still took a string: v1alpha1 shows it as is (reads keep working), and
    applying that v1alpha1 form back stores Liqo's list."""
    b = obj(B, "Configuration", spec={"remote": {"cidr": {"pod": "10.243.0.0/16"}}},
            status={"remote": {"cidr": {"pod": "10.71.0.0/16"}}})
    a = convert(b, A)
    assert a["spec"]["remote"]["cidr"] == {"pod": "10.243.0.0/16"} and "annotations" not in a["metadata"]
    assert convert(a, B)["spec"]["remote"]["cidr"] == {"pod": ["10.243.0.0/16"]}
    assert convert(a, B)["status"]["remote"]["cidr"] == {"pod": ["10.71.0.0/16"]}


def test_configuration_annotation_of_the_old_list_device_is_dropped_going_up():
    """The annotation the converter wrote for Configuration lists before v1beta1 took lists of one only: ignored."""
    a = obj(A, "Configuration", spec={"remote": {"cidr": {"pod": "10.243.0.0/16"}}},
            annotations={ANNOTATION: json.dumps({"spec.remote.cidr.pod": ["10.1.0.0/16", "10.2.0.0/16"]})})
    b = convert(a, B)
    assert b["spec"]["remote"]["cidr"]["pod"] == ["10.243.0.0/16"] and "annotations" not in b["metadata"]


def test_other_annotations_are_kept():
    b = obj(B, "GatewayClient", spec={"endpoint": {"ports": [1]}}, annotations={"keep": "me"})
    a = convert(b, A)
    assert a["metadata"]["annotations"]["keep"] == "me" and ANNOTATION in a["metadata"]["annotations"]
    assert convert(a, B)["metadata"]["annotations"] == {"keep": "me"}


ERRORS = [
    (obj(B, "GatewayServer", spec={"endpoint": {"port": 1, "ports": [1]}}), A,
     "spec.endpoint.port and spec.endpoint.ports are mutually exclusive"),
    (obj(B, "GatewayServer", spec={"endpoint": {"nodePort": 1, "nodePorts": [1], "port": 2}}), A,
     "spec.endpoint.nodePort and spec.endpoint.nodePorts are mutually exclusive"),
    (obj(B, "Configuration", spec={"remote": {"cidr": {"pod": 5}}}), A, "spec.remote.cidr.pod must be a list of one CIDR in v1beta1, got 5"),
    (obj(B, "Configuration", spec={"remote": {"cidr": {"pod": ["10.1.0.0/16", "10.2.0.0/16"]}}}), A,
     "spec.remote.cidr.pod must be a list of one CIDR in v1beta1, got ['10.1.0.0/16', '10.2.0.0/16']"),
    (obj(B, "Configuration", spec={}, status={"remote": {"cidr": {"external": []}}}), A,
     "status.remote.cidr.external must be a list of one CIDR in v1beta1, got []"),
    (obj(B, "Configuration", spec={"local": {"cidr": {"pod": [7]}}}), A, "spec.local.cidr.pod must be a list of one CIDR"),
    (obj(A, "Configuration", spec={"remote": {"cidr": {"pod": ["10.1.0.0/16"]}}}), B,
     "spec.remote.cidr.pod must be one CIDR string in v1alpha1, got ['10.1.0.0/16']"),
    (obj(A, "Configuration", spec={}, status={"remote": {"cidr": {"pod": {"a": 1}}}}), B,
     "status.remote.cidr.pod must be one CIDR string in v1alpha1"),
    (obj(A, "GatewayServer", spec={}, annotations={ANNOTATION: "{nope"}), B, "is not JSON"),
    (obj(A, "GatewayServer", spec={}, annotations={ANNOTATION: "[1]"}), B, "must be a JSON object"),
    (obj(A, "Widget", spec={}), B, "kind 'Widget' is not a kind of networking.liqo.io"),
    (obj("networking.liqo.io/v2", "GatewayServer", spec={}), B, "apiVersion 'networking.liqo.io/v2'"),
    (obj(A, "GatewayServer", spec={}), "apps/v1", "apiVersion 'apps/v1'"),
]


@pytest.mark.parametrize("source,target,message", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_errors_name_the_field(source, target, message):
    with pytest.raises(ConversionError, match=message.replace(".", r"\.").replace("[", r"\[").replace("(", r"\(")):
        convert(source, target)


# Round-trip properties over generated objects of both versions.
CIDRS = st.sampled_from(["10.243.0.0/16", "10.70.0.0/16", "192.168.0.0/24", "172.16.0.0/12", "10.0.0.0/8"])
PORTS = st.integers(min_value=1, max_value=65535)


def _maybe(strategy):
    return st.one_of(st.none(), strategy)


def _compact(d):
    return {k: v for k, v in d.items() if v is not None}


@st.composite
def configurations(draw, version):
    value = CIDRS if version == A else st.lists(CIDRS, min_size=1, max_size=1)  # v1beta1: a list of one
    spec = {"remote": {"cidr": _compact({"pod": draw(_maybe(value)), "external": draw(_maybe(value))})}}
    if draw(st.booleans()):
        spec["local"] = {"cidr": _compact({"pod": draw(_maybe(value)), "external": draw(_maybe(value))})}
    status = None
    if draw(st.booleans()):
        status = {"remote": {"cidr": _compact({"pod": draw(_maybe(value)), "external": draw(_maybe(value))})}}
    return obj(version, "Configuration", spec=spec, status=status)


@st.composite
def gateways(draw, version, kind):
    endpoint = {}
    if version == B and draw(st.booleans()):
        endpoint["ports"] = draw(st.lists(PORTS, max_size=3, unique=True))
    else:
        endpoint["port"] = draw(PORTS)
    if kind == "GatewayServer":
        endpoint["serviceType"] = draw(st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]))
        if version == B and draw(st.booleans()):
            endpoint["nodePorts"] = draw(st.lists(PORTS, max_size=3, unique=True))
        elif draw(st.booleans()):
            endpoint["nodePort"] = draw(PORTS)
    else:
        endpoint["addresses"] = ["10.42.3.54"]
        endpoint["protocol"] = draw(st.sampled_from(["UDP", "TCP"]))
    spec = {"endpoint": endpoint, "mtu": draw(st.integers(576, 9000))}
    if version == B:
        if draw(st.booleans()):
            spec["secretRef"] = {"name": "keys"}
        if kind == "GatewayServer" and draw(st.booleans()):
            spec["serviceLabels"] = {"l": draw(st.text(max_size=5))}
            spec["serviceAnnotations"] = {"a": draw(st.text(max_size=5))}
    return obj(version, kind, spec=spec, annotations=draw(_maybe(st.just({"other": "value"}))))


def any_object(version):
    return st.one_of(configurations(version), gateways(version, "GatewayServer"), gateways(version, "GatewayClient"))


@settings(max_examples=300, deadline=None)
@given(any_object(B))
def test_property_v1beta1_survives_v1alpha1(b):
    before = copy.deepcopy(b)
    a = convert(b, A)
    assert b == before
    assert convert(a, B) == b
    assert convert(convert(a, B), A) == a


@settings(max_examples=300, deadline=None)
@given(any_object(A))
def test_property_v1alpha1_survives_v1beta1(a):
    b = convert(a, B)
    assert ANNOTATION not in (b["metadata"].get("annotations") or {})
    assert convert(b, A) == a
