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
