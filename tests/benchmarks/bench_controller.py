"""Controller benchmarks on a lab cluster, each against a plain per-event ansible-runner loop (one
ansible_runner.run per watch event, the Operator SDK's way) measured in the same run.

1. CR change -> status Ready, p50/p99 (real playbook: reconcile_ipam.yml)
2. 100 CR changes at once -> all Ready
3. resync of 1,000 unchanged objects: playbook runs and CPU per object
4. controller RSS with 100 objects
5. a dataplane change: a GatewayClient's MTU edited on two connected lab clusters -> the controller's
   reconcile_gateway.yml run (gateway dataplane, overlay, status) -> Ready at the new generation, with the new
   MTU on the WireGuard interface; against one plain ansible-runner run of the same playbook
6. the warm runner stopping a run (no lab, no root): a playbook's shell running `sleep`, the run canceled by its
   callback, and one run past its timeout -> run() returned (tests/integration/test_warm_runner.py checks that
   every process of the run is gone)
"""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from controller import watchmap
from controller.engine import Engine
from controller.engine.inputs import applied_repr
from controller.kubeapi import ClusterAPI, Informer
from controller.runner import PlaybookRunner
from controller.status import StatusWriter
from controller.watchmap import RESOURCES
from tests.benchmarks.report import figure, ratio
from tests.conftest import ROOT
from tests.e2e import fabric
from tests.e2e.test_controller import ControllerProc, Kube, ready, wait_for
from tests.integration.test_warm_runner import SLEEPER, run_tree
from tests.lab import netns
# importable once tests.conftest (imported above) has put the collection on sys.path
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import warm  # noqa: E402  pylint: disable=wrong-import-order

SEQ = 10          # sequential changes for the latency figures
BURST = 100
BASELINE_BURST = 10   # the baseline's burst is measured on 10 and extrapolated (one run per event)
RESYNC_N = 1000
IPAM = os.path.join(ROOT, "playbooks", "reconcile_ipam.yml")


def conf(name: str, i: int) -> dict:
    return {"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
            "metadata": {"name": name, "namespace": "default", "labels": {"liqo.io/remote-cluster-id": name}},
            "spec": {"remote": {"cidr": {"pod": [f"10.243.{i % 256}.0/24"], "external": [f"10.70.{i % 256}.0/24"]}}}}


def is_ready(kube: Kube, name: str) -> bool:
    obj = kube.get("Configuration", "default", name) or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def tree_rss_mib(pid: int) -> float:
    """RSS of a process and all its descendants (the controller and its warm runner's zygote), summed: pages
    the zygote shares with nothing are counted once, shared libraries twice (an overestimate)."""
    total = 0.0
    for p in [pid] + warm.descendants(pid):
        try:
            total += rss_mib(p)
        except OSError:  # gone meanwhile
            pass
    return total


def latency_run(kube: Kube, prefix: str, start: int, n: int) -> list:
    out = []
    for i in range(n):
        name = f"{prefix}{i}"
        t0 = time.monotonic()
        kube.create(conf(name, start + i))
        wait_for(lambda name=name: is_ready(kube, name), 120, f"{name} Ready", interval=0.02)
        out.append(time.monotonic() - t0)
    return out


def burst_run(kube: Kube, prefix: str, start: int, n: int) -> float:
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: kube.create(conf(f"{prefix}{i}", start + i)), range(n)))
    pending = {f"{prefix}{i}" for i in range(n)}
    deadline = time.monotonic() + 600
    while pending and time.monotonic() < deadline:
        items = kube.list("Configuration", "default")
        for o in items:
            if o["metadata"]["name"] in pending and any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (o.get("status") or {}).get("conditions") or []):
                pending.discard(o["metadata"]["name"])
        time.sleep(0.1)
    assert not pending, f"{len(pending)} not Ready"
    return time.monotonic() - t0


class NaiveLoop:
    """The baseline: every watch event of a Configuration whose generation it has not handled yet starts one
    ansible_runner.run of the playbook, then the object's Ready is written (2 workers, no coalescing, no
    hash skip)."""

    def __init__(self, kubeconfig: str, runtime: str, workers: int = 2):
        self.api = ClusterAPI("a", kubeconfig)
        self.kubeconfig = kubeconfig
        self.runner = PlaybookRunner(runtime, ROOT, warm=False)   # the plain baseline: a cold ansible-playbook per run
        self.status = StatusWriter(self.api)
        self.stop = threading.Event()
        self.pool = concurrent.futures.ThreadPoolExecutor(workers)
        self.seen = set()
        self.runs = 0
        self.inf = Informer(self.api, RESOURCES["Configuration"], self.on_event, self.stop)

    def on_event(self, _kind, etype, obj, _old):
        meta = obj["metadata"]
        key = (meta["name"], meta.get("generation"))
        if etype == "DELETED" or key in self.seen:
            return
        self.seen.add(key)
        self.pool.submit(self.reconcile, obj)

    def reconcile(self, obj):
        self.runs += 1
        res = self.runner.run(IPAM, {"kubeconfig": self.kubeconfig}, 300, "naive")
        meta = obj["metadata"]
        self.status.set_phase(RESOURCES["Configuration"], meta["namespace"], meta["name"],
                              "ready" if res.ok else "degraded", meta.get("generation"), res.message)

    def start(self):
        self.inf.start()
        self.inf.synced.wait(30)
        self.seen.update((o["metadata"]["name"], o["metadata"].get("generation")) for o in self.inf.cache.values())
        return self

    def close(self):
        self.stop.set()
        self.inf.close()
        self.pool.shutdown(wait=True)


def delete_all(kube: Kube, prefix: str):
    for o in kube.list("Configuration", "default"):
        if o["metadata"]["name"].startswith(prefix):
            kube.delete("Configuration", "default", o["metadata"]["name"])


def resync_cpu(kube: Kube, kubeconfig: str, workdir: str) -> tuple:
    """In-process: the engine's resync over 1,000 watched PublicKeys whose inputs equal the last apply."""
    tmp_pb = os.path.join(workdir, "noop.yml")
    with open(tmp_pb, "w", encoding="utf-8") as f:
        f.write("- hosts: localhost\n  gather_facts: false\n  tasks: [{ansible.builtin.meta: noop}]\n")
    entries = watchmap.parse([{"kind": "PublicKey", "playbook": tmp_pb, "resync": 0},
                              {"kind": "Configuration", "resync": 0}], None)
    key = "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10="

    def mk(i):
        kube.create({"apiVersion": "networking.liqo.io/v1beta1", "kind": "PublicKey",
                     "metadata": {"name": f"pk{i}", "namespace": "default",
                                  "labels": {"liqo.io/remote-cluster-id": f"peer{i % 50}"}},
                     "spec": {"publicKey": key}})
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(mk, range(RESYNC_N)))
    eng = Engine(entries, {"a": kubeconfig}, ROOT, os.path.join(workdir, "rt-inproc"), leader_elect=False,
                 state_configmap=False, warm_runner=False)
    cs = eng.clusters["a"]
    for kind in eng.kinds():
        inf = Informer(cs.api, RESOURCES[kind], lambda *a: None, eng.stop)
        cs.informers[kind] = inf
        inf.start()
        inf.synced.wait(60)
    # register the objects and mark them applied, as after their successful runs
    for o in cs.informers["PublicKey"].cache.values():
        eng.reactor.on_event(cs, "PublicKey", "ADDED", o, None)
    eng.queue = type(eng.queue)(debounce=0.2)
    for k in list(cs.key_entry):
        entry, objs, hashes = eng.inputs.current(cs, k)
        cs.applied[k] = applied_repr(entry, hashes)
    cs.hash_memo.clear()
    c0, t0 = time.process_time(), time.perf_counter()
    n, enq = eng.resync(cs)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    # a second pass (memoized hashes: the steady state of periodic resyncs)
    c1 = time.process_time()
    eng.resync(cs)
    cpu2 = time.process_time() - c1
    eng.stop.set()
    for inf in cs.informers.values():
        inf.close()
    return n, enq + eng.queue.depth(), cpu, wall, cpu2, eng.runs.started


GW_SEQ = 8
GATEWAY = os.path.join(ROOT, "playbooks", "reconcile_gateway.yml")


def wg_mtu(ns: str) -> int:
    out = netns.exec_in(ns, ["ip", "-o", "link", "show"]).stdout
    return next(int(line.split(" mtu ")[1].split()[0]) for line in out.splitlines() if ": lwg" in line)


def gateway_latency(workdir: str) -> None:
    """CR change -> dataplane applied and Ready, on two connected clusters driven by the controller."""
    from tests.lab import Lab  # pylint: disable=import-outside-toplevel
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=1, pods_per_node=1) as lab:
        a, b = lab["a"], lab["b"]
        fabric.install(a)
        fabric.install(b)
        fabric.playbook("connect", lab.inventory_path, kubeconfig=a.kubeconfig, remote_kubeconfig=b.kubeconfig,
                        wait=True, wait_timeout=20, gateway_group="cluster_a_gateway",
                        remote_gateway_group="cluster_b_gateway", nodes_group="cluster_a_nodes",
                        remote_nodes_group="cluster_b_nodes")
        kube = Kube(a.kubeconfig)
        gc = kube.list("GatewayClient")[0]["metadata"]
        ns, name = gc["namespace"], gc["name"]
        ctl = ControllerProc(workdir, {"a": a.kubeconfig, "b": b.kubeconfig}, "--no-leader-elect", name="bench-gw",
                             inventory=lab.inventory_path).start()
        try:
            wait_for(lambda: ready(kube, "GatewayClient", ns, name), 120, "the GatewayClient Ready at start")
            time.sleep(3)  # the start-up reconciles of the other objects settle
            lat = []
            for i in range(GW_SEQ):
                mtu = 1320 if i % 2 == 0 else 1340
                gen = kube.patch("GatewayClient", ns, name, {"spec": {"mtu": mtu}})["metadata"]["generation"]
                t0 = time.monotonic()
                wait_for(lambda gen=gen: ready(kube, "GatewayClient", ns, name, generation=gen), 120,
                         f"GatewayClient Ready at generation {gen}", interval=0.02)
                lat.append(time.monotonic() - t0)
                if wg_mtu(a.gateway_nodes[0].netns) != mtu:
                    raise RuntimeError(f"Ready at generation {gen} but the tunnel's MTU is not {mtu}")
            play = ctl.metric("liqo_fabric_reconcile_duration_seconds_sum", kind="GatewayClient") / max(
                1, ctl.metric("liqo_fabric_reconcile_duration_seconds_count", kind="GatewayClient"))
        finally:
            ctl.stop(signal.SIGTERM)
        runner = PlaybookRunner(os.path.join(workdir, "rt-gw-naive"), ROOT, inventory=lab.inventory_path, warm=False)
        naive = []
        for dummy in range(3):
            res = runner.run(GATEWAY, {"kubeconfig": a.kubeconfig, "fabric_cluster": "a",
                                       "gateway_kinds": ["GatewayClient"]}, 300, "naive-gw")
            if not res.ok:
                raise RuntimeError(f"plain run of reconcile_gateway.yml failed: {res.message}")
            naive.append(res.duration)
    print(f"  dataplane change: GatewayClient spec.mtu edited {GW_SEQ} times -> tunnel MTU applied and Ready:")
    figure("ours p50", pct(lat, 50), "s", target=1.5)
    figure("ours p99", pct(lat, 99), "s", target=3.0)
    figure("ours: mean reconcile (reconcile_gateway.yml, gateway + overlay + status)", play, "s")
    figure("plain ansible-runner run of the same playbook, median of 3", pct(naive, 50), "s")
    ratio("p50 ours / one plain run", pct(lat, 50), pct(naive, 50))


def warm_vs_cold(kubeconfig: str, workdir: str, n: int = 10) -> dict:
    """spawn_seconds and duration medians of a no-op playbook and reconcile_ipam.yml, warm runner vs cold
    (one PlaybookRunner each, runs alternated so both see the same machine load)."""
    noop = os.path.join(workdir, "warm-noop.yml")
    with open(noop, "w", encoding="utf-8") as f:
        f.write("- hosts: localhost\n  gather_facts: false\n  tasks: [{ansible.builtin.debug: {msg: hi}}]\n")
    runners = {"warm": PlaybookRunner(os.path.join(workdir, "rt-warm"), ROOT, warm=True),
               "cold": PlaybookRunner(os.path.join(workdir, "rt-cold"), ROOT, warm=False)}
    runners["warm"].zygote.wait_ready(60)
    out = {}
    try:
        for name, pb, xv in (("no-op playbook", noop, {}), ("reconcile_ipam.yml", IPAM, {"kubeconfig": kubeconfig})):
            res = {"warm": [], "cold": []}
            for dummy in range(n):
                for mode, runner in runners.items():
                    r = runner.run(pb, xv, 120, "wvc")
                    assert r.ok and r.warm == (mode == "warm"), (mode, r)
                    res[mode].append(r)
            for mode, rs in res.items():
                out[(name, mode)] = (pct([r.spawn_seconds for r in rs], 50), pct([r.duration for r in rs], 50))
    finally:
        for runner in runners.values():
            runner.close()
    print(f"  warm runner vs cold ansible-playbook ({n} runs each, medians):")
    for (name, mode), (spawn, dur) in out.items():
        figure(f"{name}: {mode} spawn (run() -> first event)", spawn, "s")
        figure(f"{name}: {mode} duration", dur, "s")
    for name in ("no-op playbook", "reconcile_ipam.yml"):
        ratio(f"{name}: duration warm / cold", out[(name, "warm")][1], out[(name, "cold")][1])
    return out


STOP_TIMEOUT = 15   # the timeout of the run stopped by it, as the test's


def warm_stop() -> None:
    """A warm run of a sleeping playbook stopped by its cancel callback, then one by its timeout: seconds from the
    cancel (set once the playbook's shell runs) and from the timeout's expiry to run() returning."""
    workdir = tempfile.mkdtemp(prefix="lfab-bench-stop-")
    sleeper = os.path.join(workdir, "sleep.yml")
    with open(sleeper, "w", encoding="utf-8") as f:
        f.write(SLEEPER)
    r = PlaybookRunner(os.path.join(workdir, "rt"), ROOT, warm=True)
    took = {}
    try:
        if not r.zygote.wait_ready(60):
            raise RuntimeError("the zygote did not come up")
        for how in ("cancel", "timeout"):
            pidfile = os.path.join(workdir, f"{how}.pid")
            cancel = threading.Event()
            out = {}

            def go(how, pidfile, cancel, out):
                out["res"] = r.run(sleeper, {"pidfile": pidfile}, STOP_TIMEOUT if how == "timeout" else 600, how,
                                   cancel=cancel.is_set)

            t = threading.Thread(target=go, args=(how, pidfile, cancel, out))
            t_start = time.monotonic()
            t.start()
            run_tree(r.zygote.pid, pidfile)
            if how == "cancel":
                cancel.set()
            t_stop = time.monotonic() if how == "cancel" else t_start + STOP_TIMEOUT
            t.join(60)
            took[how] = time.monotonic() - t_stop
            if t.is_alive() or out["res"].status != ("canceled" if how == "cancel" else "timeout"):
                raise RuntimeError(f"{how}: the run did not stop as expected: {out.get('res')}")
    finally:
        r.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print("  warm runner stopping a running playbook (shell running `sleep`):")
    figure("cancel callback set -> run() returned", took["cancel"], "s")
    figure(f"timeout ({STOP_TIMEOUT} s) expired -> run() returned", took["timeout"], "s")


def run():
    warm_stop()
    if os.geteuid() != 0:
        print("  skipped: needs root for the lab")
        return
    from tests.lab import Lab  # pylint: disable=import-outside-toplevel
    workdir = tempfile.mkdtemp(prefix="lfab-bench-ctl-")
    try:
        with Lab([{"name": "a"}], nodes=1, pods_per_node=1) as lab:
            kc = lab["a"].kubeconfig
            env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                       PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
            subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), IPAM.replace(
                "reconcile_ipam.yml", "install.yml"), "-e", f"kubeconfig={kc}", "-e", "pod_cidr=10.243.0.0/16"],
                cwd=ROOT, env=env, check=True, capture_output=True)
            kube = Kube(kc)
            warm_vs_cold(kc, workdir)

            # ---- ours: latency, burst, RSS
            ctl = ControllerProc(workdir, {"a": kc}, "--no-leader-elect", name="bench").start()
            lat = latency_run(kube, "lat", 0, SEQ)
            burst = burst_run(kube, "burst", 20, BURST)
            time.sleep(2)
            rss = rss_mib(ctl.proc.pid)
            rss_tree = tree_rss_mib(ctl.proc.pid)
            runs_ours = ctl.metric("liqo_fabric_playbook_runs_total", kind="Configuration")  # not the overlay key's NoHostsMatched retries
            play_mean = ctl.metric("liqo_fabric_reconcile_duration_seconds_sum") / max(
                1, ctl.metric("liqo_fabric_reconcile_duration_seconds_count"))
            ctl.stop(signal.SIGTERM)
            delete_all(kube, "lat")
            delete_all(kube, "burst")

            # ---- baseline: the same flows through a naive per-event loop
            naive = NaiveLoop(kc, os.path.join(workdir, "rt-naive")).start()
            lat_b = latency_run(kube, "nlat", 130, SEQ)
            burst_b = burst_run(kube, "nburst", 150, BASELINE_BURST)
            rss_b = rss_mib(os.getpid())
            naive_runs = naive.runs
            naive.close()
            delete_all(kube, "nlat")
            delete_all(kube, "nburst")

            print(f"  CR change -> Ready (reconcile_ipam.yml, {SEQ} sequential creates):")
            figure("ours p50", pct(lat, 50), "s", target=1.5)
            figure("ours p99", pct(lat, 99), "s", target=3.0)
            figure("ours: mean playbook run (reconcile_ipam.yml alone)", play_mean, "s")
            figure("ours: p50 minus the mean playbook run (engine overhead)", pct(lat, 50) - play_mean, "s")
            figure("naive per-event loop p50", pct(lat_b, 50), "s")
            figure("naive per-event loop p99", pct(lat_b, 99), "s")
            ratio("p50 ours / naive", pct(lat, 50), pct(lat_b, 50))
            print(f"  {BURST} CR changes at once:")
            figure("ours: all Ready after", burst, "s", target=20)
            figure("ours: playbook runs (whole benchmark so far)", runs_ours, "runs")
            extrapolated = burst_b * BURST / BASELINE_BURST
            figure(f"naive: {BASELINE_BURST} at once, all Ready after", burst_b, "s")
            figure(f"naive: {BURST} at once (x{BURST // BASELINE_BURST} of the measured, one run per event)",
                   extrapolated, "s")
            figure("naive: playbook runs (latency + burst)", naive_runs, "runs")
            ratio("burst ours / naive (extrapolated)", burst, extrapolated)
            print("  RSS with 100 objects:")
            figure("ours (controller process)", rss, "MiB", target=150)
            figure("ours, with the warm runner's zygote (process tree, summed)", rss_tree, "MiB", target=150)
            figure("naive loop (in-process runner, informer)", rss_b, "MiB")

            # ---- resync of 1,000 unchanged objects
            n, enqueued, cpu, wall, cpu2, started = resync_cpu(kube, kc, workdir)
            one = PlaybookRunner(os.path.join(workdir, "rt-one"), ROOT, warm=False)
            t0 = time.perf_counter()
            c0 = os.times()
            one.run(os.path.join(workdir, "noop.yml"), {}, 60, "one")
            c1 = os.times()
            per_run_cpu = (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)
            per_run_wall = time.perf_counter() - t0
            print(f"  resync of {n} unchanged objects (PublicKeys, per-object keys):")
            figure("ours: playbook runs started or queued", started + enqueued, "runs")
            figure("ours: CPU per object (first pass, hashes computed)", cpu / n * 1000, "ms", target=5)
            figure("ours: CPU per object (steady state, memoized)", cpu2 / n * 1000, "ms", target=5)
            figure("ours: wall for the whole resync", wall * 1000, "ms")
            figure("naive: playbook runs", n, "runs")
            figure("naive: CPU per object (one ansible run of a no-op playbook)", per_run_cpu * 1000, "ms")
            figure(f"naive: wall for {n} objects (x{n} one run, 2 workers)", per_run_wall * n / 2, "s")
            ratio("CPU per object ours / naive", cpu / n, per_run_cpu)
        gateway_latency(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
