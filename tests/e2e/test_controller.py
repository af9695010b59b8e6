"""The controller as a process against a lab cluster (real kube-apiserver + etcd, real Ansible runs).

IPAM (Configuration -> playbooks/reconcile_ipam.yml) is the real end-to-end case; engine semantics
(Degraded naming the task, coalescing, locks, finalizers, drift, related kinds) use the small playbooks in
tests/e2e/controller_playbooks/ through a test watch map.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed
from controller.kubeapi import ApiError, ClusterAPI, Unreachable
from controller.watchmap import RESOURCES
from tests.conftest import ROOT, require_root
from tests.lab.apiserver import free_port

pytestmark = pytest.mark.e2e
PLAYBOOKS = os.path.join(ROOT, "tests", "e2e", "controller_playbooks")


# ----------------------------------------------------------------------------------------- helpers
def wait_for(pred, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = pred()
        except (ApiError, OSError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


class Kube:
    """Raw-dict access for the tests, surviving an apiserver restart (kubeconfig reload)."""

    def __init__(self, kubeconfig: str):
        self.api = ClusterAPI("test", kubeconfig)

    def _call(self, fn, *a, **kw):
        for attempt in range(30):
            try:
                return fn(*a, **kw)
            except Unreachable:
                self.api.maybe_reload()
                if attempt == 29:
                    raise
                time.sleep(0.3)
        return None

    def get(self, kind, ns, name):
        return self._call(self.api.get, RESOURCES[kind], ns, name)

    def list(self, kind, ns=None):
        return self._call(self.api.list, RESOURCES[kind], ns).get("items", [])

    def create(self, obj: dict) -> dict:
        res = RESOURCES[obj["kind"]]
        obj.setdefault("apiVersion", res.api_version)
        return self._call(self.api.request, "POST", res.path(obj["metadata"].get("namespace")), body=obj)

    def patch(self, kind, ns, name, body):
        return self._call(self.api.request, "PATCH", RESOURCES[kind].path(ns, name), body=body,
                          content_type="application/merge-patch+json")

    def delete(self, kind, ns, name):
        try:
            return self._call(self.api.request, "DELETE", RESOURCES[kind].path(ns, name))
        except ApiError as exc:
            if exc.status != 404:
                raise
            return None

    def condition(self, kind, ns, name, ctype):
        obj = self.get(kind, ns, name) or {}
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == ctype:
                return c
        return None


def configuration(name: str, pod: str = "10.243.0.0/16", ns: str = "default") -> dict:
    return {"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
            "metadata": {"name": name, "namespace": ns, "labels": {"liqo.io/remote-cluster-id": name}},
            "spec": {"remote": {"cidr": {"pod": [pod], "external": ["10.70.0.0/16"]}}}}


def gateway_server(name: str, cluster_id: str = "peer", ns: str = "default", mtu: int = 1340) -> dict:
    return {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
            "metadata": {"name": name, "namespace": ns, "labels": {"liqo.io/remote-cluster-id": cluster_id}},
            "spec": {"endpoint": {"port": 51820, "serviceType": "NodePort"}, "mtu": mtu}}


def public_key(name: str, cluster_id: str, key: str = "GExyYe7RJ3Lo5nQVa6K2Tp9zobXCvWmJawsLxu7hn10=") -> dict:
    return {"apiVersion": "networking.liqo.io/v1beta1", "kind": "PublicKey",
            "metadata": {"name": name, "namespace": "default", "labels": {"liqo.io/remote-cluster-id": cluster_id}},
            "spec": {"publicKey": key}}


def ready(kube: Kube, kind: str, ns: str, name: str, generation: int | None = None) -> bool:
    c = kube.condition(kind, ns, name, "Ready")
    return bool(c and c["status"] == "True" and (generation is None or c.get("observedGeneration") == generation))


def _children(pid: int) -> list:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", encoding="utf-8") as f:
                    stat = f.read()
                if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _descendants(pid: int) -> list:
    todo, out = [pid], []
    while todo:
        for c in _children(todo.pop()):
            out.append(c)
            todo.append(c)
    return out


class ControllerProc:
    """liqo-fabric-controller as a child process, with its metrics endpoint on a free loopback port."""

    def __init__(self, workdir: str, clusters: dict, *extra: str, name: str = "ctl", inventory: str | None = None,
                 root: str = ROOT):
        self.workdir, self.clusters, self.extra, self.name, self.inventory = workdir, clusters, extra, name, inventory
        self.root = root   # the source tree it runs from (a benchmark compares another tree's controller)
        self.port = 0
        self.proc = None
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.orphans: list = []

    def start(self, timeout: float = 30.0) -> "ControllerProc":
        self.port = free_port()
        argv = [sys.executable, "-m", "controller", "--metrics-address", "127.0.0.1", "--metrics-port", str(self.port),
                "--runtime-dir", os.path.join(self.workdir, f"rt-{self.name}"), "--lease-duration", "3",
                "--debounce", "0.1", "--identity", self.name]
        for c, kc in self.clusters.items():
            argv += ["--cluster", f"{c}={kc}"]
        if self.inventory:
            argv += ["--inventory", self.inventory]
        argv += list(self.extra)
        env = dict(os.environ, PYTHONPATH=self.root, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
        if self.root != ROOT:
            env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(self.root, "build", "collections")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: self.http("/readyz")[0] == 200, timeout, f"controller {self.name} ready")
        return self

    def http(self, path: str):
        if self.proc.poll() is not None:
            raise AssertionError(f"controller {self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=3) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def metric(self, name: str, **labels) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        text = self.http("/metrics")[1]
        total = 0.0
        for line in text.splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$", line)
            if not m or m.group(1) != name:
                continue
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(3))
        return total

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def logs(self) -> list:
        out = []
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        if not self.alive():
            return
        self.orphans = _descendants(self.proc.pid)
        os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def reap_orphans(self, timeout: float = 30.0) -> None:
        """Waits for (then kills) what a SIGKILLed controller left running (an ansible-playbook run)."""
        deadline = time.monotonic() + timeout
        for pid in self.orphans:
            while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
                time.sleep(0.1)
            if os.path.exists(f"/proc/{pid}"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.orphans = []


# ----------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def lab1():
    require_root()
    from tests.lab import Lab  # pylint: disable=import-outside-toplevel
    with Lab([{"name": "a"}], nodes=1, pods_per_node=1) as lab:
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"),
                   PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
        out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
                              os.path.join(ROOT, "playbooks", "install.yml"), "-e", f"kubeconfig={lab['a'].kubeconfig}",
                              "-e", "pod_cidr=10.243.0.0/16", "-e", "service_cidr=10.96.0.0/12"],
                             cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
        yield lab


@pytest.fixture
def kube(lab1):
    return Kube(lab1["a"].kubeconfig)


@pytest.fixture
def controllers(tmp_path, lab1):
    """Factory of controller processes; all are stopped (and their leftovers reaped) at the end."""
    made = []

    def make(*extra, name="ctl", clusters=None, start=True):
        c = ControllerProc(str(tmp_path), clusters or {"a": lab1["a"].kubeconfig}, *extra, name=name)
        made.append(c)
        return c.start() if start else c

    yield make
    for c in made:
        c.stop()
        c.reap_orphans()


@pytest.fixture
def engine_map(tmp_path):
    """A watch map over GatewayServer driving the test playbooks, plus its marker file and netns."""
    netns = f"lfab{os.urandom(2).hex()}ctl"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
    marker = str(tmp_path / "runs.log")
    data = {"watches": [
        {"kind": "GatewayServer", "playbook": "apply.yml", "finalizer": "test.liqo.io/cleanup",
         "finalizer_playbook": "teardown.yml", "lock": "{cluster}/gateway-host", "status": True, "resync": 1,
         "vars": {"marker": marker, "test_netns": netns},
         "related": [{"kind": "PublicKey", "labels": ["liqo.io/remote-cluster-id"]}],
         "drift": {"function": "controller.drift:dataplane", "period": 1}},
        {"kind": "PublicKey"},
    ]}
    path = tmp_path / "watches.yaml"
    path.write_text(yaml.safe_dump(data))
    yield {"path": str(path), "marker": marker, "netns": netns}
    subprocess.run(["ip", "netns", "del", netns], check=False)


def runs(marker: str, prefix: str = "start") -> list:
    try:
        with open(marker, encoding="utf-8") as f:
            return [line.split() for line in f if line.startswith(prefix + " ")]
    except FileNotFoundError:
        return []


# ----------------------------------------------------------------------------------------- IPAM: the real case
def test_gitops_apply_converges_and_resync_skips(kube, controllers):
    """kubectl-style create -> remapped CIDR in status and Ready; an edit reconverges (observedGeneration);
    periodic resyncs of the unchanged objects start no playbook (hash skip)."""
    ctl = controllers("--no-state")
    kube.create(configuration("conv1"))
    wait_for(lambda: ready(kube, "Configuration", "default", "conv1"), 60, "conv1 Ready")
    obj = kube.get("Configuration", "default", "conv1")
    assert re.match(r"^10\.\d+\.0\.0/16$", obj["status"]["remote"]["cidr"]["pod"][0]), obj["status"]
    types = {c["type"]: c for c in obj["status"]["conditions"]}
    assert types["NetworkCIDRsConfigured"]["status"] == "True"  # the playbook's condition survived ours
    assert types["Reconciling"]["status"] == "False" and types["Degraded"]["status"] == "False"
    assert types["Ready"]["observedGeneration"] == 1
    # posted after the status write: wait for it
    wait_for(lambda: any(e["involvedObject"]["name"] == "conv1" and e["reason"] == "Reconciled"
                         for e in kube.list("Event", "default")), 30, "conv1 Reconciled Event")

    kube.patch("Configuration", "default", "conv1", {"spec": {"remote": {"cidr": {"pod": ["10.244.0.0/16"]}}}})
    wait_for(lambda: ready(kube, "Configuration", "default", "conv1", generation=2), 60, "conv1 Ready at generation 2")
    # the second run at least was forked from the warm runner's pre-imported ansible-playbook (unless the speed
    # paths are off, `make plain`: then every run is a cold ansible-playbook)
    if speed.off_reason():
        assert ctl.metric("liqo_fabric_runner_starts_total", mode="warm") == 0
        assert ctl.metric("liqo_fabric_runner_starts_total", mode="cold") >= 2
    else:
        assert ctl.metric("liqo_fabric_runner_starts_total", mode="warm") >= 1
    # the IPAM's runs only: with no inventory the overlay key fails (NoHostsMatched) and retries on its backoff
    runs_before = ctl.metric("liqo_fabric_playbook_runs_total", kind="Configuration")
    skipped_before = ctl.metric("liqo_fabric_reconcile_skipped_total", reason="hash", kind="Configuration")
    # resync period of the Configuration entry is 300 s: force resyncs through restarts is slower than
    # waiting; the unchanged objects still see watch events (our own status writes) which must all skip
    kube.patch("Configuration", "default", "conv1", {"metadata": {"annotations": {"touched": "yes"}}})
    time.sleep(1.5)
    assert ctl.metric("liqo_fabric_playbook_runs_total", kind="Configuration") == runs_before, ctl.log_tail()
    assert ctl.metric("liqo_fabric_reconcile_skipped_total", reason="hash", kind="Configuration") > skipped_before


def test_bad_input_is_degraded_naming_the_field_others_served(kube, controllers):
    ctl = controllers("--no-state")
    kube.create(configuration("bad1", pod="10.243.0.1/16"))   # host bits set: the schema accepts it, the IPAM not
    kube.create(configuration("good1"))
    wait_for(lambda: ready(kube, "Configuration", "default", "good1"), 60, "good1 Ready")
    deg = wait_for(lambda: (kube.condition("Configuration", "default", "bad1", "Degraded") or {}).get("status") == "True"
                   and kube.condition("Configuration", "default", "bad1", "Degraded"), 60, "bad1 Degraded")
    assert "spec.remote.cidr.pod" in deg["message"] and "10.243.0.1/16" in deg["message"], deg
    assert "Allocate remapped CIDRs" in deg["message"], deg  # the failed task's name
    assert kube.condition("Configuration", "default", "bad1", "Ready")["status"] == "False"
    assert kube.get("Configuration", "default", "good1")["status"]["remote"]["cidr"]["pod"][0]
    # the controller posts the Event after it writes the status: wait for it rather than read once
    warn = wait_for(lambda: [e for e in kube.list("Event", "default")
                             if e["involvedObject"]["name"] == "bad1" and e["type"] == "Warning"], 30, "bad1 Warning Event")
    assert "spec.remote.cidr.pod" in warn[0]["message"], warn
    # still serving: a new good object converges while bad1 keeps failing
    kube.create(configuration("good2"))
    wait_for(lambda: ready(kube, "Configuration", "default", "good2"), 60, "good2 Ready")
    assert ctl.alive()
    kube.delete("Configuration", "default", "bad1")


def _ledger(kube: Kube) -> list:
    cm = kube.get("ConfigMap", "liqo", "liqo-fabric-ipam")
    return json.loads(cm["data"]["state.json"])["allocations"]


def test_kill_mid_run_and_restart_converges_without_duplicates(kube, controllers):
    ctl = controllers(name="victim")
    names = [f"kill{i}" for i in range(4)]
    for n in names:
        kube.create(configuration(n, pod=f"10.{250 + names.index(n)}.0.0/16"))
    wait_for(lambda: any((kube.condition("Configuration", "default", n, "Reconciling") or {}).get("status") == "True"
                         for n in names), 30, "a run in progress", interval=0.05)
    ctl.stop(signal.SIGKILL)
    ctl2 = controllers(name="successor")
    for n in names:
        wait_for(lambda n=n: ready(kube, "Configuration", "default", n), 90, f"{n} Ready after restart")
    ctl.reap_orphans()
    ledger = _ledger(kube)
    remapped = [a["remapped"] for a in ledger]
    assert len(remapped) == len(set(remapped)), f"duplicated allocation: {ledger}"
    by_owner = {(a["owner"], a["field"]): a["remapped"] for a in ledger}
    for n in names:
        st = kube.get("Configuration", "default", n)["status"]["remote"]["cidr"]
        assert [by_owner[(f"default/{n}", "pod")]] == st["pod"]
        assert [by_owner[(f"default/{n}", "external")]] == st["external"]
    assert ctl2.alive()


def test_leader_election_only_holder_acts_and_hands_over(kube, controllers):
    one = controllers(name="replica1")
    wait_for(lambda: one.metric("liqo_fabric_leader", cluster="a") == 1, 15, "replica1 leads")
    two = controllers(name="replica2")
    kube.create(configuration("lead1", pod="10.245.0.0/16"))
    wait_for(lambda: ready(kube, "Configuration", "default", "lead1"), 60, "lead1 Ready")
    lease = kube.get("Lease", "liqo", "liqo-fabric-controller")
    assert lease["spec"]["holderIdentity"] == "replica1"
    assert two.metric("liqo_fabric_leader", cluster="a") == 0
    assert two.metric("liqo_fabric_playbook_runs_total") == 0
    assert one.metric("liqo_fabric_playbook_runs_total") >= 1
    one.stop(signal.SIGKILL)  # no release: the standby must wait out the lease
    t0 = time.monotonic()
    wait_for(lambda: two.metric("liqo_fabric_leader", cluster="a") == 1, 20, "replica2 takes over")
    took = time.monotonic() - t0
    assert took >= 1.0, f"took over after {took:.1f} s, before the 3 s lease of a live-looking holder ran out"
    kube.create(configuration("lead2", pod="10.246.0.0/16"))
    wait_for(lambda: ready(kube, "Configuration", "default", "lead2"), 60, "lead2 Ready under replica2")
    assert two.metric("liqo_fabric_playbook_runs_total") >= 1
    assert kube.get("Lease", "liqo", "liqo-fabric-controller")["spec"]["holderIdentity"] == "replica2"
    one.reap_orphans()


# ----------------------------------------------------------------------------------------- engine semantics
def test_engine_degraded_coalescing_locks_finalizer_related(kube, controllers, engine_map):
    ctl = controllers("--watches", engine_map["path"], "--playbook-dir", PLAYBOOKS, "--no-state", name="engine")
    marker = engine_map["marker"]
    # failure: Degraded names the task and the field, the others are served
    kube.create(gateway_server("fail1"))
    kube.create(gateway_server("ok1", cluster_id="peer-ok"))
    wait_for(lambda: ready(kube, "GatewayServer", "default", "ok1"), 30, "ok1 Ready")
    deg = wait_for(lambda: (kube.condition("GatewayServer", "default", "fail1", "Degraded") or {}).get("status") == "True"
                   and kube.condition("GatewayServer", "default", "fail1", "Degraded"), 30, "fail1 Degraded")
    assert "Validate spec.mtu" in deg["message"] and "spec.mtu" in deg["message"], deg
    assert "test.liqo.io/cleanup" in kube.get("GatewayServer", "default", "ok1")["metadata"]["finalizers"]

    # coalescing: a burst of 8 edits within the debounce window -> far fewer runs than edits
    before = len([r for r in runs(marker) if r[1] == "ok1"])
    for i in range(8):
        kube.patch("GatewayServer", "default", "ok1", {"spec": {"mtu": 1300 + i}})
    wait_for(lambda: ready(kube, "GatewayServer", "default", "ok1",
                           generation=kube.get("GatewayServer", "default", "ok1")["metadata"]["generation"]),
             30, "ok1 Ready after the burst")
    time.sleep(1.0)
    burst_runs = len([r for r in runs(marker) if r[1] == "ok1"]) - before
    assert 1 <= burst_runs <= 3, f"{burst_runs} runs for 8 coalescable edits"

    # hash skip: resync (1 s) of unchanged objects starts nothing
    served = len([r for r in runs(marker) if r[1] != "fail1"])  # fail1 is retried with backoff, on purpose
    skipped = ctl.metric("liqo_fabric_reconcile_skipped_total", reason="hash")
    time.sleep(2.5)
    assert len([r for r in runs(marker) if r[1] != "fail1"]) == served
    assert ctl.metric("liqo_fabric_reconcile_skipped_total", reason="hash") > skipped

    # related kind: a PublicKey with the same remote-cluster-id enqueues the GatewayServer
    before = len([r for r in runs(marker) if r[1] == "ok1"])
    kube.create(public_key("pk-ok", "peer-ok"))
    wait_for(lambda: len([r for r in runs(marker) if r[1] == "ok1"]) > before, 20, "ok1 re-run for its PublicKey")

    # lock key: two slow objects on the same gateway host never run at the same time
    kube.create(gateway_server("slow1", cluster_id="s1"))
    kube.create(gateway_server("slow2", cluster_id="s2"))
    for n in ("slow1", "slow2"):
        wait_for(lambda n=n: ready(kube, "GatewayServer", "default", n), 30, f"{n} Ready")
    events = sorted((float(line[2]), line[0], line[1]) for p in ("start", "end") for line in runs(marker, p)
                    if not line[1].startswith("fail"))  # fail1 stops before its end line
    active = 0
    for event in events:
        active += 1 if event[1] == "start" else -1
        assert active <= 1, f"two runs at once under one lock key: {events}"

    # finalizer: delete -> teardown playbook (fabric_deleting true) -> finalizer removed -> object gone
    kube.delete("GatewayServer", "default", "slow1")
    wait_for(lambda: kube.get("GatewayServer", "default", "slow1") is None, 30, "slow1 deleted after teardown")
    teardown = runs(marker, "teardown")
    assert [t[1:3] for t in teardown] == [["slow1", "True"]], teardown
    kube.delete("GatewayServer", "default", "fail1")
    assert ctl.alive()


def test_engine_drift_repairs_deleted_route(kube, controllers, engine_map):
    ctl = controllers("--watches", engine_map["path"], "--playbook-dir", PLAYBOOKS, "--no-state", name="drift")
    kube.create(gateway_server("drift1", cluster_id="d1"))
    wait_for(lambda: ready(kube, "GatewayServer", "default", "drift1"), 30, "drift1 Ready")
    netns = engine_map["netns"]

    def has_route():
        out = subprocess.run(["ip", "-n", netns, "route", "show", "table", "18952"], capture_output=True, text=True,
                             check=False).stdout
        return "10.99.0.0/24" in out

    assert has_route()
    time.sleep(1.5)
    runs_before = len([r for r in runs(engine_map["marker"]) if r[1] == "drift1"])
    assert ctl.metric("liqo_fabric_drift_checks_total") >= 1
    assert ctl.metric("liqo_fabric_drift_detected_total") == 0  # nothing differs: no run
    subprocess.run(["ip", "-n", netns, "route", "del", "10.99.0.0/24", "table", "18952"], check=True)
    wait_for(has_route, 20, "route repaired by a drift-triggered run")
    assert ctl.metric("liqo_fabric_drift_detected_total") >= 1
    assert len([r for r in runs(engine_map["marker"]) if r[1] == "drift1"]) == runs_before + 1
    kube.delete("GatewayServer", "default", "drift1")
    wait_for(lambda: kube.get("GatewayServer", "default", "drift1") is None, 30, "drift1 deleted")


# ----------------------------------------------------------------------------------------- apiserver restart
def test_apiserver_restart_does_not_kill_the_controller(lab1, kube, controllers):
    ctl = controllers("--no-state", "--watch-timeout", "30")
    kube.create(configuration("rst1", pod="10.247.0.0/16"))
    wait_for(lambda: ready(kube, "Configuration", "default", "rst1"), 60, "rst1 Ready")
    srv = lab1["a"].apiserver
    srv.stop()
    time.sleep(2.0)
    assert ctl.alive(), ctl.log_tail()
    srv.start()   # new port, CA and token: the controller reloads the rewritten kubeconfig
    kube.create(configuration("rst2", pod="10.248.0.0/16"))
    wait_for(lambda: ready(kube, "Configuration", "default", "rst2"), 90, "rst2 Ready after the restart")
    assert ctl.alive()
    assert any(r.get("msg") == "kubeconfig reloaded" for r in ctl.logs())


def test_deploy_manifests_server_side_dry_run(lab1):
    """deploy/ (one kustomization: CRDs, RBAC, controller, node agent) is accepted by the apiserver (server-side
    dry run); tests/e2e/test_in_cluster.py installs it for real on a real-node lab."""
    kubectl = os.path.join(os.path.dirname(sys.executable), "kubectl")
    if not os.path.exists(kubectl):
        kubectl = "kubectl"
    out = subprocess.run([kubectl, "--kubeconfig", lab1["a"].kubeconfig, "apply", "--dry-run=server", "-k",
                          os.path.join(ROOT, "deploy")], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    for what in ("deployment.apps/liqo-fabric-controller", "daemonset.apps/liqo-fabric-node-agent",
                 "serviceaccount/liqo-fabric-controller", "clusterrole.rbac.authorization.k8s.io/liqo-fabric-controller"):
        assert what in out.stdout, out.stdout
