"""A refused change never takes a live connection down, under the controller.

Two lab clusters connected by `connect` and the controller serving both as its README says (default
controller/watches.yaml, shipped playbooks, the lab inventory); nobody runs a playbook. Each bad change of the
family is made as a user makes it, into the live connection, with a ping flow between pods of the two clusters (5 a
second) from before the change until the change is put back:
- kubectl patches a CR (a missing template, an address the gateway host cannot resolve, a PublicKey that is not the
  peer's, a remote pod CIDR that conflicts with the local one and that no pool can hold, an MTU the tunnel cannot
  use);
- the IPAM pools are the ipam role's `ipam_pools`, which the controller takes from its watch map (an entry's `vars`):
  the controller is restarted with a watch map whose Configuration entry sets a pool too small for the live peer,
  then with the default one.
The controller's run of the affected key fails (its JSON log), it retries, and for every change
- no ping is lost, across several seconds and the controller's runs and retries;
- the kernel of every node and gateway host of both clusters is as it was (links, routes, rules, nftables,
  WireGuard peers), read between two runs;
- both Connections stay Connected;
- the changed object's status says why: the reason and the value.
Putting the change back brings the objects to Ready again, the kernels as they were. One lab for the whole family.
"""
import json
import re
import shutil
import subprocess
import time

import pytest
import yaml

from controller import watchmap
from tests.conftest import require_root
from tests.e2e import fabric
from tests.e2e.fabric import PingFlow, playbook, translate
from tests.e2e.test_controller import ControllerProc, Kube, wait_for
from tests.lab import netns

pytestmark = pytest.mark.e2e
GROUPS = dict(gateway_group="cluster_a_gateway", remote_gateway_group="cluster_b_gateway",
              nodes_group="cluster_a_nodes", remote_nodes_group="cluster_b_nodes")
HELD = "refused: the gateway runs on as last built"
WRONG_KEY = "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="   # a valid key, not the peer's
SMALL_POOL = "192.168.77.0/24"
MIN_FLOW = 5.0   # seconds of pings at least between a change and its putting back


class Fabric:
    """The connected lab and the controller serving both clusters (restarted with another watch map by the pool
    change)."""

    def __init__(self, lab, workdir):
        self.lab, self.workdir = lab, workdir
        self.a, self.b = lab["a"], lab["b"]
        self.kube = {"a": Kube(self.a.kubeconfig), "b": Kube(self.b.kubeconfig)}
        self.ctl = None
        self.started = 0

    def start(self, watches=None):
        self.started += 1
        extra = ("--watches", watches) if watches else ()
        self.ctl = ControllerProc(self.workdir, {"a": self.a.kubeconfig, "b": self.b.kubeconfig}, *extra,
                                  inventory=self.lab.inventory_path, name=f"ctl{self.started}")
        self.ctl.start()

    def stop(self):
        if self.ctl:
            self.ctl.stop()
            self.ctl.reap_orphans()

    def one(self, cluster: str, kind: str) -> dict:
        (obj,) = self.kube[cluster].list(kind)
        return obj

    def patch(self, cluster: str, obj: dict, change: dict) -> None:
        meta = obj["metadata"]
        self.kube[cluster].patch(obj["kind"], meta["namespace"], meta["name"], change)

    def condition(self, cluster: str, obj: dict, ctype: str) -> dict:
        meta = obj["metadata"]
        return self.kube[cluster].condition(obj["kind"], meta["namespace"], meta["name"], ctype) or {}

    def key(self, obj: dict) -> str:
        return f"a/{obj['kind']}/{obj['metadata']['namespace']}/{obj['metadata']['name']}"

    def idle(self) -> bool:
        return all(self.ctl.metric(m) == 0 for m in ("liqo_fabric_queue_depth", "liqo_fabric_queue_running"))

    def settle(self) -> None:
        """Both gateways and both Configurations Ready at their generation, both Connections Connected, no run queued
        or running."""
        def ready():
            for c in ("a", "b"):
                for kind in ("Configuration", "GatewayServer" if c == "b" else "GatewayClient"):
                    obj = self.one(c, kind)
                    cond = self.condition(c, obj, "Ready")
                    if cond.get("status") != "True" or cond.get("observedGeneration") != obj["metadata"]["generation"]:
                        return False
            return connected(self) and self.idle() and (time.sleep(0.5) or self.idle())
        wait_for(ready, 90, "both sides Ready and Connected, the controller idle", interval=0.3)

    def runs_started(self) -> int:
        return sum(1 for rec in self.ctl.logs() if rec.get("msg") == "playbook run")

    def done(self, key: str, since: int, result: str, words=()):
        """The first 'playbook done' of `key` with `result` (and `words` in its message) in the controller's log after
        record `since`."""
        return next((rec for rec in self.ctl.logs()[since:] if rec.get("msg") == "playbook done"
                     and rec.get("key") == key and rec.get("result") == result
                     and all(w in rec.get("message", "") for w in words)), None)

    def says(self, refusal) -> dict:
        """The condition of the refusal's object when it says why (reason and words), else None."""
        cond = self.condition("a", self.one("a", refusal.kind), refusal.ctype)
        refused = "False" if refusal.ctype == "NetworkCIDRsConfigured" else "True"
        if cond.get("status") == refused and cond.get("reason") == refusal.reason and all(
                w in cond.get("message", "") for w in refusal.words):
            return cond
        return None


@pytest.fixture(scope="module")
def fab(tmp_path_factory):
    require_root()
    if not shutil.which("kubectl"):
        pytest.skip("kubectl is not installed")
    with fabric.connected_pair(nodes=2, pods_per_node=1, wait_timeout=30, **GROUPS) as lab:
        f = Fabric(lab, str(tmp_path_factory.mktemp("last-good")))
        f.start()
        try:
            f.settle()          # the controller's first runs adopted what connect built
            yield f
        finally:
            f.stop()
            playbook("disconnect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                     remote_kubeconfig=lab["b"].kubeconfig, check=False, **GROUPS)


# ------------------------------------------------------------------------------------------ what is compared
def kernel_state(cluster) -> dict:
    """What the fabric owns in the kernel of every host of the cluster, without counters and handshake times."""
    state = {}
    for ns in sorted({n.netns for n in cluster.nodes + cluster.gateway_nodes}):
        def run(*argv):
            return netns.exec_in(ns, list(argv)).stdout
        links = run("ip", "-o", "link")
        # `wg show all` would list every wireguard-go of the machine (their sockets are shared): this host's only
        wg = [line.split("\t") for name in re.findall(r"^\d+: (lwg\w+):", links, re.M)
              for line in run("wg", "show", name, "dump").splitlines()]
        state[ns] = {
            "links": links,
            "routes": run("ip", "-4", "route", "show", "table", "all"),
            "rules": run("ip", "-4", "rule"),
            "nft": re.sub(r"counter packets \d+ bytes \d+", "counter", run("nft", "list", "ruleset")),
            # interface lines as they are (keys, port, fwmark); peer lines without handshake time and counters
            "wireguard": [f[:4] + f[7:] if len(f) == 8 else f for f in wg],
        }
    return state


def both_kernels(f: Fabric) -> dict:
    return {"a": kernel_state(f.a), "b": kernel_state(f.b)}


def between_runs(f: Fabric) -> dict:
    """both_kernels read while no run of the controller is in progress (a refused peer key's trial peer lives during
    a run only: it carries nothing and its run removes it)."""
    for _attempt in range(30):
        wait_for(lambda: f.ctl.metric("liqo_fabric_queue_running") == 0, 30, "no run in progress", interval=0.1)
        started = f.runs_started()
        state = both_kernels(f)
        if f.ctl.metric("liqo_fabric_queue_running") == 0 and f.runs_started() == started:
            return state
    raise AssertionError("the controller never stayed between two runs long enough to read the kernels")


def differences(before: dict, after: dict) -> str:
    return "\n".join(f"{c} {ns} {what}:\n--- before\n{before[c][ns][what]}\n--- after\n{after[c].get(ns, {}).get(what)}"
                     for c in before for ns in before[c] for what in before[c][ns]
                     if before[c][ns][what] != after[c].get(ns, {}).get(what))


def connections(f: Fabric) -> dict:
    return {c: [(o["metadata"]["name"], (o.get("status") or {}).get("value")) for o in f.kube[c].list("Connection")]
            for c in ("a", "b")}


def connected(f: Fabric) -> bool:
    return all(conns and all(value == "Connected" for _name, value in conns) for conns in connections(f).values())


def flow(f: Fabric) -> PingFlow:
    """5 pings a second from a pod of a's second node (overlay, then tunnel) to a pod of b, through its remap."""
    view = f.one("a", "Configuration")["status"]["remote"]["cidr"]["pod"][0]
    return PingFlow(f.a.nodes[-1].pods[0].netns, translate(f.b.nodes[0].pods[0].ip, f.b.pod_cidr, view))


# ------------------------------------------------------------------------------------------ one refused change
class Refusal:
    """A bad change as the controller meets it: the key whose run fails on it with `run_words` in its message, and the
    object whose condition says why (`ctype`: its Degraded condition, or the IPAM's own `NetworkCIDRsConfigured` of a
    Configuration) with the reason and `words` (the value among them) in its message."""

    def __init__(self, key, kind, reason, words, ctype="Degraded", run_words=None):
        self.key, self.kind, self.reason, self.words, self.ctype = key, kind, reason, words, ctype
        self.run_words = words if run_words is None else run_words


def check_refused(f: Fabric, make, undo, refusals, new_controller=False, runs=(), while_held=None):
    """Makes a change (`make()`), after which the controller's runs of each refusal's key fail saying why, checks that
    the connection is held as it was, and puts the change back (`undo()`): Ready again, the kernels as they were, no
    ping lost from before the change until after its putting back. `new_controller`: make and undo start a new
    controller (its log is read from its start). `runs`: more keys to wait for a run of (ok or failed) before the
    kernels are compared. `while_held()`: more checks while the change stands."""
    f.settle()
    before = both_kernels(f)
    ping = flow(f)
    stopped = False
    try:
        mark = 0 if new_controller else len(f.ctl.logs())
        t0 = time.monotonic()
        try:
            make()
            for r in refusals:
                wait_for(lambda r=r: f.done(r.key, mark, "failed", r.run_words), 90,
                         f"a run of {r.key} refused saying {r.run_words}", interval=0.2)
                says = wait_for(lambda r=r: f.says(r), 60, f"{r.kind}'s {r.ctype} condition saying {r.reason} {r.words}",
                                interval=0.2)
                assert says["reason"] == r.reason
            for key in runs:
                wait_for(lambda key=key: f.done(key, mark, "ok") or f.done(key, mark, "failed"), 90, f"a run of {key}",
                         interval=0.2)
            time.sleep(max(0.0, MIN_FLOW - (time.monotonic() - t0)))   # pings across the controller's retries too
            during = between_runs(f)
            assert during == before, differences(before, during)
            assert connected(f), connections(f)
            if while_held:
                while_held()
        finally:
            mark = 0 if new_controller else len(f.ctl.logs())
            undo()
        for key in sorted({r.key for r in refusals}):
            wait_for(lambda key=key: f.done(key, mark, "ok"), 90, f"a successful run of {key} once the change was put back",
                     interval=0.2)
        f.settle()
        sent, lost, losses = ping.stop()
        stopped = True
        print(f"{', '.join(sorted({r.kind + ' ' + r.reason for r in refusals}))}: {sent} pings sent, {len(lost)} lost")
        assert sent >= MIN_FLOW * 5 and not lost, losses
        after = both_kernels(f)
        assert after == before, differences(before, after)
    finally:
        if not stopped:
            ping.stop()


def test_a_missing_template_on_a_live_gateway(fab):
    gw = fab.one("a", "GatewayClient")
    template = gw["spec"]["clientTemplateRef"]
    check_refused(fab, lambda: fab.patch("a", gw, {"spec": {"clientTemplateRef": dict(template, name="no-such-template")}}),
                  lambda: fab.patch("a", gw, {"spec": {"clientTemplateRef": template}}),
                  [Refusal(fab.key(gw), "GatewayClient", "InvalidGatewayTemplate",
                           ["spec.clientTemplateRef", "no-such-template", HELD])])


def test_a_server_address_the_gateway_host_cannot_resolve(fab):
    gw = fab.one("a", "GatewayClient")
    endpoint = gw["spec"]["endpoint"]
    check_refused(fab, lambda: fab.patch("a", gw, {"spec": {"endpoint": {"addresses": ["no-such-host.invalid"]}}}),
                  lambda: fab.patch("a", gw, {"spec": {"endpoint": endpoint}}),
                  [Refusal(fab.key(gw), "GatewayClient", "InvalidEndpoint",
                           ["spec.endpoint.addresses", "cannot resolve host 'no-such-host.invalid'", HELD])])


def test_a_public_key_replaced_by_a_wrong_one_and_put_back(fab):
    gw, pk = fab.one("a", "GatewayClient"), fab.one("a", "PublicKey")
    key = pk["spec"]["publicKey"]
    check_refused(fab, lambda: fab.patch("a", pk, {"spec": {"publicKey": WRONG_KEY}}),
                  lambda: fab.patch("a", pk, {"spec": {"publicKey": key}}),
                  [Refusal(fab.key(gw), "GatewayClient", "PeerKeyRejected",
                           [f"the peer's new public key {WRONG_KEY} completed no handshake", "the live peer is kept"])])


def test_a_remote_pod_cidr_that_conflicts_and_no_pool_holds(fab):
    """10.0.0.0/7 overlaps the local pod CIDR (10.243.0.0/16), so it must be remapped, and it is larger than every
    pool: the IPAM refuses it and keeps the allocation in use, the gateway refuses to be rebuilt from it."""
    gw, conf = fab.one("a", "GatewayClient"), fab.one("a", "Configuration")
    served = conf["status"]["remote"]
    pod = conf["spec"]["remote"]["cidr"]["pod"]
    why = ["spec.remote.cidr.pod '10.0.0.0/7' needs a free /7"]
    check_refused(fab, lambda: fab.patch("a", conf, {"spec": {"remote": {"cidr": {"pod": ["10.0.0.0/7"]}}}}),
                  lambda: fab.patch("a", conf, {"spec": {"remote": {"cidr": {"pod": pod}}}}),
                  [Refusal("a/ipam", "Configuration", "PoolTooSmall", why),
                   Refusal("a/ipam", "Configuration", "PoolTooSmall", why + ["the allocation in use is kept"],
                           ctype="NetworkCIDRsConfigured", run_words=why),
                   Refusal(fab.key(gw), "GatewayClient", "ConfigurationRefused", why + [HELD])])
    assert fab.one("a", "Configuration")["status"]["remote"] == served


def _mtu_bounds(f: Fabric, kind: str, op: str) -> None:
    """Removes (op remove) or puts back (op add) the bounds of spec.mtu in the fabric's CRD of `kind`, in every
    version: removed, the CRD is as Liqo's own (which bounds nothing)."""
    crd = json.loads(fabric.kubectl(f.a, "get", "crd", f"{kind}.networking.liqo.io", "-o", "json"))
    ops = []
    for i, _version in enumerate(crd["spec"]["versions"]):
        path = f"/spec/versions/{i}/schema/openAPIV3Schema/properties/spec/properties/mtu"
        ops += [{"op": op, "path": f"{path}/{bound}", **({"value": value} if op == "add" else {})}
                for bound, value in (("minimum", 576), ("maximum", 9000))]
    fabric.kubectl(f.a, "patch", "crd", f"{kind}.networking.liqo.io", "--type", "json", "-p", json.dumps(ops))


def test_an_mtu_the_tunnel_cannot_use(fab):
    """With the fabric's CRDs the apiserver refuses spec.mtu 575 (below 576, the smallest datagram every IPv4 host
    must accept), naming the field and the value: the gateway never changes. Liqo's own CRDs bound nothing: there the
    gateway refuses spec.mtu 500 itself (InvalidMTU) and runs on as last built, and the peer cluster's PublicKey of it
    keeps the MTU its tunnel runs (the peer's Connection gets no MTUMismatch)."""
    gw = fab.one("a", "GatewayClient")
    mtu = gw["spec"]["mtu"]
    announced = fab.one("b", "PublicKey")     # a's key in the peer cluster, with a's MTU in an annotation

    def make():
        kubectl = ["kubectl", "--kubeconfig", fab.a.kubeconfig, "-n", gw["metadata"]["namespace"], "patch",
                   "gatewayclients.networking.liqo.io", gw["metadata"]["name"], "--type", "merge", "-p"]
        proc = subprocess.run(kubectl + [json.dumps({"spec": {"mtu": 575}})], capture_output=True, text=True, check=False)
        assert proc.returncode != 0 and "spec.mtu: Invalid value: 575" in proc.stderr, proc.stderr
        assert fab.one("a", "GatewayClient")["metadata"]["generation"] == gw["metadata"]["generation"]
        _mtu_bounds(fab, "gatewayclients", "remove")
        wait_for(lambda: subprocess.run(kubectl + [json.dumps({"spec": {"mtu": 500}})], capture_output=True,
                                        check=False).returncode == 0, 10, "the CRD without bounds served")

    def undo():
        fab.patch("a", gw, {"spec": {"mtu": mtu}})
        _mtu_bounds(fab, "gatewayclients", "add")

    def peer_unchanged():
        assert fab.one("b", "PublicKey")["metadata"]["annotations"] == announced["metadata"]["annotations"]
    check_refused(fab, make, undo, [Refusal(fab.key(gw), "GatewayClient", "InvalidMTU",
                                            ["spec.mtu: 500 is not an MTU the tunnel can use", "576", "9000", HELD])],
                  while_held=peer_unchanged)


def test_a_pool_too_small_for_the_live_peer(fab):
    """The controller restarted with ipam_pools [192.168.77.0/24] in its watch map (the Configuration entry's vars):
    every key runs again, the IPAM refuses the live peer's /16 and keeps the allocation in use; the gateways' runs
    that read the refusal hold the gateway. The controller restarted with the default watch map puts it back."""
    conf = fab.one("a", "Configuration")
    served = conf["status"]["remote"]
    with open(watchmap.DEFAULT_PATH, encoding="utf-8") as src:
        data = yaml.safe_load(src)
    for entry in data["watches"]:
        if entry["kind"] == "Configuration":
            entry["vars"] = dict(entry.get("vars") or {}, ipam_pools=[SMALL_POOL])
    small = f"{fab.workdir}/watches-small-pool.yaml"
    with open(small, "w", encoding="utf-8") as out:
        yaml.safe_dump(data, out)

    def restart(watches=None):
        fab.stop()
        fab.start(watches)
    why = [f"pools {SMALL_POOL} too small"]
    # the gateway's run after the restart reads the Configuration before or after the IPAM refused it: built as it
    # was, or held (ConfigurationRefused); either way nothing changes
    check_refused(fab, lambda: restart(small), restart,
                  [Refusal("a/ipam", "Configuration", "PoolTooSmall", why),
                   Refusal("a/ipam", "Configuration", "PoolTooSmall", why + ["the allocation in use is kept"],
                           ctype="NetworkCIDRsConfigured", run_words=why)],
                  new_controller=True, runs=[fab.key(fab.one("a", "GatewayClient")), "a/overlay"])
    assert fab.one("a", "Configuration")["status"]["remote"] == served
