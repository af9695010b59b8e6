"""module_utils/api/storage_migration: what is written, in what order, and what is not, over an API that answers
as a kube-apiserver does (lists by page, 409 on a stale resourceVersion, 404, 422). The real apiserver and etcd:
tests/e2e/test_storage_migration.py."""
import copy

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.api import storage_migration as sm
from ansible_collections.liqo.fabric.plugins.module_utils.kube.rest import ApiError

CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd(plural, stored, storage="v1beta1", group="networking.liqo.io", strategy="None"):
    return {"metadata": {"name": "%s.%s" % (plural, group), "resourceVersion": "1"},
            "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": plural.title()},
                     "conversion": {"strategy": strategy},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": storage == "v1alpha1"},
                                  {"name": "v1beta1", "served": True, "storage": storage == "v1beta1"}]},
            "status": {"storedVersions": list(stored)}}


class FakeApi:
    """CRDs and objects in memory; `faults` maps (method, path) to the statuses of its next answers; objects in
    `stale` (keys) are refused (422) by a PUT through v1beta1 and stored valid by one through v1alpha1. Dry runs
    answer the same and change nothing."""

    def __init__(self, crds, objects, page=2, stale=()):
        self.crds = {c["metadata"]["name"]: c for c in crds}
        self.objects = objects       # path without version -> object
        self.stale = set(stale)
        self.faults = {}
        self.writes = []
        self.page = page

    def _fault(self, method, path):
        queue = self.faults.get((method, path))
        if queue:
            raise ApiError(queue.pop(0), "fault", {"message": "injected"}, method, path)

    def request(self, method, path, query=None, body=None, content_type="application/json"):
        self._fault(method, path)
        if path == CRD:
            return {"items": copy.deepcopy(list(self.crds.values()))}
        if path.startswith(CRD + "/"):
            name = path[len(CRD) + 1:].split("/")[0]
            if name not in self.crds:
                raise ApiError(404, "NotFound", {}, method, path)
            if method == "PUT":
                self.writes.append((method, path))
                self.crds[name] = copy.deepcopy(body)
            return copy.deepcopy(self.crds[name])
        parts = path.split("/")
        if method == "GET" and len(parts) == 5:   # /apis/group/version/plural: a list, in pages of self.page
            items = sorted(k for k in self.objects if k.split("/")[4] == parts[4])
            start = int((query or {}).get("continue") or 0)
            cont = str(start + self.page) if start + self.page < len(items) else None
            return {"items": [copy.deepcopy(self.objects[k]) for k in items[start:start + self.page]],
                    "metadata": {"continue": cont} if cont else {}}
        key = "/".join(parts[:3] + parts[5:])     # /apis/group/version/namespaces/ns/plural/name -> /apis/group/ns/...
        if key not in self.objects:
            raise ApiError(404, "NotFound", {}, method, path)
        if method == "PUT" and key in self.stale and parts[3] == "v1beta1":
            raise ApiError(422, "Invalid", {"message": "spec.remote.cidr.pod in body must be of type array"}, method, path)
        if method == "PUT" and (query or {}).get("dryRun") != "All":
            self.writes.append((method, path))
            self.stale.discard(key)
            self.objects[key]["metadata"]["resourceVersion"] = str(int(self.objects[key]["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(self.objects[key])


def key(plural, name):
    return "/apis/networking.liqo.io/ns/%s/%s" % (plural, name)


def objs(plural, *names):
    return {"/apis/networking.liqo.io/ns/%s/%s" % (plural, n): {"metadata": {"name": n, "namespace": "ns", "resourceVersion": "5"}}
            for n in names}


def fake(page=2):
    return FakeApi([crd("configurations", ["v1alpha1", "v1beta1"]), crd("connections", ["v1beta1"])],
                   {**objs("configurations", "a", "b", "c"), **objs("connections", "x")}, page=page)


def test_pending_crds_rewritten_through_the_storage_version_then_trimmed():
    api = fake()
    report = sm.migrate(api)
    assert [(e["name"], e["changed"], e["objects"], e["stored_versions"]) for e in report] == [
        ("configurations.networking.liqo.io", True, 3, ["v1beta1"]),
        ("connections.networking.liqo.io", False, 0, ["v1beta1"])]
    assert api.writes == [("PUT", "/apis/networking.liqo.io/v1beta1/namespaces/ns/configurations/%s" % n) for n in "abc"] + [
        ("PUT", CRD + "/configurations.networking.liqo.io/status")]
    api.writes.clear()
    assert not any(e["changed"] for e in sm.migrate(api)) and api.writes == []


def test_check_mode_counts_and_writes_nothing():
    api = fake()
    report = sm.migrate(api, check_mode=True)
    assert report[0]["objects"] == 3 and report[0]["stored_versions"] == ["v1beta1"] and api.writes == []
    assert sm.diff(report) == {"before": {"configurations.networking.liqo.io": ["v1alpha1", "v1beta1"]},
                               "after": {"configurations.networking.liqo.io": ["v1beta1"]}}


def test_a_list_that_fails_fails_before_any_write():
    api = fake()
    api.faults[("GET", "/apis/networking.liqo.io/v1beta1/configurations")] = [500]
    with pytest.raises(sm.MigrationError,
                       match=r"configurations.networking.liqo.io: cannot list its objects in v1beta1 \(nothing was written\)"):
        sm.migrate(api)
    assert api.writes == []


def test_a_lost_race_is_read_again_and_a_deleted_object_skipped():
    api = fake()
    base = "/apis/networking.liqo.io/v1beta1/namespaces/ns/configurations/"
    api.faults[("PUT", base + "a")] = [409]
    api.faults[("PUT", base + "b")] = [404]
    report = sm.migrate(api)
    assert report[0]["objects"] == 2 and report[0]["stored_versions"] == ["v1beta1"]
    assert api.writes.count(("PUT", base + "a")) == 1


def test_a_refused_object_names_it_and_the_crd_keeps_its_stored_versions():
    api = fake()
    api.faults[("PUT", "/apis/networking.liqo.io/v1beta1/namespaces/ns/configurations/b")] = [422]
    with pytest.raises(sm.MigrationError,
                       match=r"Configurations ns/b: rewrite through v1beta1 refused \(configurations.networking.liqo.io keeps"):
        sm.migrate(api)
    assert api.crds["configurations.networking.liqo.io"]["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]


def test_a_storage_version_changed_meanwhile_is_not_trimmed():
    api = fake()
    real = api.request

    def request(method, path, query=None, body=None, content_type="application/json"):
        if method == "PUT" and "/configurations/c" in path:  # the CRDs change while the objects are rewritten
            api.crds["configurations.networking.liqo.io"] = crd("configurations", ["v1alpha1", "v1beta1"], "v1alpha1")
        return real(method, path, query, body, content_type)
    api.request = request
    with pytest.raises(sm.MigrationError, match="storage version changed during the migration"):
        sm.migrate(api)
    assert api.crds["configurations.networking.liqo.io"]["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]


@pytest.mark.parametrize("names, message", [
    (["gateways.networking.liqo.io"], "crds[0]: 'gateways.networking.liqo.io' is not a CustomResourceDefinition"),
    (["connections.networking.liqo.io", "nope.networking.liqo.io"], "crds[1]: 'nope.networking.liqo.io'"),
])
def test_unknown_crd_names_are_refused_before_any_read_of_objects(names, message):
    api = fake()
    with pytest.raises(sm.MigrationError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        sm.migrate(api, names=names)
    assert api.writes == []


def test_named_crds_only():
    api = fake()
    report = sm.migrate(api, names=["connections.networking.liqo.io"])
    assert [e["name"] for e in report] == ["connections.networking.liqo.io"] and api.writes == []


def stale_fake(stored):
    """Configurations (strategy Webhook) b of which an older v1beta1 schema stored in a shape v1beta1 now refuses."""
    return FakeApi([crd("configurations", stored, strategy="Webhook"), crd("connections", ["v1beta1"])],
                   {**objs("configurations", "a", "b", "c"), **objs("connections", "x")},
                   stale=[key("configurations", "b")])


def test_objects_the_storage_version_refuses_are_repaired_through_the_other_version_then_left_alone():
    api = stale_fake(["v1beta1"])
    dry = sm.migrate(api, check_mode=True)
    assert (dry[0]["changed"], dry[0]["objects"], dry[0]["repaired"]) == (True, 1, 1) and api.writes == []
    report = sm.migrate(api)
    assert (report[0]["changed"], report[0]["objects"], report[0]["repaired"]) == (True, 1, 1)
    assert api.writes == [("PUT", "/apis/networking.liqo.io/v1alpha1/namespaces/ns/configurations/b")]
    api.writes.clear()
    assert not any(e["changed"] for e in sm.migrate(api)) and api.writes == []


def test_a_pending_crd_rewrites_the_refused_object_through_the_other_version():
    api = stale_fake(["v1alpha1", "v1beta1"])
    report = sm.migrate(api)
    assert (report[0]["objects"], report[0]["repaired"], report[0]["stored_versions"]) == (3, 1, ["v1beta1"])
    assert ("PUT", "/apis/networking.liqo.io/v1alpha1/namespaces/ns/configurations/b") in api.writes


def test_an_object_no_version_takes_fails_naming_it():
    api = stale_fake(["v1beta1"])
    api.faults[("PUT", "/apis/networking.liqo.io/v1alpha1/namespaces/ns/configurations/b")] = [422]
    with pytest.raises(sm.MigrationError, match="Configurations ns/b: rewrite through any served version refused"):
        sm.migrate(api)
    assert api.writes == []
