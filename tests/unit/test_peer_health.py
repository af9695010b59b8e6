"""The live peer health's pure logic: the probe packet, the state machine (losses -> Error, an answer ->
Connected), the Connection status patch, the metrics text with Liqo's names and labels, input checks."""
import os
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.health import host  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import metrics as phm  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import prober as ph  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import status as phs  # noqa: E402


def test_packet_round_trip_and_garbage():
    data = ph.encode(ph.PING, 7, 123456789)
    assert ph.decode(data) == (ph.PING, 7, 123456789)
    assert ph.decode(ph.encode(ph.PONG, 2**32 + 3, 5)) == (ph.PONG, 3, 5)
    assert ph.decode(b"x" * len(data)) is None
    assert ph.decode(data[:-1]) is None
    assert ph.decode(b"LFH1X" + data[5:]) is None


def test_losses_below_threshold_keep_connected_then_error_then_recovery():
    s = ph.HealthState(threshold=3, target="169.254.18.1:12345 via lwg0")
    assert s.value == ph.CONNECTING
    assert s.observe(True, 412.0, now=1) and s.value == ph.CONNECTED and s.latency_us == 412.0
    assert s.message == ph.CONNECTED_MESSAGE == "handshake and probe through the tunnel succeeded"
    assert not s.observe(False, now=2) and s.value == ph.CONNECTED
    assert not s.observe(False, now=3) and s.value == ph.CONNECTED
    assert s.observe(False, now=4) and s.value == ph.ERROR
    assert s.reason == "PeerUnreachable" and "3 consecutive" in s.message and "169.254.18.1:12345" in s.message
    assert s.latency_us is None and s.since == 4
    assert not s.observe(False, now=5) and s.value == ph.ERROR and "4 consecutive" in s.message
    assert s.observe(True, 500.0, now=6) and s.value == ph.CONNECTED and s.reason == "Established"
    assert s.losses == 0 and s.latency_us == 500.0


def test_an_answer_between_losses_resets_the_count():
    s = ph.HealthState(threshold=2)
    s.observe(True, 1.0)
    s.observe(False)
    s.observe(True, 1.0)
    assert not s.observe(False) and s.value == ph.CONNECTED


def test_a_client_restarts_its_session_from_the_first_lost_ping_then_backs_off():
    """The server's failover: a client restarts at every lost ping up to the Error (its next handshake reaches the
    new active pod through the Service), then every THRESHOLD-th, Connecting or not (a client pod that took over
    while the server's pod was being replaced too); a server only at the Error."""
    def restarts(client, answered_first=True, losses=9):
        st, out = ph.HealthState(3), []
        if answered_first:
            st.observe(True, 100)
        for n in range(1, losses + 1):
            changed = st.observe(False)
            if ph.restart_due(st, changed, client):
                out.append(n)
        return out
    assert restarts(client=True) == [1, 2, 3, 6, 9]
    assert restarts(client=False) == [3]
    assert restarts(client=True, answered_first=False) == [1, 2, 3, 6, 9]   # a wrong key too: then every 3rd
    assert restarts(client=False, answered_first=False) == [3]
    st = ph.HealthState(3)
    st.observe(True, 100)
    assert not ph.restart_due(st, st.observe(True, 100), True)        # an answer never restarts


def test_missing_interface_is_its_own_reason():
    s = ph.HealthState(threshold=1)
    assert s.observe(False, why="NoInterface") and s.value == ph.ERROR and s.reason == "NoInterface"


def test_never_answered_goes_from_connecting_to_error():
    s = ph.HealthState(threshold=2)
    s.observe(False)
    assert s.value == ph.CONNECTING
    assert s.observe(False) and s.value == ph.ERROR


@pytest.mark.parametrize("args,field", [
    (("", "169.254.18.1"), "interface"), (("x" * 16, "169.254.18.1"), "interface"),
    (("lwg0", "nope"), "address"), (("lwg0", "10.0.0"), "address"),
    (("lwg0", "169.254.18.1", 0), "port"), (("lwg0", "169.254.18.1", 12345, 0), "interval"),
    (("lwg0", "169.254.18.1", 12345, 1.0, 0), "threshold"),
])
def test_bad_parameters_name_the_field(args, field):
    with pytest.raises(ph.HealthError, match=field):
        ph.validate(*args)


def test_module_input_checked_before_anything(tmp_path):
    with pytest.raises(ph.HealthError, match=r"gateways\[1\]: missing address"):
        host.apply([{"interface": "lwg0", "address": "169.254.18.1", "namespace": "n", "connection_name": "c"},
                    {"interface": "lwg1", "namespace": "n", "connection_name": "c"}], "present", str(tmp_path / "h"))
    with pytest.raises(ph.HealthError, match=r"gateways\[0\]\.port: 70000"):
        host.apply([{"interface": "lwg0", "address": "169.254.18.1", "namespace": "n", "connection_name": "c",
                     "port": 70000}], "present", str(tmp_path / "h"))
    with pytest.raises(ph.HealthError, match="kubeconfig: /nonexistent"):
        host.apply([{"interface": "lwg0", "address": "169.254.18.1", "namespace": "n", "connection_name": "c"}],
                   "present", str(tmp_path / "h"), kubeconfig="/nonexistent")
    with pytest.raises(ph.HealthError, match="state_dir"):
        host.apply([], "present", "relative/dir")
    assert not (tmp_path / "h").exists()


def test_status_patch_connected_error_and_quiet_when_unchanged():
    p = phs.status_patch({}, ph.CONNECTED, "Established", "ok", 412.4, "T1")
    st = p["status"]
    assert st["value"] == "Connected" and st["latency"] == {"value": "0.412ms", "timestamp": "T1"}
    cond = st["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Established", "True", "Established")
    assert phs.status_patch(st, ph.CONNECTED, "Established", "ok", 412.4, "T2") is None
    # the value holds: only the latency, the condition (the role's publish writes it too) is left alone
    assert phs.status_patch(st, ph.CONNECTED, "Established", "other", 900.0, "T2") == {
        "status": {"latency": {"value": "0.900ms", "timestamp": "T2"}}}
    st["conditions"][0]["observedGeneration"] = 4
    err = phs.status_patch(st, ph.ERROR, "PeerUnreachable", "3 lost", None, "T3")["status"]
    assert err["value"] == "Error" and err["latency"] is None  # merge patch: removes the latency
    assert err["conditions"][0]["status"] == "False" and err["conditions"][0]["reason"] == "PeerUnreachable"
    assert err["conditions"][0]["observedGeneration"] == 4
    assert phs.status_patch(err, ph.ERROR, "PeerUnreachable", "4 lost", None, "T4") is None


def test_an_error_of_the_plan_is_not_cleared_by_answering_probes():
    """An MTU mismatch (or any reason the probe cannot see end) stays until a run clears it; an Error the probe
    can see end (the peer silent, no handshake) turns Connected when the peer answers."""
    def error(reason):
        return {"value": "Error", "conditions": [{"type": "Established", "status": "False", "reason": reason}]}
    for reason in ("MTUMismatch", "InvalidEndpoint", "SecretNotFound"):
        assert phs.status_patch(error(reason), ph.CONNECTED, "Established", "ok", 400.0, "T") is None, reason
    for reason in sorted(phs.PROBE_REASONS):
        assert phs.status_patch(error(reason), ph.CONNECTED, "Established", "ok", 400.0, "T")["status"]["value"] == \
            "Connected", reason


def test_metrics_have_liqos_names_and_labels():
    text = phm.render([phm.sample("cluster-b", True, 412.6, (1000, 2000)),
                       phm.sample("cluster-c", False, None, None)])
    lines = text.splitlines()
    assert 'liqo_peer_is_connected{driver="wireguard",cluster_id="cluster-b"} 1' in lines
    assert 'liqo_peer_latency_us{driver="wireguard",cluster_id="cluster-b"} 413' in lines
    assert 'liqo_peer_receive_bytes_total{driver="wireguard",cluster_id="cluster-b"} 1000' in lines
    assert 'liqo_peer_transmit_bytes_total{driver="wireguard",cluster_id="cluster-b"} 2000' in lines
    assert 'liqo_peer_is_connected{driver="wireguard",cluster_id="cluster-c"} 0' in lines
    assert 'liqo_peer_latency_us{driver="wireguard",cluster_id="cluster-c"} 0' in lines
    assert not any(line.startswith("liqo_peer_receive_bytes_total") and "cluster-c" in line for line in lines)
    assert "# TYPE liqo_peer_receive_bytes_total counter" in lines and "# TYPE liqo_peer_is_connected gauge" in lines


def test_plans_to_probe_specs():
    ready = {"interface": "lwg1", "probe_address": "169.254.18.1", "namespace": "ns", "name": "client",
             "connection_name": "client", "remote_cluster_id": "cid-b", "ready": True, "error": None,
             "peer": {"public_key": "PUB"}, "mtu": 1340}
    waiting = dict(ready, interface="lwg2", ready=False)
    broken = dict(ready, interface="lwg3", error={"reason": "MTUMismatch"})
    probe, halt = host.from_plans([ready, waiting, broken])
    assert probe == [{"interface": "lwg1", "address": "169.254.18.1", "namespace": "ns", "connection_name": "client",
                      "remote_cluster_id": "cid-b", "public_key": "PUB"}]
    assert halt == ["lwg2", "lwg3"]
    with pytest.raises(ph.HealthError, match=r"plans\[0\]"):
        host.from_plans([{"name": "x"}])
    # a held gateway (a refused change of a built one) is neither probed anew nor stopped
    probe, halt = host.from_plans([dict(broken, ready=False, held=True)])
    assert probe == [{"interface": "lwg3", "held": True}] and halt == []


def test_a_held_gateways_probe_runs_on_even_with_exclusive(tmp_path):
    """exclusive stops the probes of gateways that are gone, not the one of a held gateway; a teardown
    (state absent) stops it like any other."""
    from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # noqa: E402
    state_dir = str(tmp_path / "health")
    spec = {"interface": "lfnone1", "address": "169.254.18.1", "interval": 5.0, "threshold": 3}
    assert phd.start(spec, state_dir)
    try:
        res = host.apply([{"interface": "lfnone1", "held": True}], "present", state_dir, exclusive=True)
        assert res["stopped"] == [] and res["started"] == [] and phd.running(state_dir) == ["lfnone1"], res
        res = host.apply([{"interface": "lfnone1", "held": True}], "absent", state_dir)
        assert res["stopped"] == ["lfnone1"] and phd.running(state_dir) == []
    finally:
        phd.stop(state_dir, "lfnone1")


def test_stop_ends_the_probe_process_without_waiting_out_its_interval(tmp_path):
    """disconnect and reset stop every probe: the stop signal ends the loop where it waits (here the sleep of an
    interval of 5 s on an interface that does not exist), not at the end of that interval."""
    import time  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # noqa: E402
    state_dir = str(tmp_path / "health")
    spec = {"interface": "lfnone0", "address": "169.254.18.1", "interval": 5.0, "threshold": 3}
    assert phd.start(spec, state_dir)
    time.sleep(0.3)  # in its interval's sleep
    t0 = time.monotonic()
    assert phd.stop(state_dir, "lfnone0")
    took = time.monotonic() - t0
    assert took < 1.0, took
    assert not os.path.exists(state_dir) and phd.running(state_dir) == []


def test_the_probe_process_is_spawned_only_from_a_collection_on_disk(monkeypatch, tmp_path):
    """A probe process started in-process is a fresh interpreter importing the collection from its directory; from
    AnsiballZ's payload (a zip removed when the module ends) it stays a fork of the module's process."""
    from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # pylint: disable=import-outside-toplevel
    assert phd.collection_root() == os.path.join(ROOT, "build", "collections")
    fake = type(sys)("ansible_collections.liqo.fabric")
    fake.__path__ = [str(tmp_path / "ansible_payload.zip" / "ansible_collections" / "liqo" / "fabric")]
    monkeypatch.setitem(sys.modules, "ansible_collections.liqo.fabric", fake)
    assert phd.collection_root() is None
    fake.__path__ = []
    assert phd.collection_root() is None
