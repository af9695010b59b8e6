"""The IPAM against the lab's real kube-apiservers.

Two lab clusters a and b, both with pod CIDR 10.243.0.0/16, go through the seeds' single-cluster flow:
install on both, generate each side's Configuration and apply it on the other with kubectl, run
roles/ipam (playbooks/reconcile_ipam.yml). Then: kubectl shows the desired and a remapped pod CIDR, a
second run changes nothing, check mode writes nothing, free remote CIDRs are kept, deletion releases, a
new process (and a lost ledger) hands out nothing twice, and errors are reported on the Configuration.
"""
import concurrent.futures
import ipaddress
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.module_utils.ipam import store as ipam_store
from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import GROUP, VERSION, Kube
from tests.ansible_run import ROOT, VENV_BIN, ansible_env
from tests.conftest import require_root
from tests.lab import Lab

pytestmark = pytest.mark.e2e

LOCAL_POD = "10.243.0.0/16"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
IPAM_ACTION = "liqo.fabric.ipam"


# ----------------------------------------------------------------------------------------------- helpers
def playbook(path, *args, check=False, diff=False):
    """ansible-playbook with the JSON callback: (rc, stats of localhost, the last liqo.fabric.ipam task result,
    the failed task results)."""
    argv = [os.path.join(VENV_BIN, "ansible-playbook"), path, *args]
    if check:
        argv.append("--check")
    if diff:
        argv.append("--diff")
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT, timeout=180,
                          env=ansible_env({"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"}))
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("ansible-playbook output is not JSON (rc %d): %s %s" % (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
    results = [t["hosts"]["localhost"] for play in out["plays"] for t in play["tasks"] if "localhost" in t["hosts"]]
    ipam = [r for r in results if r.get("action") == IPAM_ACTION]
    failed = [r for r in results if r.get("failed")]
    return proc.returncode, out["stats"]["localhost"], (ipam[-1] if ipam else None), failed


def reconcile_play(cluster, *extra, check=False, diff=False):
    args = ["-e", "kubeconfig=%s" % cluster.kubeconfig]
    for e in extra:
        args += ["-e", json.dumps(e)]
    return playbook(os.path.join(ROOT, "playbooks", "reconcile_ipam.yml"), *args, check=check, diff=diff)


def kubectl(cluster, *args, stdin=None):
    proc = subprocess.run([KUBECTL, "--kubeconfig", cluster.kubeconfig, *args], input=stdin, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, "kubectl %s: %s" % (" ".join(args), proc.stderr)
    return proc.stdout


_CLIENTS = {}


def kube(cluster):
    """One API client per cluster for the whole module (closed with the lab)."""
    if cluster.kubeconfig not in _CLIENTS:
        _CLIENTS[cluster.kubeconfig] = Kube(cluster.kubeconfig)
    return _CLIENTS[cluster.kubeconfig]


def conf_name(cluster):
    """The name of the cluster's generated Configuration: its friendly name (CLUSTER_NAME, which install wrote)."""
    return kube(cluster).cluster_identity()[1]


def ensure_namespace(k, name):
    k.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def create_conf(k, namespace, name, pod, external):
    body = {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Configuration",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"remote": {"cidr": {"pod": [pod], "external": [external]}}}}
    return k.create(body)


def delete_conf(k, namespace, name):
    k.delete("Configuration", namespace, name)


def ledger(k):
    cm = k.get("ConfigMap", ipam_store.LEDGER_NAMESPACE, ipam_store.LEDGER_NAME)
    return json.loads(cm["data"][ipam_store.LEDGER_KEY]), cm["metadata"]["resourceVersion"]


def allocations_by_key(state):
    return {(a["owner"], a["field"]): a for a in state["allocations"]}


def condition(conf):
    conds = [c for c in (conf.get("status") or {}).get("conditions") or [] if c["type"] == ipam_store.CONDITION]
    return conds[0] if conds else None


def local_nets(cluster):
    """Local CIDRs the IPAM must never hand out (the node network is passed to install as reserved)."""
    return [ipaddress.ip_network(c) for c in (cluster.pod_cidr, cluster.service_cidr, cluster.external_cidr,
                                              cluster.internal_cidr, cluster.underlay_cidr) if c]


def assert_disjoint_and_not_local(state, cluster):
    """No prefix of the ledger is handed out twice (or overlaps another), none overlaps a local CIDR."""
    nets = [(a["owner"], a["field"], ipaddress.ip_network(a["remapped"])) for a in state["allocations"]]
    for i, (o1, f1, n1) in enumerate(nets):
        for o2, f2, n2 in nets[:i]:
            assert not n1.overlaps(n2), "%s/%s %s overlaps %s/%s %s" % (o1, f1, n1, o2, f2, n2)
        for local in local_nets(cluster):
            assert not n1.overlaps(local), "%s/%s %s overlaps local %s" % (o1, f1, n1, local)


def local_config(cluster):
    """What roles/ipam passes to the IPAM for this lab cluster (read from liqo/liqo-fabric-network)."""
    return {"pod_cidrs": [cluster.pod_cidr], "service_cidr": cluster.service_cidr, "reserved": [cluster.underlay_cidr]}


def kubectl_configurations(cluster):
    """Rows of `kubectl get configurations.networking.liqo.io -A` as dicts keyed by the header columns."""
    lines = kubectl(cluster, "get", "configurations.networking.liqo.io", "-A").splitlines()
    cols = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", lines[0])]
    bounds = [start for start, dummy in cols[1:]] + [None]
    rows = []
    for line in lines[1:]:
        rows.append({name: line[start:end].strip() for (start, name), end in zip(cols, bounds)})
    return rows


# ----------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def lab():
    require_root()
    if not os.access(KUBECTL, os.X_OK):
        pytest.skip("kubectl is not installed")
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr=LOCAL_POD, nodes=1, pods_per_node=1) as the_lab:
        try:
            yield the_lab
        finally:
            while _CLIENTS:
                _CLIENTS.popitem()[1].close()


@pytest.fixture(scope="module")
def peered(lab):
    """The seeds' flow on both clusters; returns the first ipam run of each side and b's generated YAML.

    install.yml and generate_configuration.yml run for both clusters in one ansible-playbook process (a
    wrapper importing each playbook once per cluster: one interpreter start instead of four); the ipam
    role then runs as users run it, `ansible-playbook playbooks/reconcile_ipam.yml -e kubeconfig=...`,
    on both clusters at once."""
    a, b = lab["a"], lab["b"]
    tmp = tempfile.mkdtemp(prefix="lfab-ipam-")
    try:
        outputs = {c.name: os.path.join(tmp, "%s.yaml" % c.name) for c in (a, b)}
        wrapper = []
        for c in (a, b):
            wrapper.append({"ansible.builtin.import_playbook": os.path.join(ROOT, "playbooks", "install.yml"),
                            "vars": {"kubeconfig": c.kubeconfig, "pod_cidr": c.pod_cidr, "service_cidr": c.service_cidr,
                                     "reserved": [c.underlay_cidr]}})
        for c in (a, b):
            wrapper.append({"ansible.builtin.import_playbook": os.path.join(ROOT, "playbooks", "generate_configuration.yml"),
                            "vars": {"kubeconfig": c.kubeconfig, "output": outputs[c.name]}})
        path = os.path.join(tmp, "setup.yml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(wrapper, f)
        rc, stats, dummy, failed = playbook(path)
        assert rc == 0 and stats["failures"] == 0, failed
        kubectl(a, "apply", "-f", outputs["b"])
        kubectl(b, "apply", "-f", outputs["a"])
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = dict(zip(("a", "b"), pool.map(reconcile_play, (a, b))))
        with open(outputs["b"], encoding="utf-8") as f:
            generated_b = yaml.safe_load(f)
        yield {"runs": runs, "generated_b": generated_b}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------------------------- tests
def test_generated_configuration_describes_the_peer(lab, peered):
    conf = peered["generated_b"]
    b = lab["b"]
    assert conf["kind"] == "Configuration" and conf["apiVersion"] == "networking.liqo.io/v1beta1"
    assert conf["metadata"]["name"] == conf_name(b) == "b"  # the friendly name (the kubeconfig's name of b)
    assert conf["metadata"]["labels"]["liqo.io/remote-cluster-id"] == b.cluster_id
    assert conf["spec"]["remote"]["cidr"] == {"pod": [LOCAL_POD], "external": [b.external_cidr or "10.70.0.0/16"]}


def test_kubectl_shows_desired_and_remapped_pod_cidr(lab, peered):
    for name, peer in (("a", "b"), ("b", "a")):
        cluster = lab[name]
        rc, stats, result, failed = peered["runs"][name]
        assert rc == 0 and stats["changed"] >= 1, failed
        assert result["changed"] is True
        rows = [r for r in kubectl_configurations(cluster) if r["NAME"] == conf_name(lab[peer])]
        assert len(rows) == 1, kubectl_configurations(cluster)
        row = rows[0]
        assert row["DESIRED POD CIDR"] == LOCAL_POD
        remapped = ipaddress.ip_network(row["REMAPPED POD CIDR"])
        assert str(remapped) != LOCAL_POD and remapped.prefixlen == 16
        for local in local_nets(cluster):
            assert not remapped.overlaps(local), (remapped, local)
        conf = kube(cluster).get("Configuration", "default", conf_name(lab[peer]))
        assert conf["status"]["remote"]["cidr"]["pod"] == [str(remapped)]  # v1beta1: Liqo's list
        assert condition(conf)["status"] == "True" and condition(conf)["reason"] == "Allocated"
        assert result["allocations"]["default/%s" % conf_name(lab[peer])]["pod"] == str(remapped)
        state, dummy = ledger(kube(cluster))
        assert allocations_by_key(state)[("default/%s" % conf_name(lab[peer]), "pod")]["remapped"] == str(remapped)
        assert_disjoint_and_not_local(state, cluster)


def test_second_run_reports_no_change_and_writes_nothing(lab, peered):
    a = lab["a"]
    k = kube(a)
    state, rv = ledger(k)
    conf_rv = k.get("Configuration", "default", conf_name(lab["b"]))["metadata"]["resourceVersion"]
    rc, stats, result, failed = reconcile_play(a)
    assert rc == 0, failed
    assert stats["changed"] == 0 and result["changed"] is False and result["status_updated"] == []
    assert ledger(k) == (state, rv)
    assert k.get("Configuration", "default", conf_name(lab["b"]))["metadata"]["resourceVersion"] == conf_rv


def test_check_mode_writes_nothing_then_free_remote_cidr_is_kept(lab, peered):
    a = lab["a"]
    k = kube(a)
    ensure_namespace(k, "keep")
    create_conf(k, "keep", "k", "10.244.0.0/16", "10.72.0.0/16")  # overlaps nothing on a
    state, rv = ledger(k)

    rc, stats, result, failed = reconcile_play(a, check=True, diff=True)
    assert rc == 0, failed
    assert result["changed"] is True and stats["changed"] == 1
    assert result["status_updated"] == ["keep/k"]
    assert result["allocations"]["keep/k"] == {"pod": "10.244.0.0/16", "external": "10.72.0.0/16"}
    assert {"owner": "keep/k", "field": "pod", "original": "10.244.0.0/16", "remapped": "10.244.0.0/16"} \
        in result["diff"]["after"]["allocations"]
    assert ledger(k) == (state, rv)  # check mode: the ledger is untouched ...
    assert "status" not in k.get("Configuration", "keep", "k")  # ... and so is the status

    res = ipam_store.reconcile(k, local_config(a))
    assert res.changed and res.status_writes == ["keep/k"]
    conf = k.get("Configuration", "keep", "k")
    assert conf["status"]["remote"]["cidr"] == {"pod": ["10.244.0.0/16"], "external": ["10.72.0.0/16"]}
    assert condition(conf)["status"] == "True"
    after, dummy = ledger(k)
    assert allocations_by_key(after)[("keep/k", "pod")]["remapped"] == "10.244.0.0/16"
    # the peer's allocation did not move
    peer = "default/%s" % conf_name(lab["b"])
    assert allocations_by_key(after)[(peer, "pod")] == allocations_by_key(state)[(peer, "pod")]
    row = [r for r in kubectl_configurations(a) if r["NAME"] == "k"][0]
    assert row["DESIRED POD CIDR"] == row["REMAPPED POD CIDR"] == "10.244.0.0/16"


def test_deleting_a_configuration_releases_its_prefixes(lab, peered):
    a = lab["a"]
    k = kube(a)
    local = local_config(a)
    ensure_namespace(k, "rel")
    create_conf(k, "rel", "r1", LOCAL_POD, "10.70.0.0/16")  # both overlap local CIDRs: both remapped
    res = ipam_store.reconcile(k, local)
    first = res.allocations["rel/r1"]
    assert first["pod"] != LOCAL_POD and first["external"] != "10.70.0.0/16"
    assert k.get("Configuration", "rel", "r1")["status"]["remote"]["cidr"] == {f: [v] for f, v in first.items()}

    delete_conf(k, "rel", "r1")
    res = ipam_store.reconcile(k, local)
    assert res.changed
    assert sorted((r["owner"], r["field"], r["remapped"]) for r in res.released) == \
        sorted([("rel/r1", "pod", first["pod"]), ("rel/r1", "external", first["external"])])
    state, dummy = ledger(k)
    assert not [x for x in state["allocations"] if x["owner"] == "rel/r1"]
    assert not [x for x in state["allocations"] if x["remapped"] in first.values()]

    create_conf(k, "rel", "r2", LOCAL_POD, "10.70.0.0/16")
    res = ipam_store.reconcile(k, local)
    assert res.allocations["rel/r2"] == first  # the released prefixes are the first free ones again


def test_new_process_and_lost_ledger_hand_out_nothing_twice(lab, peered):
    a = lab["a"]
    k = kube(a)
    ensure_namespace(k, "restart")
    before, dummy = ledger(k)
    assert len(before["allocations"]) >= 4
    create_conf(k, "restart", "n1", LOCAL_POD, "10.70.0.0/16")
    rc, dummy, result, failed = reconcile_play(a)  # a new process that reads the ledger back
    assert rc == 0, failed
    after, dummy = ledger(k)
    old = allocations_by_key(before)
    new = allocations_by_key(after)
    assert {key: v for key, v in new.items() if key[0] != "restart/n1"} == old  # nobody moved
    given = {v["remapped"] for v in old.values()}
    assert new[("restart/n1", "pod")]["remapped"] not in given
    assert new[("restart/n1", "external")]["remapped"] not in given
    assert_disjoint_and_not_local(after, a)

    # the ledger is lost: the next process rebuilds it from the Configurations' status, moving nothing
    confs_rv = {(c["metadata"]["namespace"], c["metadata"]["name"]): c["metadata"]["resourceVersion"]
                for c in k.list("Configuration")}
    k.delete("ConfigMap", ipam_store.LEDGER_NAMESPACE, ipam_store.LEDGER_NAME)
    fresh = Kube(a.kubeconfig)  # a fresh client: nothing cached
    try:
        res = ipam_store.reconcile(fresh, local_config(a))
    finally:
        fresh.close()
    assert res.status_writes == [] and res.errors == {}
    rebuilt, dummy = ledger(k)
    assert allocations_by_key(rebuilt) == new
    assert {(c["metadata"]["namespace"], c["metadata"]["name"]): c["metadata"]["resourceVersion"]
            for c in k.list("Configuration")} == confs_rv


def test_errors_are_reported_on_the_configuration_and_allocate_nothing(lab, peered):
    a = lab["a"]
    k = kube(a)
    ensure_namespace(k, "err")
    create_conf(k, "err", "exhausted", LOCAL_POD, "10.74.0.0/16")  # needs a remap; the tiny pool is full
    create_conf(k, "err", "tiny", "10.99.0.0/31", "10.75.0.0/16")  # a /31 cannot be a remote pod CIDR
    before, dummy = ledger(k)
    try:
        rc, dummy, result, failed = reconcile_play(a, {"ipam_namespace": "err", "ipam_pools": [LOCAL_POD]})
        assert rc != 0 and result["failed"]
        msg = result["msg"]
        assert "err/exhausted: spec.remote.cidr.pod: '10.243.0.0/16' overlaps local pod_cidrs[0]" in msg
        assert "no free /16 is left in pools 10.243.0.0/16" in msg
        assert "err/tiny: spec.remote.cidr.pod: '10.99.0.0/31' has an invalid size" in msg
        assert result["errors"]["err/exhausted"]["reason"] == "PoolsExhausted"
        assert result["errors"]["err/tiny"]["reason"] == "InvalidCIDRSize"
        for name, reason, words in (("exhausted", "PoolsExhausted", "'10.243.0.0/16'"), ("tiny", "InvalidCIDRSize", "'10.99.0.0/31'")):
            conf = k.get("Configuration", "err", name)
            cond = condition(conf)
            assert cond["status"] == "False" and cond["reason"] == reason
            assert "spec.remote.cidr.pod" in cond["message"] and words in cond["message"]
            assert "remote" not in conf["status"]
        state, dummy = ledger(k)
        assert not [x for x in state["allocations"] if x["owner"].startswith("err/")]  # not even the free externals
        # a run limited to one namespace leaves the other namespaces' allocations alone
        assert state["allocations"] == before["allocations"] and len(before["allocations"]) >= 6
    finally:
        for name in ("exhausted", "tiny"):  # later runs use the default pools and would serve them
            delete_conf(k, "err", name)


def test_pool_too_small_names_the_pool_the_size_and_the_configuration(lab, peered):
    """A peer's valid /16 with only a /24 pool: the pool is at fault, not the Configuration. The peer's
    allocation in use stays, in the ledger and in its status: a refused setting takes no connection down."""
    a = lab["a"]
    k = kube(a)
    ensure_namespace(k, "err-pool")
    create_conf(k, "err-pool", "peer", LOCAL_POD, "10.77.0.0/24")
    try:
        reconcile_play(a, {"ipam_namespace": "err-pool"})   # served with the default pools
        served = k.get("Configuration", "err-pool", "peer")["status"]["remote"]
        rc, dummy, result, failed = reconcile_play(a, {"ipam_namespace": "err-pool", "ipam_pools": ["10.0.0.0/24"]})
        assert rc != 0 and result["failed"]
        assert ("err-pool/peer: pools 10.0.0.0/24 too small: spec.remote.cidr.pod '10.243.0.0/16' needs a free /16, "
                "the largest pool is a /24") in result["msg"], result["msg"]
        assert "invalid size" not in result["msg"]
        assert result["errors"]["err-pool/peer"]["reason"] == "PoolTooSmall"
        conf = k.get("Configuration", "err-pool", "peer")
        cond = condition(conf)
        assert cond["status"] == "False" and cond["reason"] == "PoolTooSmall" and "10.0.0.0/24" in cond["message"]
        kept = {f: v[0] for f, v in served["cidr"].items()}
        assert conf["status"]["remote"] == served and result["errors"]["err-pool/peer"]["kept"] == kept
        assert cond["message"].endswith("; the allocation in use is kept (pod %s, external %s)"
                                        % (kept["pod"], kept["external"])), cond["message"]
        state, dummy = ledger(k)
        assert sorted(x["remapped"] for x in state["allocations"] if x["owner"] == "err-pool/peer") == sorted(kept.values())
    finally:
        delete_conf(k, "err-pool", "peer")
        reconcile_play(a, {"ipam_namespace": "err-pool"})  # the ledger records the pools: back to the defaults


def test_local_cidr_overlapping_a_reserved_one_fails_and_allocates_nothing(lab, peered):
    a = lab["a"]
    k = kube(a)
    ensure_namespace(k, "err-local")
    create_conf(k, "err-local", "w", "10.246.0.0/16", "10.76.0.0/16")
    state, rv = ledger(k)
    rc, dummy, result, failed = reconcile_play(a, {"ipam_namespace": "err-local", "ipam_reserved": ["10.243.128.0/17"]})
    assert rc != 0 and result["failed"]
    assert result["msg"] == "pod_cidrs[0]: '10.243.0.0/16' overlaps reserved[0] '10.243.128.0/17'"
    assert ledger(k) == (state, rv)
    conf = k.get("Configuration", "err-local", "w")
    assert "remote" not in conf["status"]
    cond = condition(conf)
    assert cond["status"] == "False" and cond["reason"] == "LocalCIDROverlap"
    assert cond["message"] == result["msg"]
    # fixed configuration: served on the next run
    ipam_store.reconcile(k, local_config(a), namespace="err-local")
    conf = k.get("Configuration", "err-local", "w")
    assert conf["status"]["remote"]["cidr"]["pod"] == ["10.246.0.0/16"] and condition(conf)["status"] == "True"


def test_missing_kubeconfig_is_named_in_the_message(tmp_path):
    missing = str(tmp_path / "nope" / "kubeconfig")
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"block": [{"name": "role", "ansible.builtin.import_role": {"name": "liqo.fabric.ipam"}, "vars": {"kubeconfig": missing}}],
         "rescue": [{"name": "rescued", "ansible.builtin.debug": {"msg": "role failed"}}]},
        {"name": "module", "liqo.fabric.ipam": {"kubeconfig": missing, "pod_cidrs": [LOCAL_POD]}, "ignore_errors": True},
    ]}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    rc, stats, result, failed = playbook(str(path))
    assert stats["failures"] == 0 and stats["rescued"] == 1 and stats["ignored"] == 1
    role_msg, module_msg = (f["msg"] for f in failed)
    assert role_msg == "kubeconfig: '%s' does not exist or is not a file" % missing
    assert module_msg == "kubeconfig '%s': no such file" % missing
    assert result["failed"] and result["action"] == IPAM_ACTION
