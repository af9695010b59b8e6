"""Gateway benchmarks on two fresh lab clusters that both use 10.243.0.0/16 (one node, one pod each):

1. `connect` with wait=true, from installed API to both Connections Connected (target < 15 s), and
   `disconnect` (confirm=yes), as ansible-playbook wall time.
2. Gateway-to-gateway TCP throughput through the fabric's tunnel (iperf3 between the gateway nodes over the
   tunnel's transit addresses) against a tunnel built by hand in the same run between the same gateway node
   namespaces over the same WAN, with `wireguard-go`, `wg set` and `ip`, MTU 1340: ratio target >= 0.95.
   Runs alternate (fabric, hand, pod path, ...) so all see the same machine load; medians of 3 x 5 s.
   A third series, pod to pod (iperf3 server in B's pod, client in A's pod, target = B's pod at A's remapped
   address: pod veth, 1:1 NAT, WireGuard, WAN), tells the cost of the pod path and the NAT on top.
3. Ping RTT through both tunnels.

Everything started here is stopped by PID; the hand-built interfaces carry the lab prefix, so the lab's
own teardown would remove them too if the benchmark died half-way.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import time

from tests.benchmarks.report import figure, ratio
from tests.e2e import fabric
from tests.e2e.fabric import get, translate
from tests.lab import Lab, netns

RUNS = 3
SECONDS = 5
MTU = 1340
HAND_PORT = 51899
HAND_NET = "10.199.{}.{}"
IPERF_PORT = 5299
WG_RUN = "/var/run/wireguard"


def connect_args(lab) -> dict:
    return {"kubeconfig": lab["a"].kubeconfig, "remote_kubeconfig": lab["b"].kubeconfig,
            "gateway_group": "cluster_a_gateway", "remote_gateway_group": "cluster_b_gateway"}


def timed_playbook(lab, name: str, **extra) -> float:
    t0 = time.monotonic()
    fabric.playbook(name, lab.inventory_path, **connect_args(lab), **extra)
    return time.monotonic() - t0


def transit_address(node_ns: str) -> str:
    """The fabric's tunnel address on a gateway node (the lwg* interface the gateway role made)."""
    for line in netns.exec_in(node_ns, ["ip", "-4", "-o", "addr", "show"]).stdout.splitlines():
        fields = line.split()
        if fields[1].startswith("lwg"):
            return fields[3].split("/")[0]
    raise RuntimeError(f"no fabric tunnel interface in {node_ns}")


def connection_values(lab) -> list[str]:
    return [c["status"]["value"] for cl in (lab["a"], lab["b"]) for c in get(cl, "connections")]


def iperf(client_ns: str, address: str, port: int) -> float:
    """Receiver-side throughput in Mbit/s of one SECONDS-long TCP run."""
    proc = netns.exec_in(client_ns, ["iperf3", "-c", address, "-p", str(port), "-t", str(SECONDS), "-J"],
                         check=False, timeout=SECONDS + 30)
    data = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or "error" in data:
        raise RuntimeError(f"iperf3 {client_ns} -> {address}:{port}: {data.get('error') or proc.stderr}")
    return data["end"]["sum_received"]["bits_per_second"] / 1e6


def ping_rtt(client_ns: str, address: str, count: int = 20) -> float:
    """Average RTT in ms of `count` full-MTU-payload-free pings (64 bytes)."""
    proc = netns.exec_in(client_ns, ["ping", "-n", "-q", "-c", str(count), "-i", "0.05", "-W", "1", address],
                         check=False, timeout=30)
    m = re.search(r"= [\d.]+/([\d.]+)/", proc.stdout)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"ping {client_ns} -> {address}: {proc.stdout} {proc.stderr}")
    return float(m.group(1))


class IperfServer:
    """An iperf3 server in a netns, stopped by its PID."""

    def __init__(self, ns: str, port: int):
        self.proc = netns.popen_in(ns, ["iperf3", "-s", "-p", str(port)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        self.ns, self.port = ns, port
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:   # listening?
            if netns.exec_in(ns, ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout.strip():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"iperf3 server in {ns} did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


class HandTunnel:
    """A WireGuard tunnel built by hand between two namespaces: one `wireguard-go -f` per side (our PIDs),
    keys with `wg genkey`/`wg pubkey`, peers with `wg set`, addresses, MTU and link state with `ip`."""

    def __init__(self, prefix: str, sides: list[tuple[str, str]], net: int = 0):
        """sides: [(netns, underlay address the other side reaches it at)] x 2."""
        self.ifnames = [f"{prefix}h{i}" for i in range(2)]
        self.sides = sides
        self.addresses = [HAND_NET.format(net, i + 1) for i in range(2)]
        self.procs: list[subprocess.Popen] = []
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LOG_LEVEL": "error"}
        try:
            keys = []
            for dummy in range(2):
                priv = subprocess.run(["wg", "genkey"], capture_output=True, text=True, check=True).stdout.strip()
                pub = subprocess.run(["wg", "pubkey"], input=priv, capture_output=True, text=True,
                                     check=True).stdout.strip()
                keys.append((priv, pub))
            for (ns, _addr), ifname in zip(sides, self.ifnames):
                self.procs.append(netns.popen_in(ns, ["wireguard-go", "-f", ifname], stdin=subprocess.DEVNULL,
                                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                                 start_new_session=True))
            for ifname in self.ifnames:
                self._wait_socket(ifname)
            for i, ((ns, _addr), ifname) in enumerate(zip(sides, self.ifnames)):
                other = 1 - i
                # the private key travels on stdin only, never in argv or a file
                netns.run(["ip", "netns", "exec", ns, "wg", "set", ifname, "listen-port", str(HAND_PORT),
                           "private-key", "/dev/stdin", "peer", keys[other][1],
                           "endpoint", f"{sides[other][1]}:{HAND_PORT}",
                           "allowed-ips", f"{self.addresses[other]}/32", "persistent-keepalive", "25"],
                          input=keys[i][0] + "\n")
                netns.ip_batch([f"link set {ifname} mtu {MTU}", f"addr add {self.addresses[i]}/30 dev {ifname}",
                                f"link set {ifname} up"], netns=ns)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _wait_socket(ifname: str) -> None:
        path = os.path.join(WG_RUN, ifname + ".sock")
        deadline = time.monotonic() + 10
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"wireguard-go {ifname}: no UAPI socket")
            time.sleep(0.02)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        for (ns, _addr), ifname in zip(self.sides, self.ifnames):
            netns.run(["ip", "-n", ns, "link", "del", ifname], check=False)
            path = os.path.join(WG_RUN, ifname + ".sock")
            if os.path.exists(path):
                os.unlink(path)


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    for tool in ("kubectl", "iperf3", "wireguard-go", "wg"):
        if not shutil.which(tool):
            print(f"  skipped: {tool} is not installed")
            return
    t0 = time.monotonic()
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=1, pods_per_node=1) as lab:
        a, b = lab["a"], lab["b"]
        fabric.install(a)
        fabric.install(b)
        print(f"  (lab up and API installed on both clusters in {time.monotonic() - t0:.1f} s)")

        t_connect = timed_playbook(lab, "connect", wait=True, wait_timeout=20)
        values = connection_values(lab)
        if values != ["Connected", "Connected"]:
            raise RuntimeError(f"after connect the Connections are {values}")
        figure("connect wait=true: nothing -> both Connected", t_connect, "s", target=15)
        t_disconnect = timed_playbook(lab, "disconnect", confirm="yes")
        if connection_values(lab):
            raise RuntimeError("disconnect left Connections behind")
        figure("disconnect confirm=yes", t_disconnect, "s")
        t_connect2 = timed_playbook(lab, "connect", wait=True, wait_timeout=20)
        figure("connect wait=true again (Configurations kept)", t_connect2, "s")

        gw_a, gw_b = a.gateway_nodes[0], b.gateway_nodes[0]
        pod_a, pod_b = gw_a.pods[0], gw_b.pods[0]
        fabric_target = translate(pod_b.ip, b.pod_cidr, get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0])
        tunnel = servers = None
        try:
            tunnel = HandTunnel(lab.prefix, [(gw_a.netns, gw_a.wan_ip.split("/")[0]),
                                             (gw_b.netns, gw_b.wan_ip.split("/")[0])])
            servers = [IperfServer(pod_b.netns, IPERF_PORT), IperfServer(gw_b.netns, IPERF_PORT + 1)]
            hand_target = tunnel.addresses[1]
            # both paths answer before the clock starts (the hand tunnel's first handshake included)
            fabric.wait_for(lambda: a.ping(pod_a.netns, fabric_target), 10, what="fabric tunnel")
            fabric.wait_for(lambda: a.ping(gw_a.netns, hand_target), 10, what="hand-built tunnel")
            if not a.ping(pod_a.netns, fabric_target, size=MTU - 28) or not a.ping(gw_a.netns, hand_target,
                                                                                   size=MTU - 28):
                raise RuntimeError("a full-MTU ping does not pass one of the tunnels")
            transit_b = transit_address(gw_b.netns)
            ours, hand, bare = [], [], []
            for dummy in range(RUNS):
                ours.append(iperf(pod_a.netns, fabric_target, IPERF_PORT))
                hand.append(iperf(gw_a.netns, hand_target, IPERF_PORT + 1))
                bare.append(iperf(gw_a.netns, transit_b, IPERF_PORT + 1))
            rtt_ours = ping_rtt(pod_a.netns, fabric_target)
            rtt_hand = ping_rtt(gw_a.netns, hand_target)
            rtt_bare = ping_rtt(gw_a.netns, transit_b)
        finally:
            for server in servers or []:
                server.stop()
            if tunnel:
                tunnel.close()
        print("  runs (Mbit/s): fabric " + ", ".join(f"{v:.0f}" for v in ours)
              + "; by hand " + ", ".join(f"{v:.0f}" for v in hand)
              + "; fabric tunnel node-node " + ", ".join(f"{v:.0f}" for v in bare))
        m_ours, m_hand, m_bare = statistics.median(ours), statistics.median(hand), statistics.median(bare)
        # the headline figure: gateway to gateway through the fabric's tunnel against the hand-built one
        figure(f"baseline: tunnel by hand (wireguard-go, wg, ip; MTU {MTU}), node A -> node B", m_hand, "Mbit/s")
        figure("fabric tunnel, gateway node A -> gateway node B (transit address)", m_bare, "Mbit/s")
        ratio("gateway to gateway: fabric / by hand throughput", m_bare, m_hand, target=0.95, higher_is_better=True)
        # runs alternate, so each pair saw the same load: the median of the pairs' ratios is the steadier figure
        figure("  median of per-pair ratios", statistics.median(b / h for b, h in zip(bare, hand)), "x")
        # and the whole pod path (pod veth, 1:1 NAT, marks) on top of the tunnel
        figure(f"TCP through the fabric, pod A -> pod B remapped, median of {RUNS} x {SECONDS} s",
               m_ours, "Mbit/s")
        ratio("pod path through the fabric / hand-built tunnel node to node", m_ours, m_hand)
        figure("  median of per-pair ratios", statistics.median(o / h for o, h in zip(ours, hand)), "x")
        figure("ping RTT through the fabric (pod -> remapped pod)", rtt_ours, "ms")
        figure("ping RTT through the hand-built tunnel (node -> node)", rtt_hand, "ms")
        ratio("fabric / by hand RTT", rtt_ours, rtt_hand)
        figure("ping RTT through the fabric's tunnel alone (node -> node)", rtt_bare, "ms")
    left = [n for n in netns.list_netns() if n.startswith(lab.prefix)]
    left += [e for e in (os.listdir(WG_RUN) if os.path.isdir(WG_RUN) else []) if e.startswith(lab.prefix)]
    if left:
        raise RuntimeError(f"lab {lab.lab_id} left residue: {left}")


if __name__ == "__main__":
    run()
