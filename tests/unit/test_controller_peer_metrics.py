"""The controller's liqo_peer_* from the Connections it watches: Liqo's names and label names (driver,
cluster_id) plus the cluster, namespace and name a multi-cluster controller needs; an Error Connection is 0
with no latency; a deleted one leaves no series; a gateway pod's live source replaces them."""
from prometheus_client.parser import text_string_to_metric_families

from controller.metrics import Metrics


def samples(m):
    """{(name, label items): value} of the liqo_peer_* samples, and the families' types."""
    out, types = {}, {}
    for fam in text_string_to_metric_families(m.render().decode()):
        if fam.name.startswith("liqo_peer"):
            types[fam.name] = fam.type
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out, types


def conn(value, latency=None):
    status = {"value": value}
    if latency:
        status["latency"] = {"value": latency}
    return {"metadata": {"name": "server", "namespace": "liqo-tenant-b", "labels": {"liqo.io/remote-cluster-id": "cid-b"}},
            "status": status}


LABELS = tuple(sorted({"driver": "wireguard", "cluster_id": "cid-b", "cluster": "a", "namespace": "liqo-tenant-b",
                       "name": "server"}.items()))
POD = (("cluster_id", "cid-b"), ("driver", "wireguard"))


def test_connection_status_to_liqo_metrics():
    m = Metrics()
    m.connection("a", conn("Connected", "1.5ms"))
    assert samples(m)[0] == {("liqo_peer_is_connected", LABELS): 1, ("liqo_peer_latency_us", LABELS): 1500}
    m.connection("a", conn("Error", "1.5ms"))
    assert samples(m)[0] == {("liqo_peer_is_connected", LABELS): 0, ("liqo_peer_latency_us", LABELS): 0}
    m.connection("a", conn("Error"), deleted=True)
    assert samples(m)[0] == {}


def test_live_source_replaces_the_connections():
    m = Metrics()
    m.connection("a", conn("Connected", "1ms"))
    m.live_peers = lambda: [{"labels": {"driver": "wireguard", "cluster_id": "cid-b"},
                             "values": {"liqo_peer_is_connected": 0, "liqo_peer_receive_bytes_total": 42}}]
    values, types = samples(m)
    assert values == {("liqo_peer_is_connected", POD): 0, ("liqo_peer_receive_bytes_total", POD): 42}
    assert types == {"liqo_peer_is_connected": "gauge", "liqo_peer_receive_bytes": "counter"}
    assert m.render().decode().count("# TYPE liqo_peer_is_connected gauge") == 1
