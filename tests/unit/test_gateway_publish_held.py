"""A held gateway (a refused change of a gateway built before) keeps its pods as last built: publishing it checks
what its template renders to (a server-side dry run) but applies nothing, and leaves its Connection alone; a ready
gateway's rendering is applied."""
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import api

TEMPLATE = {"spec": {"template": {"spec": {"deployment": {"metadata": {"name": "gw-client"},
                                                          "spec": {"replicas": 1}}}}}}


class Kube:
    def __init__(self):
        self.objects = {("GatewayClient", "default", "client"): {
            "metadata": {"namespace": "default", "name": "client", "uid": "u1"},
            "spec": {"mtu": 500, "clientTemplateRef": {"name": "wg", "namespace": "liqo"}}},
            ("WgGatewayClientTemplate", "liqo", "wg"): TEMPLATE}
        self.applied = []

    def get(self, kind, namespace, name):
        return self.objects.get((kind, namespace, name))

    def apply(self, obj, dry_run=False):
        self.applied.append((obj["kind"], dry_run))
        return True

    def replace_status(self, obj):
        pass


def plan(held):
    return {"kind": "GatewayClient", "namespace": "default", "name": "client", "held": held, "ready": not held,
            "status": {}, "connection_name": "client", "generation": 2,
            "error": {"reason": "InvalidMTU", "message": "spec.mtu: 500"} if held else None}


def test_a_held_gateways_manifests_are_checked_not_applied():
    kube = Kube()
    changed, error = api.publish(kube, plan(held=True), manifests="apply")
    assert error is None and kube.applied == [("Deployment", True)], kube.applied
    assert changed == []


def test_a_ready_gateways_manifests_are_applied():
    kube = Kube()
    connection = {"metadata": {"namespace": "default", "name": "client"}, "status": {}}
    kube.objects[("Connection", "default", "client")] = connection
    kube.patch = lambda *args, **kw: None
    api.publish(kube, dict(plan(held=False), role="client"), check_mode=False, manifests="apply")
    assert kube.applied == [("Deployment", False)], kube.applied
