"""Helpers for e2e tests of the fabric on lab clusters: run the collection's playbooks, read CRs, probe
traffic between lab pods with a real TCP server that reports the peer address it saw."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import yaml

from tests.ansible_run import ansible_env
from tests.conftest import ROOT, require_root
from tests.lab import Lab, netns

PLAYBOOKS = os.path.join(ROOT, "playbooks")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def playbook(book: str, inventory: str | None = None, /, *, check: bool = True, json_output: bool = False,
             proc_timeout: float = 300, cli_flags: tuple = (), environ: dict | None = None,
             playbooks: str = PLAYBOOKS, **extra) -> subprocess.CompletedProcess:
    """Runs <playbooks>/<book>.yml (default: this tree's) with `extra` as extra vars (any name, `name` and `timeout`
    included), `cli_flags` (e.g. --check --diff) and `environ` added to its environment; returns the process (stdout,
    stderr)."""
    argv = [ANSIBLE_PLAYBOOK, os.path.join(playbooks, book + ".yml"), "-e", json.dumps(extra), *cli_flags]
    if inventory:
        argv[1:1] = ["-i", inventory]
    env = ansible_env(dict({"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"} if json_output else {}, **(environ or {})))
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=proc_timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{book} failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    return proc


def changed_tasks(proc: subprocess.CompletedProcess) -> list[str]:
    """Names of tasks that reported a change, from a json-callback run."""
    data = json.loads(proc.stdout)
    out = []
    for play in data["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("changed"):
                    out.append(f"{task['task']['name']} [{host}]")
    return out


OVERLAY_HOST_TASK = "Overlay of this node in one call"  # roles/node_overlay/tasks/apply.yml
OVERLAY_BATCH_TASK = "Overlay of the changed nodes the controller host reaches, in one task"  # tasks/pending.yml


def overlay_applied(proc: subprocess.CompletedProcess, how: str | None = None) -> dict:
    """{host: overlay_dataplane result} of a json-callback run: run per host (how="host"), in pending.yml's batch
    (how="batch") or either (None)."""
    out = {}
    for play in json.loads(proc.stdout)["plays"]:
        for task in play["tasks"]:
            if OVERLAY_HOST_TASK in task["task"]["name"] and how in (None, "host"):
                out.update({h: r for h, r in task["hosts"].items() if not r.get("skipped")})
            if OVERLAY_BATCH_TASK in task["task"]["name"] and how in (None, "batch"):
                for res in task["hosts"].values():
                    out.update(res.get("applied") or {})
    return out


def install(cluster) -> None:
    playbook("install", kubeconfig=cluster.kubeconfig, pod_cidr=cluster.pod_cidr, service_cidr=cluster.service_cidr,
             reserved=[cluster.underlay_cidr])


def sides(lab) -> dict:
    """The kubeconfigs of a playbook between lab clusters a (local) and b (remote), as extra vars."""
    return {"kubeconfig": lab["a"].kubeconfig, "remote_kubeconfig": lab["b"].kubeconfig}


@contextlib.contextmanager
def lab_pair(nodes: int = 1, pods_per_node: int = 1, cluster_a: dict | None = None, wan_routed: bool = False
             ) -> Iterator[Lab]:
    """Two lab clusters a and b, both with pod CIDR 10.243.0.0/16 and the fabric's API installed; `cluster_a` adds
    to cluster a's spec (e.g. {"gateways": 2}); `wan_routed`: a router between the gateways (LabWan.set_path)."""
    require_root()
    with Lab([{"name": "a", **(cluster_a or {})}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=nodes,
             pods_per_node=pods_per_node, wan_routed=wan_routed) as lab:
        install(lab["a"])
        install(lab["b"])
        yield lab


@contextlib.contextmanager
def connected_pair(nodes: int = 1, pods_per_node: int = 1, cluster_a: dict | None = None, *,
                   outputs: list | None = None, wait_timeout: int = 20, **extra) -> Iterator[Lab]:
    """lab_pair, connected and Connected: connect with wait=True and `extra` (e.g. the inventory groups); its
    output is appended to `outputs` when given."""
    with lab_pair(nodes, pods_per_node, cluster_a) as lab:
        proc = playbook("connect", lab.inventory_path, **sides(lab), wait=True, wait_timeout=wait_timeout, **extra)
        if outputs is not None:
            outputs.append(proc.stdout + proc.stderr)
        yield lab


def kubectl(cluster, *args: str, input: str | None = None, check: bool = True) -> str:
    proc = subprocess.run(["kubectl", "--kubeconfig", cluster.kubeconfig, *args], capture_output=True, text=True,
                          input=input, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def get(cluster, kind: str, namespace: str | None = None) -> list[dict]:
    args = ["get", f"{kind}.networking.liqo.io", "-o", "json"]
    args += ["-n", namespace] if namespace else ["-A"]
    return json.loads(kubectl(cluster, *args))["items"]


def apply_yaml(cluster, text: str) -> None:
    kubectl(cluster, "apply", "-f", "-", input=text)


SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(16); print("ready", flush=True)
while True:
    c, addr = s.accept()
    c.sendall(addr[0].encode()); c.close()
"""

CLIENT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
print(c.recv(64).decode()); c.close()
"""


class PeerServer:
    """A TCP server in a pod netns answering every connection with the source address it saw."""

    def __init__(self, pod_netns: str, port: int = 7000):
        self.netns, self.port = pod_netns, port
        self.proc = netns.popen_in(pod_netns, [sys.executable, "-c", SERVER, str(port)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def seen_source(client_netns: str, address: str, port: int = 7000) -> str:
    """The source address the PeerServer at address:port saw for a connection from client_netns."""
    proc = netns.exec_in(client_netns, [sys.executable, "-c", CLIENT, address, str(port)], check=False, timeout=10)
    if proc.returncode != 0:
        raise AssertionError(f"TCP {client_netns} -> {address}:{port} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def translate(address: str, from_cidr: str, to_cidr: str) -> str:
    import ipaddress  # pylint: disable=import-outside-toplevel
    src, dst = ipaddress.ip_network(from_cidr), ipaddress.ip_network(to_cidr)
    host = int(ipaddress.ip_address(address)) - int(src.network_address)
    return str(ipaddress.ip_address(int(dst.network_address) + host))


class ChangeRecorder:
    """What read(name) gives for each of `names`, read every `period` seconds in a thread until stop(): the first
    value and each change after it (a read that fails is skipped: the next one counts)."""

    def __init__(self, names, read, period: float = 0.2):
        self.read, self.period = read, period
        self.seen = {name: [read(name)] for name in names}
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.halt.wait(self.period):
            self.read_all()

    def read_all(self):
        for name, seen in self.seen.items():
            try:
                value = self.read(name)
            except Exception:  # pylint: disable=broad-except  # a reply cut short, an API hiccup: the next read
                continue
            if value != seen[-1]:
                seen.append(value)

    def stop(self) -> dict:
        """{name: the values seen}."""
        self.halt.set()
        self.thread.join(timeout=10)
        self.read_all()
        return self.seen


def wait_for(predicate, timeout: float = 30, interval: float = 0.5, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def lab_path_state(cluster, ping: str = "") -> str:
    """What a failed traffic wait on a light lab prints: each node's links, rules, fabric routes, neighbours and
    nft ruleset (gateway hosts also `wg show` and, given an address, one ping from the host: the tunnel without
    the overlay)."""
    out = []
    for n in cluster.nodes:
        cmds = [["ip", "-br", "-s", "link"], ["ip", "-br", "addr"], ["ip", "rule"], ["ip", "route", "show", "table", "all"],
                ["ip", "neigh"], ["nft", "list", "ruleset"]]
        if n.gateway:
            cmds += [["wg", "show"]] + ([["ping", "-n", "-c1", "-W2", ping]] if ping else [])
        for cmd in cmds:
            res = netns.exec_in(n.netns, cmd, check=False)
            text = "\n".join(line for line in (res.stdout + res.stderr).splitlines()
                             if line.strip() and "private key" not in line and not line.startswith(("local ", "broadcast ")))
            out.append(f"{cluster.name} {n.name} $ {' '.join(cmd)}\n{text[-5000:]}")
    return "\n".join(out)


def dump(obj) -> str:
    return yaml.safe_dump(obj)


SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink")


def applyable(obj: dict) -> dict:
    """What a user applies back from `kubectl get -o yaml`: no server-set metadata, no status, no last-applied."""
    obj = json.loads(json.dumps(obj))
    for key in SERVER_FIELDS:
        obj["metadata"].pop(key, None)
    annotations = obj["metadata"].get("annotations") or {}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if not annotations:
        obj["metadata"].pop("annotations", None)
    obj.pop("status", None)
    return obj


def ping_replies(out: str) -> dict:
    """{icmp_seq: round trip in ms} of a ping's output."""
    return {int(seq): float(ms) for seq, ms in re.findall(r"icmp_seq=(\d+) ttl=\d+ time=([\d.]+) ms", out)}


def ping_losses(out: str, count: int) -> str:
    """The sequence numbers without a reply, as ranges, and the longest round trip (how long packets waited)."""
    replies = ping_replies(out)
    lost = [seq for seq in range(1, count + 1) if seq not in replies]
    ranges, start = [], None
    for i, seq in enumerate(lost):
        start = seq if start is None else start
        if i + 1 == len(lost) or lost[i + 1] != seq + 1:
            ranges.append(f"{start}-{seq}" if seq != start else str(seq))
            start = None
    return (f"{len(lost)} of {count} lost (icmp_seq {', '.join(ranges) or 'none'}); longest round trip "
            f"{max(replies.values(), default=0):.0f} ms\n{out[-1500:]}")


class PingFlow:
    """A ping every `interval` seconds from a netns (a pod's) to `target` while something happens; stop() gives
    the packets sent before the last one (which may be on its way when the ping is stopped: not a loss) and the
    ones of those without a reply."""

    def __init__(self, ns: str | None, target: str, interval: float = 0.2, enter: list[str] | None = None):
        """From the lab netns `ns`, or through `enter` (an argv prefix such as nsenter's)."""
        self.target = target
        argv = ["ping", "-n", "-i", str(interval), "-W", "10", target]
        kw = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.proc = subprocess.Popen(enter + argv, **kw) if enter else netns.popen_in(ns, argv, **kw)

    def stop(self) -> tuple[int, list[int], str]:
        """(packets sent before the last, the seqs of those without a reply, a description of the losses)."""
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=30)
        summary = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert summary, out[-2000:] + err
        sent, replies = int(summary.group(1)) - 1, ping_replies(out)
        return sent, [seq for seq in range(1, sent + 1) if seq not in replies], ping_losses(out, sent)


def longest_gap(lost: list[int], interval: float = 0.2) -> float:
    """The longest run of consecutive lost pings (PingFlow.stop's seqs), in seconds."""
    longest = run = 0
    for i, seq in enumerate(lost):
        run = run + 1 if i and seq == lost[i - 1] + 1 else 1
        longest = max(longest, run)
    return round(longest * interval, 1)


def wireguard_interfaces(lab) -> list[str]:
    """The fabric's WireGuard interfaces on the lab's gateway hosts (their UAPI sockets are named after them)."""
    return [line.split()[0].split("@")[0] for c in lab.clusters.values() for n in c.gateway_nodes
            for line in netns.exec_in(n.netns, ["ip", "-br", "link"]).stdout.splitlines() if line.startswith("lwg")]


def residue(lab, interfaces: list[str] = ()) -> dict:
    """What the fabric could leave in a light lab after a disconnect: per node its links, nft tables, policy rules
    and routes beyond the lab's own, the processes in its network namespace (wireguard-go, the health probes), the
    health probes' state files; the UAPI sockets of `interfaces` (wireguard_interfaces before); per cluster the
    gateways, Connections, PublicKeys and key Secrets. Only the entries that are not empty."""
    out = {}
    for c in lab.clusters.values():
        for n in c.nodes:
            ns = n.netns
            routes = netns.exec_in(ns, ["ip", "route", "show", "table", "all"]).stdout.splitlines()
            health = os.path.join(c.workdir, "health", ns)
            out[f"{c.name}/{n.name}"] = {
                "links": [ln.split()[0] for ln in netns.exec_in(ns, ["ip", "-br", "link"]).stdout.splitlines()
                          if ln.startswith(("lwg", "lov"))],
                "nft_tables": [t for t in netns.exec_in(ns, ["nft", "list", "tables"]).stdout.splitlines()
                               if "lfgw_" in t or "liqo_fabric" in t],
                "rules": [r for r in netns.exec_in(ns, ["ip", "rule"]).stdout.splitlines()
                          if not any(w in r for w in ("lookup local", "lookup main", "lookup default"))],
                "routes": [r for r in routes if " table " in r and " table local" not in r],
                "processes": [_cmdline(p) for p in netns.pids_in_netns(ns)],
                "health_files": sorted(os.listdir(health)) if os.path.isdir(health) else [],
            }
        gateway_keys = json.loads(kubectl(c, "get", "secrets", "-A", "-l", "networking.liqo.io/gateway-keys=true",
                                          "-o", "json"))["items"]
        out[c.name] = {kind: [o["metadata"]["name"] for o in get(c, kind)]
                       for kind in ("gatewayservers", "gatewayclients", "connections", "publickeies")}
        out[c.name]["key_secrets"] = [s["metadata"]["name"] for s in gateway_keys]
    out["uapi_sockets"] = {"/var/run/wireguard": [e for e in _entries("/var/run/wireguard") if e.split(".")[0] in interfaces]}
    return {where: {k: v for k, v in what.items() if v} for where, what in out.items() if any(what.values())}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return f"{pid} (gone)"


def _entries(path: str) -> list[str]:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []
