"""Live peer health on the agentless path, as tests/e2e/test_peer_health.py runs it: two lab clusters
connected by `connect`, one probe process per gateway on the gateway host, the hosts reaching their cluster's API
as real ones do (api_forward). ROUNDS times (LIQO_FABRIC_HEALTH_ROUNDS, default 3) the remote gateway's tunnel
link goes down and comes back up; medians of: link down -> the local Connection Error and liqo_peer_is_connected 0
(target <= 10 s), link up -> Connected and is_connected 1 (target <= 10 s). Also the probe's byte counters across
20 pings of 1,000 bytes through the tunnel.

Without a lab, before it:
- the gateway pod's probe thread (controller/peer_health.GatewayHealth, 0.2 s interval, threshold 3) against a
  loopback responder, as tests/integration/test_gateway_pod_health.py runs it: responder muted -> Error, answering
  again -> Connected, medians of ROUNDS;
- the probe module on two gateway hosts in netns joined by a veth, with the fabric's tunnel (gateway_dataplane;
  0.5 s interval, threshold 3), as tests/integration/test_peer_health.py runs it: the client's probe module run
  started -> Connected and its latency, the probe process's open descriptors, the server's wireguard-go killed ->
  Error, its tunnel rebuilt -> Connected, its link down -> Error and up -> Connected, a held probe's hold file
  removed while the peer is silent -> its session restarted."""
import concurrent.futures
import contextlib
import os
import secrets
import shutil
import signal
import statistics
import tempfile
import time
from unittest import mock

from tests.ansible_run import run_module
from tests.benchmarks.bench_wireguard import veth_pair
from tests.benchmarks.report import figure
from tests.e2e import fabric
from tests.e2e.api_forward import ApiIntoNetns
from tests.e2e.fabric import playbook
from tests.lab import netns

# importable once tests.conftest (through tests.e2e.fabric) has put build/collections on sys.path
from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import generate_keypair  # noqa: E402  pylint: disable=wrong-import-position
from tests.e2e.test_peer_health import (  # noqa: E402  pylint: disable=wrong-import-position
    GROUPS, connection, gateway_host, interface_of, metric, poll)
from tests.integration import test_peer_health as netns_health  # noqa: E402  pylint: disable=wrong-import-position
from tests.integration.test_gateway_dataplane import MODULE as DATAPLANE, build, entry  # noqa: E402  pylint: disable=wrong-import-position

ROUNDS = int(os.environ.get("LIQO_FABRIC_HEALTH_ROUNDS", "3"))
DEADLINE = 30   # a wait's limit here, above the 10 s target: a miss is measured, not cut off


def is_connected(state_dir: str, iface: str) -> float:
    return metric(phd.query(state_dir, iface, "metrics"), "liqo_peer_is_connected")[1]


def gateway_pod_thread() -> None:
    from controller import peer_health  # pylint: disable=import-outside-toplevel
    from tests.integration.test_gateway_pod_health import GATEWAY, Api, Responder, wait  # pylint: disable=import-outside-toplevel
    target = peer_health.target_of(GATEWAY, "cluster-a")
    port = 23467   # not the test's: a test run at the same time keeps its responder
    down, up = [], []
    api, responder = Api(), Responder(port)
    responder.start()
    # its target is lo, which has no WireGuard session to restart when the peer goes silent: that warning muted
    with mock.patch.object(peer_health, "target_of", lambda gw, cid: dict(target, interface="lo", address="127.0.0.2")), \
            mock.patch.object(peer_health.log, "disabled", True):
        h = peer_health.GatewayHealth(api, lambda: GATEWAY, lambda: "cluster-a", port=port, interval=0.2, threshold=3)
        h.start()
        try:
            wait(lambda: api.status.get("value") == "Connected")
            for _round in range(ROUNDS):
                responder.mute.set()
                down.append(wait(lambda: api.status.get("value") == "Error"))
                responder.mute.clear()
                up.append(wait(lambda: api.status.get("value") == "Connected"))
        finally:
            h.stop()
            responder.halt.set()
    figure(f"gateway pod thread: peer muted -> Error, median of {ROUNDS}", statistics.median(down), "s")
    figure(f"gateway pod thread: peer back -> Connected, median of {ROUNDS}", statistics.median(up), "s")


@contextlib.contextmanager
def gateway_hosts():
    """The integration tests' gateway pair: a server and a client gateway host with the fabric's tunnel."""
    with veth_pair() as (a, b):
        tag = secrets.token_hex(2)
        (priv_s, pub_s), (priv_c, pub_c) = generate_keypair(), generate_keypair()
        ctx = {"client_ns": a, "server_ns": b, "server": entry(tag, "Server", pub_c, None, 24001),
               "client": entry(tag, "Client", pub_s, "192.168.77.2:51820", 24002)}
        ctx["keys"] = {ctx["server"]["interface"]: priv_s, ctx["client"]["interface"]: priv_c}
        try:
            yield ctx
        finally:
            for side in ("client", "server"):
                run_module(DATAPLANE, {"gateways": [ctx[side]], "state": "absent"}, netns=ctx[side + "_ns"])


def probe_on_gateway_hosts() -> None:
    def module(name, args, side, check=None):
        res = run_module(name, args, netns=pair[side + "_ns"])
        if res["rc"] != 0 or (check and not check(res)):
            raise RuntimeError(f"{name} on the {side}: {res.get('msg') or res}")
        return res

    def wait_state(want):
        return netns_health.poll(lambda: netns_health.phd.query(dirs["client"], cif),
                                 lambda s: isinstance(s, dict) and want(s), DEADLINE)

    with gateway_hosts() as pair, tempfile.TemporaryDirectory(prefix="lfab-bhealth-") as tmp:
        for side, extra in (("server", {}), ("client", {"probe_wait": 10})):
            if build(pair, side, **extra)["rc"] != 0:
                raise RuntimeError(f"gateway_dataplane on the {side} failed")
        dirs = {"server": os.path.join(tmp, "s"), "client": os.path.join(tmp, "c")}
        specs = {"server": netns_health.spec(pair["server"], "cluster-a"),
                 "client": netns_health.spec(pair["client"], "cluster-b")}
        cif, sif = specs["client"]["interface"], specs["server"]["interface"]
        try:
            module(netns_health.MODULE, {"gateways": [specs["server"]], "state_dir": dirs["server"]}, "server")
            t0 = time.monotonic()
            module(netns_health.MODULE, {"gateways": [specs["client"]], "state_dir": dirs["client"]}, "client")
            st = wait_state(lambda s: s["value"] == "Connected")[1]
            started = time.monotonic() - t0
            latency = st["latency_us"]
            with open(f"/proc/{st['pid']}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            fresh = b"-c" in argv and any(b"module_utils.health import daemon" in a for a in argv)
            fds = len(os.listdir(f"/proc/{st['pid']}/fd"))

            pid = netns_health.wireguard_go_pid(pair["server_ns"], sif)
            if not pid:
                raise RuntimeError("no wireguard-go of the server")
            os.kill(pid, signal.SIGKILL)
            killed = wait_state(lambda s: s["value"] == "Error")[0]
            if build(pair, "server")["rc"] != 0:
                raise RuntimeError("gateway_dataplane on the server failed (rebuild)")
            rebuilt = wait_state(lambda s: s["value"] == "Connected")[0]
            netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "down"])
            link_down = wait_state(lambda s: s["value"] == "Error")[0]
            netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "up"])
            link_up = wait_state(lambda s: s["value"] == "Connected")[0]

            module(netns_health.HOLD, {"interfaces": [cif], "seconds": 60, "state_dir": dirs["client"]}, "client",
                   lambda r: r["held"] == [cif])
            restarts = netns_health.phd.query(dirs["client"], cif)["sessions_restarted"]
            netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "down"])
            wait_state(lambda s: s["value"] == "Error")
            # from the hold file's removal, not from the module's return: the probe may restart before the run ends
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                release = pool.submit(module, netns_health.HOLD, {"interfaces": [cif], "seconds": 0,
                                                                  "state_dir": dirs["client"]}, "client",
                                      lambda r: r["released"] == [cif])
                netns_health.poll(lambda: os.path.exists(netns_health.hold.hold_path(dirs["client"], cif)),
                                  lambda held: not held, DEADLINE)
                released = wait_state(lambda s: s["sessions_restarted"] == restarts + 1)[0]
                release.result()
            netns.exec_in(pair["server_ns"], ["ip", "link", "set", "dev", sif, "up"])
        finally:
            for side in ("server", "client"):
                run_module(netns_health.MODULE, {"gateways": [{"interface": specs[side]["interface"]}],
                                                 "state": "absent", "state_dir": dirs[side]}, netns=pair[side + "_ns"])
    figure("probe module run started -> Connected (Ansible incl.)", started, "s")
    figure("  its latency at Connected", latency, "us")
    figure(f"  probe process's open descriptors ({'a fresh interpreter' if fresh else 'a fork'})", fds, "count")
    figure("server's wireguard-go killed -> Error", killed, "s")
    figure("server's tunnel rebuilt (gateway_dataplane) -> Connected", rebuilt, "s")
    figure("server's tunnel link down -> Error", link_down, "s")
    figure("server's tunnel link up -> Connected", link_up, "s")
    figure("hold file removed (release) -> session restarted", released, "s")


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root")
        return
    gateway_pod_thread()
    if shutil.which("wireguard-go"):
        probe_on_gateway_hosts()
    else:
        print("  gateway hosts in netns skipped: wireguard-go is not installed")
    if not shutil.which("kubectl"):
        print("  lab skipped: kubectl is not installed")
        return
    down, up = [], []
    with fabric.lab_pair() as lab, contextlib.ExitStack() as stack:
        a, b = lab["a"], lab["b"]
        for c in (a, b):
            stack.enter_context(ApiIntoNetns(c.gateway_nodes[0].netns, c.kubeconfig))
        playbook("connect", lab.inventory_path, **fabric.sides(lab), wait=True, wait_timeout=60, **GROUPS)
        ns_a, dir_a = gateway_host(a)
        ns_b, dir_b = gateway_host(b)
        if_a, if_b = interface_of(dir_a), interface_of(dir_b)
        poll(lambda: phd.query(dir_a, if_a)["value"] == "Connected", DEADLINE)
        rx0 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_receive_bytes_total")[1]
        tx0 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_transmit_bytes_total")[1]
        netns.exec_in(ns_a, ["ping", "-c", "20", "-i", "0.01", "-s", "1000", "-q", "-I", if_a,
                             phd.query(dir_a, if_a)["address"]], check=False)
        rx1 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_receive_bytes_total")[1]
        tx1 = metric(phd.query(dir_a, if_a, "metrics"), "liqo_peer_transmit_bytes_total")[1]
        print(f"  byte counters across 20 pings of 1,000 bytes: rx {rx0:.0f} -> {rx1:.0f}, tx {tx0:.0f} -> {tx1:.0f}")
        for r in range(ROUNDS):
            netns.exec_in(ns_b, ["ip", "link", "set", "dev", if_b, "down"])
            down.append(poll(lambda: connection(a)["status"]["value"] == "Error"
                             and is_connected(dir_a, if_a) == 0, DEADLINE))
            netns.exec_in(ns_b, ["ip", "link", "set", "dev", if_b, "up"])
            up.append(poll(lambda: connection(a)["status"]["value"] == "Connected"
                           and is_connected(dir_a, if_a) == 1, DEADLINE))
            print(f"  round {r + 1}: Error and is_connected 0 {down[-1]:.2f} s after the remote tunnel went down; "
                  f"Connected {up[-1]:.2f} s after it came back", flush=True)
        playbook("disconnect", lab.inventory_path, **fabric.sides(lab), confirm="yes", **GROUPS)
    figure(f"remote tunnel down -> Connection Error, is_connected 0, median of {ROUNDS}", statistics.median(down), "s",
           target=10)
    figure(f"remote tunnel up -> Connection Connected, median of {ROUNDS}", statistics.median(up), "s", target=10)
