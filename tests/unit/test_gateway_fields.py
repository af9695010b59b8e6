"""Every field of GatewayServer/GatewayClient is honoured or refused with a message naming it.

Tables of Liqo-shaped (v1beta1) and seed-shaped (v1alpha1) fields -> what the gateway plan makes of them:
ports/nodePorts lists, serviceType, loadBalancerIP, serviceLabels/serviceAnnotations, the client protocol,
spec.secretRef (the user's keys, raw 32 bytes or base64 text), PublicKey matching under both labellings,
Configurations without external / with list CIDRs, spec.mtu, and what the gateway host itself refuses (a server
address it cannot resolve, a peer key that completes no handshake) naming the gateway object it belongs to.
"""
import base64
import copy
import socket

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import api as gateway_api
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import dataplane as gateway_dataplane
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import incluster as gateway_incluster
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import plan as gw_mod
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.keys import GatewayKeyError, keys_from_secret
from ansible_collections.liqo.fabric.plugins.module_utils.gateway.template import render
from ansible_collections.liqo.fabric.plugins.module_utils.ipam.allocator import Ipam, IpamError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import generate_keypair
from tests.unit.seed_examples import seed_examples

LOCAL, REMOTE = "aaaa-local", "bbbb-remote"
LABEL = "liqo.io/remote-cluster-id"
NS = "liqo-tenant-b"


def _gateway(kind, endpoint, **spec):
    obj = {"apiVersion": "networking.liqo.io/v1beta1", "kind": kind,
           "metadata": {"name": "gw", "namespace": NS, "uid": "u1", "labels": {LABEL: REMOTE}},
           "spec": dict({"endpoint": endpoint, "mtu": 1340}, **spec)}
    return obj


def _conf(cidr=None, status=None):
    return {"metadata": {"name": "conf", "namespace": NS, "labels": {LABEL: REMOTE}},
            "spec": {"remote": {"cidr": cidr or {"pod": "10.243.0.0/16", "external": "10.70.0.0/16"}}},
            "status": {"remote": {"cidr": status or {"pod": "10.71.0.0/16", "external": "10.72.0.0/16"}}}}


def _pk(name, label, ns=NS, key="GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="):
    return {"metadata": {"name": name, "namespace": ns, "labels": {LABEL: label}}, "spec": {"publicKey": key}}


def _plan(gateway, pks=None, confs=None, siblings=None):
    return gw_mod.plan(gateway, [_conf()] if confs is None else confs, [_pk("peer", REMOTE)] if pks is None else pks,
                       LOCAL, "192.0.2.10", namespace_gateways=siblings).to_result()


# ------------------------------------------------------------------------------------------ endpoint fields

SERVER = "GatewayServer"
CLIENT = "GatewayClient"
ACCEPTED = [
    # kind, endpoint, expected listen port (server) / peer endpoint (client)
    (SERVER, {"port": 51820, "serviceType": "NodePort"}, None),                    # seeds: default node port
    (SERVER, {"ports": [51840], "serviceType": "ClusterIP"}, 51840),
    (SERVER, {"ports": [51840], "serviceType": "LoadBalancer"}, 51840),
    (SERVER, {"ports": [51840], "nodePorts": [30123], "serviceType": "NodePort"}, 30123),
    (SERVER, {"port": 51840, "nodePort": 30124, "serviceType": "NodePort"}, 30124),
    (SERVER, {"ports": [51840], "nodePorts": [30125], "serviceType": "LoadBalancer"}, 51840),
    (SERVER, {"ports": [51840], "serviceType": "LoadBalancer", "loadBalancerIP": "203.0.113.7"}, 51840),
    (SERVER, {"port": 51820, "ports": [51820]}, 51820),                            # the same port twice is one port
    (CLIENT, {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"}, "10.42.3.54:32133"),
    (CLIENT, {"addresses": ["10.42.3.54"], "ports": [32134]}, "10.42.3.54:32134"),
    (CLIENT, {"addresses": ["gw.example.org"], "ports": [32135], "protocol": "UDP"}, "gw.example.org:32135"),
]


@pytest.mark.parametrize("kind, endpoint, expected", ACCEPTED, ids=["%s-%d" % (a[0], i) for i, a in enumerate(ACCEPTED)])
def test_endpoint_fields_honoured(kind, endpoint, expected):
    p = _plan(_gateway(kind, endpoint))
    assert p["error"] is None and p["ready"], p["error"]
    if kind == SERVER:
        if expected is None:
            expected = gw_mod.default_node_port(gw_mod.gateway_id(LOCAL, NS, "gw", kind))
        assert p["listen_port"] == expected
        assert p["status"]["endpoint"]["port"] == expected
    else:
        assert p["peer"]["endpoint"] == expected


REFUSED = [
    # kind, endpoint, reason, words the message must contain (the field first)
    (SERVER, {"ports": [51820, 51821]}, "InvalidEndpoint", ["spec.endpoint.ports", "2 ports", "exactly one"]),
    (SERVER, {"ports": [51820], "nodePorts": [30001, 30002], "serviceType": "NodePort"}, "InvalidEndpoint",
     ["spec.endpoint.nodePorts", "2 ports"]),
    (SERVER, {"port": 51820, "ports": [51821]}, "InvalidEndpoint", ["spec.endpoint.port", "spec.endpoint.ports"]),
    (SERVER, {"port": 51820, "serviceType": "ExternalName"}, "UnsupportedServiceType",
     ["spec.endpoint.serviceType", "ExternalName", "DNS alias", "UDP port"]),
    (SERVER, {"port": 51820, "serviceType": "NodePort", "loadBalancerIP": "203.0.113.7"}, "InvalidEndpoint",
     ["spec.endpoint.loadBalancerIP", "LoadBalancer", "NodePort"]),
    (SERVER, {"port": 51820, "serviceType": "ClusterIP", "nodePort": 30001}, "InvalidEndpoint",
     ["spec.endpoint.nodePort", "ClusterIP"]),
    (SERVER, {"ports": [51820], "nodePorts": [30001]}, "InvalidEndpoint", ["spec.endpoint.nodePorts", "ClusterIP"]),
    (CLIENT, {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "TCP"}, "UnsupportedProtocol",
     ["spec.endpoint.protocol", "TCP", "UDP only"]),
    (CLIENT, {"addresses": ["10.42.3.54"], "ports": [32133, 32134]}, "InvalidEndpoint", ["spec.endpoint.ports", "2 ports"]),
    (CLIENT, {"addresses": ["10.42.3.54"]}, "InvalidEndpoint", ["spec.endpoint.port"]),
    (CLIENT, {"addresses": [], "ports": [32133]}, "InvalidEndpoint", ["spec.endpoint.addresses"]),
]


@pytest.mark.parametrize("kind, endpoint, reason, words", REFUSED, ids=["%s-%s" % (r[0], r[3][0]) for r in REFUSED])
def test_endpoint_fields_refused_naming_the_field(kind, endpoint, reason, words):
    p = _plan(_gateway(kind, endpoint))
    assert not p["ready"] and p["error"]["reason"] == reason
    for word in words:
        assert word in p["error"]["message"], (word, p["error"]["message"])
    value, creason, message = gw_mod.connection_value(p)
    assert (value, creason) == ("Error", reason) and words[0] in message


# --------------------------------------------------------------------------------------- rendered Service

SERVER_TEMPLATE = {
    "service": {"metadata": {"name": "gw-{{ .Name }}", "labels": {"app": "gw", "team": "template"},
                             "?annotations": "{{ .Spec.ServiceAnnotations }}"},
                "spec": {"type": "{{ .Spec.Endpoint.ServiceType }}",
                         "ports": [{"port": "{{ .Spec.Endpoint.Port }}", "targetPort": "{{ .Spec.Endpoint.Port }}",
                                    "?nodePort": "{{ .Spec.Endpoint.NodePort }}", "protocol": "UDP"}]}},
    "deployment": {"metadata": {"name": "gw-{{ .Name }}"},
                   "spec": {"template": {"spec": {"containers": [{"ports": [{"containerPort": "{{ .Spec.Endpoint.Port }}"}]}]}}}},
}


@pytest.mark.parametrize("endpoint, port, node_port", [
    ({"ports": [51840], "nodePorts": [30123], "serviceType": "NodePort"}, 51840, 30123),
    ({"port": 51820, "serviceType": "NodePort"}, 51820, None),
    ({"ports": [51841], "serviceType": "LoadBalancer", "loadBalancerIP": "203.0.113.7"}, 51841, None),
])
def test_template_renders_the_single_port_of_a_list(endpoint, port, node_port):
    gw = _gateway(SERVER, endpoint)
    out = render(SERVER_TEMPLATE, gw)
    svc_port = out["service"]["spec"]["ports"][0]
    assert svc_port["port"] == port and svc_port["targetPort"] == port
    assert svc_port.get("nodePort") == node_port
    assert out["deployment"]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == port


def test_service_labels_annotations_and_load_balancer_ip_set_on_the_service():
    gw = _gateway(SERVER, {"ports": [51840], "serviceType": "LoadBalancer", "loadBalancerIP": "203.0.113.7"},
                  serviceLabels={"team": "net", "tier": "edge"}, serviceAnnotations={"lb.example/type": "nlb"})
    rendered = render(SERVER_TEMPLATE, gw)["service"]
    svc = gateway_api.service_with_gateway_fields(dict(rendered, kind="Service"), gw)
    assert svc["metadata"]["labels"] == {"app": "gw", "team": "net", "tier": "edge"}   # the gateway's win
    assert svc["metadata"]["annotations"] == {"lb.example/type": "nlb"}
    assert svc["spec"]["loadBalancerIP"] == "203.0.113.7"
    assert rendered["metadata"]["labels"]["team"] == "template"   # the rendered object is not modified


# ------------------------------------------------------------------------------------------ the user's keys

PRIVATE, PUBLIC = generate_keypair()
RAW = base64.b64decode(PRIVATE)


def _secret(data, name="user-keys"):
    return {"metadata": {"name": name, "namespace": NS},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


KEY_CASES = [
    # Secret data (bytes as stored), error reason or None, words of the message
    ({"privateKey": RAW}, None, []),                                            # Liqo: raw 32 bytes
    ({"privateKey": PRIVATE.encode()}, None, []),                               # base64 text
    ({"privateKey": PRIVATE.encode() + b"\n"}, None, []),                       # text with a newline (kubectl --from-file)
    ({"privateKey": RAW, "publicKey": base64.b64decode(PUBLIC)}, None, []),     # Liqo writes both, raw
    ({"privateKey": PRIVATE.encode(), "publicKey": PUBLIC.encode()}, None, []),
    ({"privateKey": RAW[:31]}, "InvalidSecretKey", ["spec.secretRef", NS + "/user-keys", "data.privateKey", "31 bytes"]),
    ({"privateKey": b"x" * 44}, "InvalidSecretKey", ["spec.secretRef", "data.privateKey", "44 bytes"]),
    ({"publicKey": PUBLIC.encode()}, "InvalidSecretKey", ["spec.secretRef", "no data.privateKey"]),
    ({"privateKey": bytes(32)}, "InvalidSecretKey", ["data.privateKey", "zero"]),
    ({"privateKey": RAW, "publicKey": b"\x01" * 32}, "InvalidSecretKey", ["data.publicKey", "not the public key"]),
]


@pytest.mark.parametrize("data, reason, words", KEY_CASES, ids=["key-%d" % i for i in range(len(KEY_CASES))])
def test_keys_from_the_users_secret(data, reason, words):
    secret = _secret(data)
    if reason is None:
        assert keys_from_secret(secret, SERVER, NS, "gw") == (PUBLIC, PRIVATE)
        return
    with pytest.raises(GatewayKeyError) as err:
        keys_from_secret(secret, SERVER, NS, "gw")
    assert err.value.reason == reason
    for word in words:
        assert word in str(err.value), (word, str(err.value))
    assert PRIVATE not in str(err.value) and PRIVATE[:20] not in str(err.value)   # never the key


class FakeKube:
    """The few calls gateway_api/gateway_incluster make, on dicts."""

    def __init__(self, objects):
        self.objects = {}
        for obj in objects:
            self.put(copy.deepcopy(obj))
        self.created, self.patched = [], []

    def put(self, obj):
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace"), meta["name"])] = obj

    def get(self, kind, namespace, name):
        return copy.deepcopy(self.objects.get((kind, namespace, name)))

    def list(self, kind, namespace=None, label_selector=None):
        return [copy.deepcopy(o) for (k, ns, dummy), o in sorted(self.objects.items())
                if k == kind and (namespace is None or ns == namespace)]

    def cluster_id(self):
        return LOCAL

    def create(self, body):
        self.created.append(body)
        self.put(copy.deepcopy(body))
        return body

    def patch(self, kind, namespace, name, body):
        self.patched.append((kind, namespace, name))

    def apply(self, obj, dry_run=False, field_manager=None):
        return obj

    @staticmethod
    def assumed_namespace(namespace):
        return False


def _kube(gateway, secret=None, pks=None):
    objs = [gateway, dict(_conf(), kind="Configuration")] + [dict(p, kind="PublicKey") for p in pks or [_pk("peer", REMOTE)]]
    if secret is not None:
        objs.append(dict(secret, kind="Secret"))
    return FakeKube(objs)


@pytest.mark.parametrize("secret, reason, words", [
    (_secret({"privateKey": RAW}), None, []),
    (None, "SecretNotFound", ["spec.secretRef", "Secret %s/user-keys" % NS, "not found"]),
    (_secret({"privateKey": RAW[:16]}), "InvalidSecretKey", ["spec.secretRef", "16 bytes"]),
], ids=["raw-key", "missing", "short"])
def test_gateway_plans_use_the_users_secret(secret, reason, words):
    gw = _gateway(SERVER, {"ports": [51840]}, secretRef={"name": "user-keys"})
    kube = _kube(gw, secret)
    plans, keys, changed = gateway_api.gateway_plans(kube, "192.0.2.10", "10.80.0.0/16", validate=False)
    p = plans[0]
    assert p["secret_name"] == "user-keys" and p["status"]["secretRef"]["name"] == "user-keys"
    assert not kube.created and not kube.patched and not changed      # the user's Secret is never written
    if reason is None:
        assert p["ready"] and p["public_key"] == PUBLIC and keys[p["interface"]] == PRIVATE
        return
    assert not p["ready"] and p["error"]["reason"] == reason and p["interface"] not in keys
    for word in words:
        assert word in p["error"]["message"]
    assert gw_mod.connection_value(p)[0] == "Error"


def test_pod_side_and_controller_side_use_the_users_secret():
    gw = _gateway(CLIENT, {"addresses": ["10.42.3.54"], "ports": [32133]}, secretRef={"name": "user-keys"})
    kube = _kube(gw, _secret({"privateKey": RAW}))
    plans, keys = gateway_incluster.pod_side(kube, CLIENT, NS, "gw", None, "10.80.0.0/16")
    assert plans[0]["public_key"] == PUBLIC and list(keys.values()) == [PRIVATE] and plans[0]["ready"]
    out = gateway_incluster.controller_side(kube, CLIENT, NS, "gw", "10.80.0.0/16")
    assert out["error"] is None and out["plan"]["public_key"] == PUBLIC and not kube.created
    del kube.objects[("Secret", NS, "user-keys")]
    out = gateway_incluster.controller_side(kube, CLIENT, NS, "gw", "10.80.0.0/16")
    assert out["error"]["reason"] == "SecretNotFound" and "spec.secretRef" in out["error"]["message"]
    plans, keys = gateway_incluster.pod_side(kube, CLIENT, NS, "gw", None, "10.80.0.0/16")
    assert keys == {} and plans[0]["error"]["reason"] == "SecretNotFound"


def test_without_secret_ref_the_fabric_generates_its_own_secret():
    gw = _gateway(SERVER, {"port": 51820})
    kube = _kube(gw)
    plans, keys, changed = gateway_api.gateway_plans(kube, "192.0.2.10", "10.80.0.0/16", validate=False)
    assert changed and plans[0]["secret_name"] == "wg-server-gw" and kube.created[0]["metadata"]["name"] == "wg-server-gw"


# --------------------------------------------------------------------------------------- PublicKey matching

OTHER = {"kind": CLIENT, "metadata": {"name": "other", "namespace": NS}}
PK_CASES = [
    # PublicKeys, other gateways of the namespace, expected: name of the key, "wait" or (reason, words)
    ([_pk("liqo", REMOTE)], [], "liqo"),                                    # Liqo: the owner's id
    ([_pk("seed", LOCAL)], [], "seed"),                                     # seeds: this cluster's id
    ([_pk("liqo", REMOTE), _pk("seed", LOCAL)], [OTHER], "liqo"),           # the owner's label is exact
    ([_pk("seed", LOCAL)], [OTHER], ("AmbiguousPublicKey", ["seed", "GatewayClient other", REMOTE])),
    ([_pk("a", REMOTE), _pk("b", REMOTE)], [], ("AmbiguousPublicKey", ["a, b", REMOTE])),
    ([_pk("s1", LOCAL), _pk("s2", LOCAL)], [], ("AmbiguousPublicKey", ["s1, s2"])),
    ([_pk("elsewhere", REMOTE, ns="other-ns")], [], "wait"),                # another tenant's key
    ([_pk("third", "cccc-third")], [], "wait"),
    ([], [], "wait"),
]


@pytest.mark.parametrize("pks, others, expected", PK_CASES, ids=["pk-%d" % i for i in range(len(PK_CASES))])
def test_public_key_matching_by_namespace_and_gateway(pks, others, expected):
    gw = _gateway(SERVER, {"port": 51820})
    p = _plan(gw, pks=pks, siblings=[dict(gw)] + others)
    if expected == "wait":
        assert p["waiting"]["reason"] == "WaitingForPublicKey" and not p["ready"]
        assert NS in p["waiting"]["message"] and REMOTE in p["waiting"]["message"] and LOCAL in p["waiting"]["message"]
    elif isinstance(expected, tuple):
        assert p["error"]["reason"] == expected[0] and not p["ready"]
        for word in expected[1]:
            assert word in p["error"]["message"]
    else:
        key = next(k for k in pks if k["metadata"]["name"] == expected)
        assert p["ready"] and p["peer"]["public_key"] == key["spec"]["publicKey"]


def test_seed_example_public_keys_match_as_written():
    """The seeds' GatewayServer/GatewayClient with the seeds' PublicKeys, each cluster seeing what is applied to it."""
    objs = dict((o["metadata"]["name"], o) for dummy, o in seed_examples())
    server, client = copy.deepcopy(objs["server"]), copy.deepcopy(objs["client"])
    server_cluster = client["metadata"]["labels"][LABEL]     # the client's remote is the server's cluster
    client_cluster = server["metadata"]["labels"][LABEL]
    for gw, cluster, key in ((server, server_cluster, "dry-paper"), (client, client_cluster, "crimson-field")):
        gw["metadata"].setdefault("namespace", "default")
        pk = copy.deepcopy(objs[key])
        pk["metadata"]["namespace"] = "default"
        conf = {"metadata": {"name": "c", "namespace": "default", "labels": dict(gw["metadata"]["labels"])},
                "spec": {"remote": {"cidr": {"pod": "10.243.0.0/16"}}}, "status": {"remote": {"cidr": {"pod": "10.71.0.0/16"}}}}
        p = gw_mod.plan(gw, [conf], [pk], cluster, "10.42.3.54", namespace_gateways=[gw]).to_result()
        assert p["ready"] and p["peer"]["public_key"] == pk["spec"]["publicKey"], (gw["kind"], p["waiting"], p["error"])


# ------------------------------------------------------------------------------------------ Configurations

@pytest.mark.parametrize("cidr, status, original, remapped", [
    ({"pod": "10.243.0.0/16"}, {"pod": "10.71.0.0/16"}, "10.243.0.0/16", "10.71.0.0/16"),            # no external
    ({"pod": ["10.243.0.0/16"], "external": ["10.70.0.0/16"]}, {"pod": ["10.71.0.0/16"]}, "10.243.0.0/16", "10.71.0.0/16"),
    ({"pod": ["10.243.0.0/16"]}, {"pod": "10.71.0.0/16"}, "10.243.0.0/16", "10.71.0.0/16"),
])
def test_configuration_without_external_or_with_lists_is_read(cidr, status, original, remapped):
    p = _plan(_gateway(SERVER, {"port": 51820}), confs=[_conf(cidr, status)])
    assert p["ready"], (p["waiting"], p["error"])
    assert p["nat_tunnel"]["remote_original"] == original and p["nat_tunnel"]["remote_remapped"] == remapped


@pytest.mark.parametrize("cidr, error", [
    ({"pod": "10.243.0.0/16"}, None),
    ({"pod": ["10.243.0.0/16"]}, None),
    ({"pod": ["10.243.0.0/16"], "external": ["10.70.0.0/16"]}, None),
    ({"pod": ["10.243.0.0/16", "10.244.0.0/16"]}, "spec.remote.cidr.pod"),
    ({"pod": "10.243.0.0/16", "external": []}, "spec.remote.cidr.external"),
])
def test_ipam_reads_string_and_single_element_list_cidrs(cidr, error):
    ipam = Ipam(pod_cidrs=["10.200.0.0/16"])
    conf = {"metadata": {"name": "c", "namespace": NS}, "spec": {"remote": {"cidr": cidr}}}
    (owner, out, dummy), = ipam.adopt_configurations([conf])
    if error is None:
        assert not isinstance(out, IpamError) and set(out) == set(cidr), out
    else:
        assert isinstance(out, IpamError) and error in str(out)


def test_key_rotation_refuses_the_users_keys():
    from ansible_collections.liqo.fabric.plugins.module_utils.gateway import key_rotation  # pylint: disable=import-outside-toplevel
    gw = _gateway(SERVER, {"port": 51820}, secretRef={"name": "user-keys"})
    gw["metadata"]["annotations"] = {key_rotation.PERIOD_ANNOTATION: "24h"}
    out = key_rotation.schedule(gw, None, None)
    assert not out["due"] and "spec.secretRef" in out["error"] and "user-keys" in out["error"]
    with pytest.raises(key_rotation.RotationError, match="spec.secretRef"):
        key_rotation._secret(FakeKube([]), gw)  # pylint: disable=protected-access


def test_a_warm_standby_client_has_its_tunnel_but_cannot_reach_the_peer():
    """A standby pod's plan: the same keys, addresses and peer, but no endpoint and no keepalive for a client (it
    must send nothing while the active pod holds the peer); the active plan keeps both."""
    gw = _gateway(CLIENT, {"addresses": ["10.42.3.54"], "ports": [32133]}, secretRef={"name": "user-keys"})
    kube = _kube(gw, _secret({"privateKey": RAW}))
    (active,), keys = gateway_incluster.pod_side(kube, CLIENT, NS, "gw", None, "10.80.0.0/16")
    (standby,), standby_keys = gateway_incluster.pod_side(kube, CLIENT, NS, "gw", None, "10.80.0.0/16", standby=True)
    assert active["peer"]["endpoint"] and active["peer"]["persistent_keepalive"] > 0 and not active.get("standby")
    assert standby["peer"]["endpoint"] is None and standby["peer"]["persistent_keepalive"] == 0 and standby["standby"]
    assert standby_keys == keys and standby["ready"]
    assert {k: v for k, v in standby.items() if k not in ("peer", "standby")} == \
        {k: v for k, v in active.items() if k != "peer"}


# ------------------------------------------------------------------------------------------ refused changes

def _connection(annotations=None, owner_uid="u1"):
    return {"kind": "Connection", "metadata": {"name": "gw", "namespace": NS, "annotations": annotations or {},
                                               "ownerReferences": [{"uid": owner_uid}]}}


@pytest.mark.parametrize("connection, held", [
    (_connection({gateway_api.BUILT_ANNOTATION: "1"}), True),      # built before: its refused change is held
    (_connection(), False),                                        # never built: nothing to hold
    (_connection({gateway_api.BUILT_ANNOTATION: "1"}, "other"), False),   # a Connection of an older gateway of that name
    (None, False),
], ids=["built", "never-built", "another-gateways-connection", "no-connection"])
def test_a_refused_change_holds_a_gateway_built_before(connection, held):
    gw = _gateway(SERVER, {"ports": [51840, 51841]})            # refused: InvalidEndpoint
    kube = _kube(gw)
    if connection:
        kube.put(connection)
    plans, dummy, dummy2 = gateway_api.gateway_plans(kube, "192.0.2.10", "10.80.0.0/16", validate=False)
    assert plans[0]["error"]["reason"] == "InvalidEndpoint" and not plans[0]["ready"]
    assert plans[0]["held"] is held
    # the overlay keeps routing through a held gateway only
    assert [p["interface"] for p in gateway_api.built_gateways(kube, LOCAL, kube.list("Configuration"))] == (
        [plans[0]["interface"]] if held else [])


def test_a_ready_gateway_is_never_held():
    kube = _kube(_gateway(SERVER, {"ports": [51840]}))
    kube.put(_connection({gateway_api.BUILT_ANNOTATION: "1"}))
    plans, dummy, dummy2 = gateway_api.gateway_plans(kube, "192.0.2.10", "10.80.0.0/16", validate=False)
    assert plans[0]["ready"] and plans[0]["held"] is False


def test_a_configuration_the_ipam_refused_is_a_refusal_of_the_gateway():
    """The status keeps the remap of the spec the IPAM last accepted: the gateway is not rebuilt from it."""
    conf = _conf()
    conf["status"]["conditions"] = [{"type": "NetworkCIDRsConfigured", "status": "False", "reason": "PoolTooSmall",
                                     "message": "pools 10.0.0.0/24 too small: ...; the allocation in use is kept"}]
    p = _plan(_gateway(SERVER, {"ports": [51840]}), confs=[conf])
    assert not p["ready"] and p["error"]["reason"] == "ConfigurationRefused"
    assert p["error"]["message"].startswith("Configuration %s/conf: pools 10.0.0.0/24 too small" % NS)
    assert p["remote"]["pod_remapped"] == "10.71.0.0/16"
    conf["status"]["conditions"][0]["status"] = "True"
    assert _plan(_gateway(SERVER, {"ports": [51840]}), confs=[conf])["ready"]


# ------------------------------------------------------------------------------------------------ spec.mtu

CLIENT_ENDPOINT = {"addresses": ["10.42.3.54"], "ports": [32133]}


@pytest.mark.parametrize("mtu, expected", [(576, 576), (1300, 1300), (9000, 9000), (None, 1340)],
                         ids=["576", "1300", "9000", "absent"])
def test_an_mtu_the_tunnel_can_use_is_honoured(mtu, expected):
    gw = _gateway(CLIENT, CLIENT_ENDPOINT, mtu=mtu)
    if mtu is None:
        del gw["spec"]["mtu"]
    p = _plan(gw)
    assert p["ready"] and p["error"] is None and p["mtu"] == expected


# Liqo's own CRDs bound spec.mtu nowhere (the fabric's say 576-9000): what they let through is refused by the plan
@pytest.mark.parametrize("mtu", [575, 500, 0, -1, 9001, 65536, True, "1340"])
def test_an_mtu_the_tunnel_cannot_use_is_refused_naming_the_field_and_the_value(mtu):
    p = _plan(_gateway(CLIENT, CLIENT_ENDPOINT, mtu=mtu))
    assert not p["ready"] and p["error"]["reason"] == "InvalidMTU", p["error"]
    assert p["error"]["message"].startswith("spec.mtu: %r is not an MTU the tunnel can use" % mtu), p["error"]
    assert "576" in p["error"]["message"] and "9000" in p["error"]["message"]
    assert gw_mod.connection_value(p)[:2] == ("Error", "InvalidMTU")
    assert "InvalidMTU" in gw_mod.REFUSAL_REASONS        # the run fails with it: the controller's Degraded says why


def test_a_refused_mtu_holds_a_gateway_built_before():
    """A live gateway whose spec.mtu is changed to one the tunnel cannot use keeps running as last built: nothing is
    rebuilt from the refused spec and the overlay keeps routing through it."""
    kube = _kube(_gateway(CLIENT, CLIENT_ENDPOINT, mtu=500))
    kube.put(_connection({gateway_api.BUILT_ANNOTATION: "1"}))
    plans, dummy, dummy2 = gateway_api.gateway_plans(kube, "192.0.2.10", "10.80.0.0/16", validate=False)
    assert plans[0]["error"]["reason"] == "InvalidMTU" and not plans[0]["ready"] and plans[0]["held"]
    assert [p["interface"] for p in gateway_api.built_gateways(kube, LOCAL, kube.list("Configuration"))] == [
        plans[0]["interface"]]


# ----------------------------------------------------------------------------- refused on the gateway host

def test_an_endpoint_the_gateway_host_cannot_resolve_is_refused_naming_the_field(monkeypatch):
    """A client's server address is resolved where the tunnel runs: a name that host cannot resolve is refused
    before anything is written, naming the field and the value; the refusal belongs to the gateway object, so the
    controller's Degraded condition carries its reason."""
    def no_such_host(host, *args):
        raise socket.gaierror(-2, "Name or service not known")
    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    p = _plan(_gateway(CLIENT, {"addresses": ["no-such-host.invalid"], "ports": [32133]}))
    assert p["ready"] and p["peer"]["endpoint"] == "no-such-host.invalid:32133"
    with pytest.raises(gateway_dataplane.DataplaneError) as refused:
        gateway_dataplane.validate([p], {p["interface"]: generate_keypair()[0]})
    message = str(refused.value)
    assert message.startswith("gateways[0] (%s): spec.endpoint.addresses: cannot resolve host 'no-such-host.invalid'"
                              % p["interface"]), message
    assert refused.value.errors == {"%s/gw" % NS: {"reason": "InvalidEndpoint", "message": message}}


def test_a_peer_key_the_gateway_host_refused_belongs_to_its_gateway():
    refusal = {"reason": "PeerKeyRejected", "message": "the peer's new public key K completed no handshake ..."}
    result = {"gateways": [{"interface": "lwg1", "namespace": NS, "name": "gw", "refused": refusal},
                           {"interface": "lwg2", "namespace": NS, "name": "other", "changed": False}]}
    assert gateway_dataplane.refusal_errors(result) == {"%s/gw" % NS: refusal}
