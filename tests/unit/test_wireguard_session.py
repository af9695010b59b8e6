"""Restarting a peer's WireGuard session (the health probe does it when the peer goes silent): the UAPI request
removes and re-adds the same peer with what was read, removal first; peers without an endpoint are left alone;
the exported byte counters stay monotonic across the counters' restart from 0."""
import os
import sys

from tests.conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.health import metrics as phm  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import session as wgs  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import encode_key  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import DeviceState, PeerState  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.uapi import render_uapi_set  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.userspace import UserspaceBackend  # noqa: E402

PUB_A = encode_key(bytes(range(32)))
PUB_B = encode_key(bytes(range(1, 33)))


def device():
    dev = DeviceState()
    dev.peers[PUB_A] = PeerState(PUB_A, endpoint="192.168.77.2:51820", allowed_ips=["0.0.0.0/0"],
                                 persistent_keepalive=25, preshared_key=b"\x07" * 32, rx_bytes=900, tx_bytes=800)
    dev.peers[PUB_B] = PeerState(PUB_B, endpoint=None, allowed_ips=["10.0.0.0/8"])
    return dev


def test_restart_removes_then_re_adds_the_same_configuration():
    text = render_uapi_set(wgs.restart_changes(device(), PUB_A))
    lines = text.split("\n")
    key = bytes(range(32)).hex()
    assert lines[:3] == ["set=1", "public_key=" + key, "remove=true"], lines
    assert lines[3:] == ["public_key=" + key, "preshared_key=" + "07" * 32, "endpoint=192.168.77.2:51820",
                         "persistent_keepalive_interval=25", "replace_allowed_ips=true", "allowed_ip=0.0.0.0/0",
                         "", ""], lines


def test_peers_without_an_endpoint_cannot_start_a_handshake_and_are_left_alone():
    assert wgs.restart_changes(device(), PUB_B).empty()
    assert wgs.restart_changes(device(), "not-a-peer").empty()
    every = wgs.restart_changes(device())  # no key: every peer with an endpoint
    assert [(p.public_key, p.remove) for p in every.peers] == [(PUB_A, True), (PUB_A, False)]


def test_rebind_moves_the_interface_to_a_random_port_with_the_restart_only():
    text = render_uapi_set(wgs.restart_changes(device(), PUB_A, rebind=True))
    assert text.split("\n")[:3] == ["set=1", "listen_port=0", "public_key=" + bytes(range(32)).hex()], text
    assert "listen_port" not in render_uapi_set(wgs.restart_changes(device(), PUB_A))
    assert wgs.restart_changes(device(), PUB_B, rebind=True).empty()   # nothing restarted: the port stays


def test_activation_gives_the_peer_without_an_endpoint_its_endpoint_and_keepalive():
    change = wgs.activate_changes(device(), "192.0.2.7:32100", 25)
    # removed and added back fresh (a standby's peer has failed handshake attempts behind it), on a new port
    assert [(p.public_key, p.remove, p.new) for p in change.peers] == [(PUB_B, True, False), (PUB_B, False, True)]
    added = change.peers[1]
    assert (added.endpoint, added.persistent_keepalive, change.listen_port) == ("192.0.2.7:32100", 25, 0)
    assert added.allowed_ips == list(device().peers[PUB_B].allowed_ips)
    text = render_uapi_set(change)
    assert text.index("remove=true") < text.index("endpoint=192.0.2.7:32100"), text
    dev = device()
    dev.peers[PUB_B].endpoint = "192.0.2.7:32100"   # already active: nothing to do
    assert wgs.activate_changes(dev, "192.0.2.7:32100", 25).empty()


def test_counters_stay_monotonic_across_a_restart_from_zero():
    c = phm.Counters("lfab0")
    assert c.add(None) is None
    assert c.add((100, 50)) == (100, 50)
    assert c.add((150, 70)) == (150, 70)
    assert c.add((10, 5)) == (160, 75)      # the peer was re-added: its counters restarted
    assert c.add(None) is None              # interface gone: no counters exported ...
    assert c.add((20, 90)) == (170, 160)    # ... and nothing counted is lost (tx did not go back)


def test_the_config_lock_serializes_writers_of_one_interface(tmp_path):
    import fcntl
    import threading
    be = UserspaceBackend("lfab0", run_dir=str(tmp_path))
    with be.config_lock():
        pass  # no pid file (not running): nothing to lock, no file made
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "lfab0.pid").write_text("1\n")
    holder = open(tmp_path / "lfab0.pid")
    fcntl.flock(holder, fcntl.LOCK_EX)  # another writer (a module run) is between its read and its write
    entered = threading.Event()

    def restart():
        with be.config_lock():
            entered.set()

    t = threading.Thread(target=restart)
    t.start()
    assert not entered.wait(0.3)
    holder.close()
    assert entered.wait(5)
    t.join(5)


def _live_client(last_handshake=1000.0):
    dev = DeviceState(private_key=b"\x01" * 32)
    dev.peers[PUB_A] = PeerState(PUB_A, endpoint="192.168.77.2:51820", allowed_ips=["0.0.0.0/0"],
                                 persistent_keepalive=25, last_handshake=last_handshake)
    return dev


def test_a_new_peer_key_is_tried_beside_the_live_peer_carrying_nothing():
    text = render_uapi_set(wgs.trial_changes(_live_client(), PUB_B, "192.168.77.2:51820", now=1010.0))
    assert text.split("\n") == ["set=1", "public_key=" + bytes(range(1, 33)).hex(), "endpoint=192.168.77.2:51820",
                                "persistent_keepalive_interval=1", "replace_allowed_ips=true", "", ""], text


def test_a_server_tries_the_new_key_where_the_live_peers_packets_come_from():
    server = _live_client()
    server.peers[PUB_A].endpoint = "192.168.77.9:40001"      # the client's address as WireGuard last saw it
    text = render_uapi_set(wgs.trial_changes(server, PUB_B, None, now=1010.0))
    assert "endpoint=192.168.77.9:40001" in text.split("\n"), text
    server.peers[PUB_A].endpoint = None                       # never heard from: nowhere to try
    assert wgs.trial_changes(server, PUB_B, None, now=1010.0).empty()


def test_no_trial_without_a_live_session_to_protect_or_when_the_own_key_changes_too():
    endpoint = "192.168.77.2:51820"
    assert wgs.trial_changes(_live_client(), PUB_B, endpoint, now=1000.0 + wgs.LIVE_SESSION).empty()  # session over
    assert wgs.trial_changes(_live_client(None), PUB_B, endpoint, now=1010.0).empty()      # never had one
    assert wgs.trial_changes(_live_client(), PUB_A, endpoint, now=1010.0).empty()          # the same key
    # the interface's own key changes in the same build: the peer expects the new one, the trial cannot use it
    assert wgs.trial_changes(_live_client(), PUB_B, endpoint, now=1010.0, private_key=b"\x02" * 32).empty()
    assert not wgs.trial_changes(_live_client(), PUB_B, endpoint, now=1010.0, private_key=b"\x01" * 32).empty()
