"""The check-mode plan carried from step to step (plugin_utils/check_plan.py) and the client's view of it
(Kube.assume); the whole flow is tests/e2e/test_check_plan.py."""
import os
import stat

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.kube import client as kube_client
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.keys import (
    CHECK_MODE_PRIVATE_KEY, CHECK_MODE_PUBLIC_KEY, generate_keypair, public_key)
from ansible_collections.liqo.fabric.plugins.plugin_utils import check_plan


def conf(name, ns="liqo-tenant-b", labels=None, **extra):
    return dict({"apiVersion": "networking.liqo.io/v1beta1", "kind": "Configuration",
                 "metadata": {"name": name, "namespace": ns, "labels": labels or {}}}, **extra)


@pytest.fixture
def kube(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "
                    "'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
                    "users: [{name: u, user: {token: t}}]\n")
    return kube_client.Kube(str(path))


def test_assumed_objects_are_read_without_asking_the_apiserver(kube):
    kube.assume([conf("b", spec={"x": 1}), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "liqo-tenant-b"}}])
    got = kube.get("Configuration", "liqo-tenant-b", "b")
    assert got["spec"] == {"x": 1}
    got["spec"]["x"] = 2  # a copy: the plan is not changed by its readers
    assert kube.get("Configuration", "liqo-tenant-b", "b")["spec"] == {"x": 1}
    assert kube.get("Namespace", None, "liqo-tenant-b")["metadata"]["name"] == "liqo-tenant-b"
    assert kube.assumed_namespace("liqo-tenant-b") and not kube.assumed_namespace("other")


def test_a_planned_deletion_reads_as_absent(kube):
    kube.assume([dict(conf("b"), absent=True)])
    assert kube.get("Configuration", "liqo-tenant-b", "b") is None


def test_label_selectors_of_the_plan():
    obj = conf("b", labels={"liqo.io/remote-cluster-id": "b", "x": "1"})
    assert kube_client.Kube._matches(obj, "liqo.io/remote-cluster-id=b")  # pylint: disable=protected-access
    assert kube_client.Kube._matches(obj, "liqo.io/remote-cluster-id=b,x=1")  # pylint: disable=protected-access
    assert not kube_client.Kube._matches(obj, "x=2")  # pylint: disable=protected-access
    assert kube_client.Kube._matches(obj, None)  # pylint: disable=protected-access


def test_the_run_store_is_per_cluster_newest_wins_and_owner_only(tmp_path, monkeypatch):
    monkeypatch.setattr(check_plan.C, "DEFAULT_LOCAL_TMP", str(tmp_path))
    a = check_plan.cluster_key({"kubeconfig": "/x/../a.kubeconfig"})
    b = check_plan.cluster_key({"kubeconfig": "/b.kubeconfig", "context": "ctx"})
    assert a == "/a.kubeconfig#" and b == "/b.kubeconfig#ctx"
    assert check_plan.assumed(a) == []
    check_plan.record(a, [conf("b", spec={"v": 1})])
    check_plan.record(a, [conf("b", spec={"v": 2}), conf("c")])
    check_plan.record(b, [conf("z")])
    check_plan.record(a, [{"kind": "Configuration"}, "junk"])  # nameless or not an object: not kept
    got = {o["metadata"]["name"]: o for o in check_plan.assumed(a)}
    assert set(got) == {"b", "c"} and got["b"]["spec"] == {"v": 2}
    assert [o["metadata"]["name"] for o in check_plan.assumed(b)] == ["z"]
    files = os.listdir(tmp_path)
    assert files == ["liqo-fabric-check-plan-%d.json" % os.getppid()]
    assert stat.S_IMODE(os.stat(tmp_path / files[0]).st_mode) == 0o600


def test_check_mode_keys_read_as_placeholders_and_real_keys_are_unaffected():
    assert public_key(CHECK_MODE_PRIVATE_KEY) == CHECK_MODE_PUBLIC_KEY
    private, public = generate_keypair()
    assert public_key(private) == public != CHECK_MODE_PUBLIC_KEY
