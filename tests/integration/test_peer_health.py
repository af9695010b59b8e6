"""liqo.fabric.peer_health on real netns: two gateway hosts with a real wireguard-go tunnel
(liqo.fabric.gateway_dataplane), one probe process per end. The client's process reports the peer
Connected with a latency; wireguard-go of the server killed -> Error, and the client restarts its WireGuard
session; the server's tunnel rebuilt -> Connected again within 10 s; WireGuard's byte counters in the metrics rise with traffic; stop leaves nothing behind.
A held probe (liqo.fabric.peer_health_hold, the key rotation's) keeps the session until released.
States are polled with a deadline; bench_peer_health prints the times."""
import os
import pathlib
import shutil
import stat
import tempfile
import time

import pytest

from tests.ansible_run import run_module
from tests.conftest import process_reaped
from tests.integration.test_gateway_dataplane import build, pair  # noqa: F401 # pylint: disable=unused-import
from tests.lab import netns
from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd
from ansible_collections.liqo.fabric.plugins.module_utils.health import hold
from ansible_collections.liqo.fabric.plugins.plugin_utils import speed

pytestmark = pytest.mark.root
MODULE = "liqo.fabric.peer_health"
HOLD = "liqo.fabric.peer_health_hold"


def spec(gw, remote_id):
    return {"interface": gw["interface"], "address": gw["probe_address"], "namespace": gw["namespace"],
            "connection_name": gw["name"], "remote_cluster_id": remote_id, "public_key": gw["peer"]["public_key"],
            "interval": 0.5, "threshold": 3}


def poll(fn, want, deadline):
    start = time.monotonic()
    last = None
    while time.monotonic() - start < deadline:
        try:
            last = fn()
        except OSError as exc:
            last = exc
        if want(last):
            return time.monotonic() - start, last
        time.sleep(0.1)
    raise AssertionError(f"not reached within {deadline} s: {last}")


def metric(text, name):
    line = next(x for x in text.splitlines() if x.startswith(name + "{"))
    return float(line.rsplit(" ", 1)[1])


def wireguard_go_pid(ns, ifname):
    for pid in netns.pids_in_netns(ns):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"wireguard-go" and ifname.encode() in argv:
            return pid
    return None


@pytest.fixture
def tmp_dir():
    """Not pytest's tmp_path: another pytest session on the machine may prune it while the test runs."""
    path = tempfile.mkdtemp(prefix="lfab-health-")
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


def test_probe_follows_the_peer_down_and_up(pair, tmp_dir):  # noqa: F811
    tmp_path = tmp_dir
    assert build(pair, "server")["rc"] == 0
    assert build(pair, "client", probe_wait=10)["rc"] == 0
    dirs = {"server": str(tmp_path / "health-s"), "client": str(tmp_path / "health-c")}
    specs = {"server": spec(pair["server"], "cluster-a"), "client": spec(pair["client"], "cluster-b")}
    for side in ("server", "client"):
        res = run_module(MODULE, {"gateways": [specs[side]], "state_dir": dirs[side]}, netns=pair[side + "_ns"])
        assert res["rc"] == 0 and res["started"] == [specs[side]["interface"]], res
    cif, sif = specs["client"]["interface"], specs["server"]["interface"]

    def status():
        return phd.query(dirs["client"], cif)

    st = poll(status, lambda s: isinstance(s, dict) and s["value"] == "Connected", 10)[1]
    assert st["latency_us"] > 0
    # run in-process (a fork of the Ansible worker), the module starts the probe as a fresh interpreter that keeps
    # none of the worker's memory or descriptors; as an AnsiballZ module (speed paths off), a fork of that process
    with open(f"/proc/{st['pid']}/cmdline", "rb") as f:
        argv = f.read().split(b"\0")
    fresh = b"-c" in argv and any(b"module_utils.health import daemon" in a for a in argv)
    assert fresh == (speed.switched_off() is None), argv[:3]
    # the files: 0600 in a 0700 directory
    assert stat.S_IMODE(os.stat(dirs["client"]).st_mode) == 0o700
    for p in phd.paths(dirs["client"], cif):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p
    # same parameters again: left alone
    again = run_module(MODULE, {"gateways": [specs["client"]], "state_dir": dirs["client"]}, netns=pair["client_ns"])
    assert again["rc"] == 0 and not again["changed"] and again["health"][cif]["pid"] == st["pid"], again

    # byte counters rise with traffic through the tunnel
    text = phd.query(dirs["client"], cif, "metrics")
    assert metric(text, "liqo_peer_is_connected") == 1
    rx0, tx0 = metric(text, "liqo_peer_receive_bytes_total"), metric(text, "liqo_peer_transmit_bytes_total")
    traffic = ["ping", "-c", "20", "-i", "0.01", "-s", "1000", "-q", specs["client"]["address"]]
    assert netns.exec_in(pair["client_ns"], traffic, check=False).returncode == 0
    text = phd.query(dirs["client"], cif, "metrics")
    rx1, tx1 = metric(text, "liqo_peer_receive_bytes_total"), metric(text, "liqo_peer_transmit_bytes_total")
    assert rx1 >= rx0 + 20_000 and tx1 >= tx0 + 20_000, (rx0, rx1, tx0, tx1)

    # the remote gateway dies: its wireguard-go killed
    pid = wireguard_go_pid(pair["server_ns"], sif)
    assert pid, "no wireguard-go of the server"
    os.kill(pid, 9)
    st = poll(status, lambda s: isinstance(s, dict) and s["value"] == "Error", 10)[1]
    assert st["reason"] == "PeerUnreachable" and st["latency_us"] is None, st
    assert metric(phd.query(dirs["client"], cif, "metrics"), "liqo_peer_is_connected") == 0

    # the client's probe restarted its WireGuard session when the peer went silent (the re-added peer's byte
    # counters start from 0; the exported totals do not go back)
    st = status()
    assert st["sessions_restarted"] == 1 and st["session_error"] is None, st
    text = phd.query(dirs["client"], cif, "metrics")
    assert metric(text, "liqo_peer_receive_bytes_total") >= rx1, (text, rx1)
    assert metric(text, "liqo_peer_transmit_bytes_total") >= tx1, (text, tx1)

    # and comes back: the gateway's dataplane rebuilt (the playbook's repair); the server's probe process rebinds.
    # The new wireguard-go has no session and no endpoint of the client; the client's session was restarted, so
    # its next handshake attempt (WireGuard retries every 5 s while packets wait) reaches the new server, instead
    # of the stale session lasting until WireGuard's own 15 s timer
    assert build(pair, "server")["rc"] == 0
    st = poll(status, lambda s: isinstance(s, dict) and s["value"] == "Connected", 10)[1]

    # the server's tunnel down and up (wireguard-go keeps the client's endpoint and starts the handshake)
    netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "down"])
    st = poll(status, lambda s: isinstance(s, dict) and s["value"] == "Error", 10)[1]
    netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "up"])
    st = poll(status, lambda s: isinstance(s, dict) and s["value"] == "Connected", 10)[1]

    # stop: nothing left
    for side in ("server", "client"):
        gone = run_module(MODULE, {"gateways": [{"interface": specs[side]["interface"]}], "state": "absent",
                                   "state_dir": dirs[side]}, netns=pair[side + "_ns"])
        assert gone["rc"] == 0 and gone["changed"], gone
        assert not os.path.exists(dirs[side])
        assert phd.read_pidfile(dirs[side], specs[side]["interface"]) is None
    assert not any(phd.paths(dirs["client"], cif)[0] in p for p in os.listdir(str(tmp_path)))
    assert st["pid"] not in netns.pids_in_netns(pair["client_ns"])
    assert process_reaped(st["pid"]), st["pid"]


def test_a_held_probe_keeps_the_session_until_released(pair, tmp_dir):  # noqa: F811
    """What a key rotation relies on (liqo.fabric.peer_health_hold): while held, a probe whose peer went silent
    does not re-add the peer (which would drop the packets waiting for a handshake); released while the peer is
    still silent, it restarts the session then; stopping the probe removes a hold."""
    assert build(pair, "server")["rc"] == 0
    assert build(pair, "client", probe_wait=10)["rc"] == 0
    state_dir, server_dir = str(tmp_dir / "health-c"), str(tmp_dir / "health-s")
    cspec, sspec = spec(pair["client"], "cluster-b"), spec(pair["server"], "cluster-a")
    cif, sif = cspec["interface"], sspec["interface"]
    # the server's probe answers the client's pings
    assert run_module(MODULE, {"gateways": [sspec], "state_dir": server_dir}, netns=pair["server_ns"])["rc"] == 0
    assert run_module(MODULE, {"gateways": [cspec], "state_dir": state_dir}, netns=pair["client_ns"])["rc"] == 0

    def status():
        return phd.query(state_dir, cif)

    poll(status, lambda s: isinstance(s, dict) and s["value"] == "Connected", 10)
    # a probe that does not run here is not held (no file: a standby gateway host keeps nothing)
    held = run_module(HOLD, {"interfaces": [cif, "lwgnothere"], "seconds": 60, "state_dir": state_dir},
                      netns=pair["client_ns"])
    assert held["rc"] == 0 and held["changed"] and held["held"] == [cif] and held["not_running"] == ["lwgnothere"]
    assert held["until"] > time.time() + 50, held
    assert stat.S_IMODE(os.stat(hold.hold_path(state_dir, cif)).st_mode) == 0o600
    assert not os.path.exists(hold.hold_path(state_dir, "lwgnothere"))

    netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "down"])
    poll(status, lambda s: isinstance(s, dict) and s["value"] == "Error", 10)
    time.sleep(1.5)  # three more probe intervals in Error
    st = status()
    assert st["restarts_held"] == 1 and st["sessions_restarted"] == 0, st

    # check mode reports the release and keeps the hold
    dry = run_module(HOLD, {"interfaces": [cif], "seconds": 0, "state_dir": state_dir}, netns=pair["client_ns"],
                     check=True)
    assert dry["changed"] and dry["released"] == [cif] and os.path.exists(hold.hold_path(state_dir, cif)), dry
    released = run_module(HOLD, {"interfaces": [cif], "seconds": 0, "state_dir": state_dir}, netns=pair["client_ns"])
    assert released["changed"] and released["released"] == [cif], released
    assert not os.path.exists(hold.hold_path(state_dir, cif))
    poll(status, lambda s: isinstance(s, dict) and s["sessions_restarted"] == 1, 5)
    again = run_module(HOLD, {"interfaces": [cif], "seconds": 0, "state_dir": state_dir}, netns=pair["client_ns"])
    assert again["rc"] == 0 and not again["changed"], again

    netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "up"])
    poll(status, lambda s: isinstance(s, dict) and s["value"] == "Connected", 15)

    # bad input: named, nothing written
    for args, words in (({"seconds": 3601}, "seconds: 3601"), ({"seconds": -1}, "seconds: -1"),
                        ({"interfaces": ["bad/name"], "seconds": 5}, "interfaces[0]")):
        bad = run_module(HOLD, dict({"interfaces": [cif], "state_dir": state_dir}, **args), netns=pair["client_ns"])
        assert bad["rc"] != 0 and words in bad["msg"], bad
    assert not os.path.exists(hold.hold_path(state_dir, cif))

    # a hold the rotation did not release goes with the probe
    assert run_module(HOLD, {"interfaces": [cif], "seconds": 60, "state_dir": state_dir},
                      netns=pair["client_ns"])["held"] == [cif]
    gone = run_module(MODULE, {"gateways": [{"interface": cif}], "state": "absent", "state_dir": state_dir},
                      netns=pair["client_ns"])
    assert gone["rc"] == 0 and gone["changed"], gone
    assert not os.path.exists(state_dir)
    assert run_module(MODULE, {"gateways": [{"interface": sif}], "state": "absent", "state_dir": server_dir},
                      netns=pair["server_ns"])["rc"] == 0
    assert not os.path.exists(server_dir)
