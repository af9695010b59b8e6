"""Node overlay benchmarks, measured in one run on one lab: clusters A and B, both 10.243.0.0/16, three nodes
and one pod per node each; A has two gateway hosts (a-node-1 active, a-node-2 standby), so a-node-3 is A's
only node that never hosts the gateway. `connect` builds the gateways and the overlay on every node.

1. TCP throughput pod -> pod across the clusters through the overlay (client pod on a-node-3, server pod on
   b-node-2, target = B's pod at A's remapped address: pod veth, VXLAN/Geneve to A's gateway, WireGuard,
   NAT, overlay to b-node-2) against the raw tunnel between the two gateway hosts (iperf3 bound to the
   tunnel's transit addresses 169.254.18.x), alternating runs, medians of 7 x 5 s: ratio target >= 0.95,
   tunnel >= 1.5 Gbit/s, pod path >= 1.4 Gbit/s. Each round prints its ratio. Also printed: the CPU each path costs per byte (both paths keep
   this machine's two CPUs busy, so that ratio is what the throughput ratio follows), tunnel packets B's
   gateway dropped because its UDP receive buffer was full, and when a throughput target is missed, a perf
   profile (cpu-clock, all CPUs) of one run of each path. Then both paths at one rate the CPUs can carry
   (0.6 of the slower median): what each delivers there, and how busy it keeps the CPUs.
2. RTT pod -> pod minus RTT gateway -> gateway over the transit addresses, medians of 50 pings at 20 ms
   taken in alternating rounds of 5: target < 0.15 ms.
3. Symmetric routes for 10,000 pods without 10,000 real pods: overlay_plan.plan() on 10,000 synthetic
   Running pods over three nodes, then sync_route_table() of the active gateway's table 18952 in a
   throwaway netns holding veth links named like the plan's `lovn*` links: reconcile (target < 2 s), rerun
   with no change (target < 1 s and zero kernel writes). Plus the wall time of the real
   `reconcile_overlay.yml` on the lab's cluster A for comparison.
4. Failover: a ping every 50 ms from A's pod on a-node-3 to B's pod while one `reconcile_gateway.yml` run moves the
   gateway to a-node-2 and re-points every node to it; the outage is the longest gap
   between two replies (target < 3 s), and traffic must resume.

Every process started here is stopped by its PID; the throwaway netns carries the lab prefix.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from tests.benchmarks.report import MEASURED, figure, ratio
from tests.e2e import fabric
from tests.e2e.fabric import get, translate
from tests.lab import Lab, netns

# importable once tests.conftest (through tests.e2e.fabric) has put build/collections on sys.path
from ansible_collections.liqo.fabric.plugins.module_utils.overlay import plan as overlay_plan  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.route.policy import sync_route_table  # noqa: E402

RUNS = 7   # rounds: one run varies by +-10 % on this shared 2-vCPU machine
FIXED_RATE_RUNS = 3
SECONDS = 5
PINGS = 50
IPERF_PORT = 5311
TRANSIT_SERVER, TRANSIT_CLIENT = "169.254.18.1", "169.254.18.2"  # GatewayServer (B) / GatewayClient (A)
SYNTH_PODS = 10_000
SYNTH_NODES = 3
TABLE = 18952


# --- measuring helpers ---------------------------------------------------------------------------------

def iperf(client_ns: str, address: str, port: int, bind: str | None = None, rate: int | None = None) -> float:
    """Receiver-side throughput in Mbit/s of one SECONDS-long TCP run (at most `rate` Mbit/s when given)."""
    argv = ["iperf3", "-c", address, "-p", str(port), "-t", str(SECONDS), "-J"]
    if bind:
        argv += ["-B", bind]
    if rate:
        argv += ["-b", f"{rate}M"]
    proc = netns.exec_in(client_ns, argv, check=False, timeout=SECONDS + 30)
    try:
        data = json.loads(proc.stdout or "{}")
    except ValueError:
        data = {"error": proc.stdout[-500:]}
    if proc.returncode != 0 or "error" in data:
        raise RuntimeError(f"iperf3 {client_ns} -> {address}:{port}: {data.get('error') or proc.stderr}")
    return data["end"]["sum_received"]["bits_per_second"] / 1e6


def udp_rcvbuf_errors(ns: str) -> int:
    """The netns's UdpRcvbufErrors (/proc/net/snmp): datagrams dropped because a socket's receive buffer was full.
    On a receiving gateway these are tunnel packets lost before wireguard-go could read them."""
    lines = [line.split() for line in netns.exec_in(ns, ["cat", "/proc/net/snmp"]).stdout.splitlines()
             if line.startswith("Udp:")]
    return int(dict(zip(lines[0], lines[1]))["RcvbufErrors"])


def ping_rtts(client_ns: str, address: str, count: int) -> list:
    """Every reply's RTT in ms of `count` pings 20 ms apart."""
    proc = netns.exec_in(client_ns, ["ping", "-n", "-c", str(count), "-i", "0.02", "-W", "1", address],
                         check=False, timeout=60)
    return [float(m) for m in re.findall(r"time=([\d.]+) ms", proc.stdout)]


def ping_medians(paths: list) -> list:
    """Median RTT in ms of PINGS pings per (netns, address) path, taken in rounds of 5 that alternate between
    the paths, so that a change of this machine's load hits every path alike."""
    rtts = [[] for dummy in paths]
    for dummy in range(PINGS // 5):
        for i, (ns, address) in enumerate(paths):
            rtts[i] += ping_rtts(ns, address, 5)
    for (ns, address), got in zip(paths, rtts):
        if len(got) < PINGS * 0.9:
            raise RuntimeError(f"ping {ns} -> {address}: {len(got)}/{PINGS} replies")
    return [statistics.median(got) for got in rtts]


class Background:
    """A process in a netns, stopped by its PID (SIGINT first, so ping prints its summary)."""

    def __init__(self, ns: str, argv: list[str], **kw):
        self.proc = netns.popen_in(ns, argv, **kw)

    def stop(self, sig=signal.SIGINT) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


class IperfServer(Background):
    def __init__(self, ns: str, port: int, bind: str | None = None):
        argv = ["iperf3", "-s", "-p", str(port)] + (["-B", bind] if bind else [])
        super().__init__(ns, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if netns.exec_in(ns, ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout.strip():
                return
            time.sleep(0.05)
        self.stop(signal.SIGTERM)
        raise RuntimeError(f"iperf3 server in {ns} did not start")


def timed_playbook(lab, name: str, **extra) -> float:
    t0 = time.monotonic()
    fabric.playbook(name, lab.inventory_path, **extra)
    return time.monotonic() - t0


# --- 1 + 2: throughput and latency -----------------------------------------------------------------------

def cpu_ticks() -> tuple[int, int]:
    """(all, busy) jiffies of every CPU since boot, from /proc/stat's user, nice, system, idle, iowait, irq,
    softirq and steal (guest time is already in user): busy is this machine's own work, not idle, iowait or
    the time the hypervisor took (steal)."""
    with open("/proc/stat", encoding="ascii") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    busy = user + nice + system + irq + softirq
    return busy + idle + iowait + steal, busy


def costed(run) -> tuple[float, float, float]:
    """(Mbit/s, share of all CPUs busy, CPU ms per MB) of one iperf run."""
    all0, busy0 = cpu_ticks()
    mbit = run()
    all1, busy1 = cpu_ticks()
    busy = (busy1 - busy0) / max(all1 - all0, 1)
    cpu_seconds = (busy1 - busy0) / os.sysconf("SC_CLK_TCK")
    return mbit, busy, 1000 * cpu_seconds / (mbit * SECONDS / 8)


# Kernel symbols by the part of the path they belong to (the rest is "other kernel"; user space by process)
BUCKETS = (("VXLAN/UDP tunnel (overlay)", ("vxlan", "udp_tunnel", "iptunnel")),
           ("netfilter: NAT, conntrack, nft", ("nf_", "nft_", "ipt_", "nat_", "__nf_")),
           ("routing: FIB, policy rules", ("fib_", "ip_route", "ip_rt", "rt_", "__fib")),
           ("veth, bridge", ("veth", "br_", "__br")),
           ("copies to/from user space", ("_copy_", "copy_user", "copyin", "copyout", "rep_movs")),
           ("TUN device (wireguard-go I/O)", ("tun_",)),
           ("scheduler, wakeups, idle", ("finish_task_switch", "schedule", "pv_native_safe_halt", "try_to_wake",
                                         "_raw_spin_unlock_irqrestore", "irqentry_exit")))


def perf_shares(run) -> dict:
    """Where the CPUs go during one iperf run (`run()` does it and returns its Mbit/s): perf cpu-clock samples on
    all CPUs, shares per bucket."""
    with tempfile.TemporaryDirectory(prefix="lfab-perf-") as tmp:
        data = os.path.join(tmp, "perf.data")
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-a", "-o", data, "--", "sleep", str(SECONDS)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            mbit = run()
        finally:
            rec.wait(timeout=SECONDS + 60)
        rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "comm,dso,symbol",
                              "--percent-limit", "0.01"], capture_output=True, text=True, check=False, timeout=180)
    shares = {"throughput (Mbit/s)": mbit}
    for line in rep.stdout.splitlines():
        parts = line.split()
        if not parts or not parts[0].endswith("%") or line.lstrip().startswith("#"):
            continue
        pct, comm = float(parts[0].rstrip("%")), parts[1]
        kernel = "[k]" in parts
        symbol = parts[parts.index("[k]") + 1] if kernel else ""
        name = "user space: %s" % comm if not kernel else next(
            (b for b, prefixes in BUCKETS if any(symbol.startswith(x) or x in symbol for x in prefixes)), "other kernel")
        shares[name] = shares.get(name, 0.0) + pct
    return shares


def print_shares(pod: dict, gw: dict, heads=("pod path", "tunnel")) -> None:
    """Two perf_shares side by side, sorted by what the first spends more than the second."""
    print(f"    {'':46} {heads[0]:>10} {heads[1]:>10} {'difference':>11}")
    for name in sorted(set(pod) | set(gw), key=lambda k: (k != "throughput (Mbit/s)", -(pod.get(k, 0) - gw.get(k, 0)))):
        a, b = pod.get(name, 0.0), gw.get(name, 0.0)
        if name != "throughput (Mbit/s)" and max(a, b) < 0.5:
            continue
        print(f"    {name:46} {a:>10.1f} {b:>10.1f} {a - b:>+11.1f}")


def perf_compare(client_ns: str, target: str, gw_ns: str) -> None:
    """The pod path against the tunnel alone, one profiled run each: what the pod path spends that the tunnel
    does not, by part of the path (share of all CPU samples; 2 CPUs = 200 % would be both busy)."""
    if not shutil.which("perf"):
        print("  (no perf: profile skipped)")
        return
    pod = perf_shares(lambda: iperf(client_ns, target, IPERF_PORT))
    gw = perf_shares(lambda: iperf(gw_ns, TRANSIT_SERVER, IPERF_PORT + 1, bind=TRANSIT_CLIENT))
    print("  perf (cpu-clock, all CPUs): share of samples by part of the path, pod path vs the tunnel alone")
    print_shares(pod, gw)


def measure_path(lab, client_pod, server_pod, target, gw_a, gw_b) -> None:
    """Pod path and tunnel in alternating runs (the order flips every round): medians. Each round prints its
    throughputs, ratio and CPU use."""
    servers = []
    runs = {"pod": [], "gw": []}
    drops = [0, 0]
    try:
        servers = [IperfServer(server_pod.netns, IPERF_PORT), IperfServer(gw_b.netns, IPERF_PORT + 1, TRANSIT_SERVER)]
        fabric.wait_for(lambda: lab["a"].ping(client_pod.netns, target), 15, what="pod -> remote pod over the overlay")
        fabric.wait_for(lambda: lab["a"].ping(gw_a.netns, TRANSIT_SERVER), 5, what="gateway -> gateway transit")
        paths = {"pod": lambda rate=None: iperf(client_pod.netns, target, IPERF_PORT, rate=rate),
                 "gw": lambda rate=None: iperf(gw_a.netns, TRANSIT_SERVER, IPERF_PORT + 1, bind=TRANSIT_CLIENT, rate=rate)}
        for rnd in range(RUNS):
            for i, kind in enumerate(("pod", "gw") if rnd % 2 == 0 else ("gw", "pod")):
                before = udp_rcvbuf_errors(gw_b.netns)
                runs[kind].append(costed(paths[kind]))
                drops[kind == "gw"] += udp_rcvbuf_errors(gw_b.netns) - before
            pod, gw = runs["pod"][-1], runs["gw"][-1]
            print(f"  round {rnd + 1}: pod -> pod {pod[0]:.0f} Mbit/s, gateway -> gateway {gw[0]:.0f} Mbit/s, "
                  f"ratio {pod[0] / gw[0]:.3f}; CPUs busy {pod[1]:.0%} / {gw[1]:.0%}", flush=True)
        # both paths at one rate the CPUs can carry: the same throughput, and what each costs the CPUs
        rate = int(0.6 * min(statistics.median(r[0] for r in runs[k]) for k in ("pod", "gw")))
        capped = {"pod": [], "gw": []}
        for rnd in range(FIXED_RATE_RUNS):
            for kind in (("pod", "gw") if rnd % 2 == 0 else ("gw", "pod")):
                capped[kind].append(costed(lambda: paths[kind](rate=rate)))  # pylint: disable=cell-var-from-loop
        rtt_pod, rtt_gw = ping_medians([(client_pod.netns, target), (gw_a.netns, TRANSIT_SERVER)])
        m_pod, m_gw = (statistics.median(r[0] for r in runs[k]) for k in ("pod", "gw"))
        if m_pod / m_gw < 0.95 or m_pod < 1400 or m_gw < 1500:  # a target missed: where the time goes
            perf_compare(client_pod.netns, target, gw_a.netns)
    finally:
        for server in servers:
            server.stop(signal.SIGTERM)
    print(f"  tunnel packets dropped by a full UDP receive buffer on B's gateway: pod runs {drops[0]}, "
          f"gateway runs {drops[1]}")
    figure(f"TCP pod (a-node-3) -> pod (b-node-2) remapped, median {RUNS} x {SECONDS} s", m_pod, "Mbit/s",
           lower_is_better=False, target=1400)
    figure("baseline: TCP gateway -> gateway over the tunnel (transit addrs)", m_gw, "Mbit/s",
           lower_is_better=False, target=1500)
    ratio("pod-to-pod / gateway-to-gateway throughput", m_pod, m_gw, higher_is_better=True, target=0.95)
    cpu_pod, cpu_gw = (statistics.median(r[2] for r in runs[k]) for k in ("pod", "gw"))
    figure("CPU per MB, pod path (median)", cpu_pod, "ms")
    figure("baseline: CPU per MB, the tunnel alone (median)", cpu_gw, "ms")
    ratio("CPU per byte, tunnel / pod path (what the throughput ratio follows when both keep the CPUs busy)",
          cpu_gw, cpu_pod, higher_is_better=True)
    (got_pod, busy_pod), (got_gw, busy_gw) = ((statistics.median(r[0] for r in capped[k]),
                                               statistics.median(r[1] for r in capped[k])) for k in ("pod", "gw"))
    print(f"  at a fixed {rate} Mbit/s (0.6 of the slower path's median, {FIXED_RATE_RUNS} runs each): pod path "
          f"{got_pod:.0f} Mbit/s with the CPUs {busy_pod:.0%} busy, the tunnel {got_gw:.0f} Mbit/s with {busy_gw:.0%}")
    ratio("at that fixed rate: pod-to-pod / gateway-to-gateway throughput", got_pod, got_gw, higher_is_better=True)
    figure(f"RTT pod -> remote pod, median of {PINGS}", rtt_pod, "ms")
    figure(f"baseline: RTT gateway -> gateway over the tunnel, median of {PINGS}", rtt_gw, "ms")
    figure("RTT pod-to-pod minus gateway-to-gateway", rtt_pod - rtt_gw, "ms", target=0.15)
    # bench_in_cluster ran earlier in this `make bench`: its gateway pods and pods behind real kubelets, same machine
    in_cluster_tunnel = MEASURED.get("in-cluster tunnel (Mbit/s)")
    if in_cluster_tunnel:
        ratio("in-cluster tunnel / agentless tunnel (this run)", in_cluster_tunnel, m_gw, higher_is_better=True,
              target=0.90)
    in_cluster = MEASURED.get("in-cluster pod path (Mbit/s)")
    if in_cluster:
        ratio("in-cluster pod -> pod / agentless pod -> pod (this run)", in_cluster, m_pod, higher_is_better=True)


# --- 3: 10,000 pods -------------------------------------------------------------------------------------

def synthetic_cluster(pods: int, nodes: int):
    """Nodes with InternalIPs and /18 pod ranges, and `pods` Running pods spread round-robin over them."""
    node_objs = []
    for i in range(nodes):
        node_objs.append({"metadata": {"name": f"s-node-{i + 1}", "annotations": {}, "labels": {}},
                          "spec": {"podCIDR": f"10.243.{64 * i}.0/18"},
                          "status": {"addresses": [{"type": "InternalIP", "address": f"172.31.0.{i + 2}"}]}})
    pod_objs = []
    for k in range(pods):
        i = k % nodes
        ip = ipaddress.ip_address(f"10.243.{64 * i}.0") + 2 + k // nodes
        pod_objs.append({"metadata": {"name": f"p{k}", "namespace": "default"},
                         "spec": {"nodeName": f"s-node-{i + 1}"},
                         "status": {"phase": "Running", "podIP": str(ip), "hostIP": f"172.31.0.{i + 2}"}})
    return node_objs, pod_objs


def measure_10k(lab_prefix: str) -> None:
    nodes, pods = synthetic_cluster(SYNTH_PODS, SYNTH_NODES)
    args = dict(nodes=nodes, pods=pods, gateway_hosts=["s-node-1"], active_gateway="s-node-1",
                remote_cidrs=["10.71.0.0/16"], tunnel_interfaces=[f"{lab_prefix}wg0"], internal_cidr="10.80.0.0/16",
                local_pod_cidrs=["10.243.0.0/16"])
    t0 = time.monotonic()
    planned = overlay_plan.plan(**args).to_result()
    t_plan = time.monotonic() - t0
    gw = planned["hosts"]["s-node-1"]
    sym = [r for r in gw["routes"] if r["dst"].startswith("10.243.")]
    expected = SYNTH_PODS - len([p for p in pods if p["spec"]["nodeName"] == "s-node-1"])
    if len(sym) != expected:
        raise RuntimeError(f"plan: {len(sym)} symmetric routes on the gateway, expected {expected}")
    ns = f"{lab_prefix}-ovb"
    netns.run(["ip", "netns", "add", ns])
    try:
        # the kernel has no dummy module: one veth pair per planned link (both ends up, so it has carrier)
        links = [link["name"] for link in gw["links"]]
        netns.ip_batch([f"link add {name} type veth peer name {name}p" for name in links]
                       + [f"link set {name}{end} up" for name in links for end in ("", "p")] + ["link set lo up"],
                       netns=ns)
        t0 = time.monotonic()
        first = sync_route_table(gw["routes"], table=TABLE, netns=ns, want_lines=False)
        t_apply = time.monotonic() - t0
        t0 = time.monotonic()
        planned2 = overlay_plan.plan(**args).to_result()
        rerun = sync_route_table(planned2["hosts"]["s-node-1"]["routes"], table=TABLE, netns=ns,
                                 want_lines=False)
        t_rerun = time.monotonic() - t0
        count = int(netns.run(["sh", "-c", f"ip -n {ns} route show table {TABLE} | wc -l"]).stdout.strip())
    finally:
        netns.run(["ip", "netns", "del", ns], check=False)
    if count != len(gw["routes"]) or first["writes"] != len(gw["routes"]):
        raise RuntimeError(f"table {TABLE}: {count} routes in the kernel, {first['writes']} writes, "
                           f"{len(gw['routes'])} planned")
    print(f"  ({SYNTH_PODS} pods on {SYNTH_NODES} nodes: {len(sym)} symmetric /32 routes on the gateway, "
          f"{len(gw['routes'])} routes in table {TABLE}; plan {t_plan:.3f} s, netlink {t_apply:.3f} s)")
    figure(f"symmetric routes, {SYNTH_PODS} pods: plan + apply from empty", t_plan + t_apply, "s", target=2)
    figure(f"symmetric routes, {SYNTH_PODS} pods: plan + rerun, no change", t_rerun, "s", target=1)
    figure("  kernel writes of the rerun (target 0)", rerun["writes"], "writes")
    if rerun["changed"]:
        raise RuntimeError(f"the rerun reported a change: {rerun}")


# --- 4: failover -----------------------------------------------------------------------------------------

def ping_gaps(output: str, started: float, ended: float) -> tuple[float, float, int, float]:
    """(longest gap in s between replies, when it began, replies, seconds from the last reply to the end)
    of a `ping -D` output (wall-clock stamps)."""
    stamps = [float(s) for s in re.findall(r"^\[(\d+\.\d+)\] \d+ bytes from", output, re.M)]
    if not stamps:
        return ended - started, started, 0, ended - started
    gap, begin = max((b - a, a) for a, b in zip([started] + stamps, stamps + [ended]))
    return gap, begin, len(stamps), ended - stamps[-1]


def failover_once(lab, client_ns: str, target: str, active_host: str, **extra) -> dict:
    """One reconcile_gateway run that makes active_host cluster a's active gateway, under a 50 ms ping from
    client_ns to target (one flow: it must survive the move). extra: the run's other variables."""
    a = lab["a"]
    fabric.wait_for(lambda: a.ping(client_ns, target), 10, what="pod -> remote pod before the failover")
    log = tempfile.TemporaryFile(mode="w+")  # not a pipe: a full pipe would stall ping and the clock
    pinger = Background(client_ns, ["ping", "-n", "-D", "-O", "-i", "0.05", "-W", "1", target],
                        stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.0)
        started = time.time()
        # one run: overlay plan (API only), teardown on the old host, build on the new one, every node re-pointed,
        # status
        fabric.playbook("reconcile_gateway", lab.inventory_path, gateway_group="cluster_a_gateway",
                        nodes_group="cluster_a_nodes", gateway_active_host=active_host, **extra)
        t_both = time.time()
        deadline = time.monotonic() + 10  # let traffic resume (or prove it does not)
        resumed = False
        while time.monotonic() < deadline and not resumed:
            time.sleep(0.5)
            resumed = a.ping(client_ns, target)
        time.sleep(1.0)
    finally:
        pinger.stop()
    ended = time.time()
    log.seek(0)
    output = log.read()
    log.close()
    gap, begin, replies, tail = ping_gaps(output, started, ended)
    return {"run": t_both - started, "gap": gap, "resumed": resumed and tail < 2,
            "detail": f"{replies} replies; the longest gap began {begin - started:.1f} s after the run started "
                      f"and ended {t_both - begin - gap:.1f} s before it ended"}


def measure_failover(lab, client_pod, target) -> bool:
    got = failover_once(lab, client_pod.netns, target, "a-node-2", gateway_probe_wait=5)
    print(f"  (reconcile_gateway with the overlay took {got['run']:.1f} s; {got['detail']}; "
          f"traffic {'resumed' if got['resumed'] else 'did NOT resume'})")
    figure("failover a-node-1 -> a-node-2: longest gap between replies", got["gap"], "s", target=3)
    return got["resumed"]


def diagnose_failover(lab, client_pod, target) -> None:
    """Why traffic did not resume: the state of the new active gateway and of the client's node."""
    a = lab["a"]
    for node in (a.node("a-node-1"), a.node("a-node-2"), a.node("a-node-3")):
        for cmd in (["ip", "-br", "link"], ["ip", "rule"], ["ip", "route", "show", "table", str(TABLE)],
                    ["wg", "show"]):
            out = netns.exec_in(node.netns, cmd, check=False)
            print(f"  [{node.name}] {' '.join(cmd)}:\n    " + (out.stdout + out.stderr).strip().replace("\n", "\n    "))
    out = netns.exec_in(client_pod.netns, ["ping", "-n", "-c", "2", "-W", "1", target], check=False)
    print("  ping after failover: " + out.stdout.strip().replace("\n", " | "))


# --- run -------------------------------------------------------------------------------------------------

def run():
    if os.geteuid() != 0:
        print("  skipped: needs root for network namespaces")
        return
    for tool in ("kubectl", "iperf3", "wireguard-go", "wg"):
        if not shutil.which(tool):
            print(f"  skipped: {tool} is not installed")
            return
    t0 = time.monotonic()
    with Lab([{"name": "a", "gateways": 2}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3,
             pods_per_node=1) as lab:
        a, b = lab["a"], lab["b"]
        fabric.install(a)
        fabric.install(b)
        print(f"  (lab up and API installed on both clusters in {time.monotonic() - t0:.1f} s)")
        t_connect = timed_playbook(lab, "connect", kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
                                   gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
                                   nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes",
                                   wait=True, wait_timeout=20)
        figure("connect with the overlay on 2 x 3 nodes (wall time)", t_connect, "s")

        gw_a, gw_b = a.node("a-node-1"), b.gateway_nodes[0]
        client_pod, server_pod = a.node("a-node-3").pods[0], b.node("b-node-2").pods[0]
        remapped = get(a, "configurations")[0]["status"]["remote"]["cidr"]["pod"][0]
        target = translate(server_pod.ip, b.pod_cidr, remapped)

        measure_path(lab, client_pod, server_pod, target, gw_a, gw_b)

        measure_10k(lab.prefix)
        t_rec = timed_playbook(lab, "reconcile_overlay", nodes_group="cluster_a_nodes")
        figure("for comparison: ansible-playbook reconcile_overlay.yml, A (3 nodes)", t_rec, "s")

        if not measure_failover(lab, client_pod, target):
            diagnose_failover(lab, client_pod, target)
    left = [n for n in netns.list_netns() if n.startswith(lab.prefix)]
    if os.path.isdir("/var/run/wireguard"):
        left += [e for e in os.listdir("/var/run/wireguard") if e.startswith(lab.prefix)]
    if left:
        raise RuntimeError(f"lab {lab.lab_id} left residue: {left}")


if __name__ == "__main__":
    run()
