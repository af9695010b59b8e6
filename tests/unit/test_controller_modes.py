"""One image, one engine, three modes: the command line of each mode and the watch map's modes."""
import pytest

from controller import __main__ as cli
from controller import watchmap


def test_modes_parse():
    assert cli.parse_args([]).mode == "controller"
    assert cli.parse_args(["--mode", "node"]).mode == "node"
    args = cli.parse_args(["--mode=gateway", "--gateway-kind=GatewayServer", "--name=server", "--namespace=default"])
    assert (args.mode, args.gateway_kind, args.gateway_name, args.gateway_namespace) == (
        "gateway", "GatewayServer", "server", "default")
    with pytest.raises(SystemExit):
        cli.parse_args(["--mode", "server"])   # the old template's program: not a mode


@pytest.mark.parametrize("argv,message", [
    (["--mode", "gateway", "--name", "s", "--namespace", "d"], "--mode gateway needs --gateway-kind"),
    (["--mode", "gateway", "--gateway-kind", "GatewayClient"], "--mode gateway needs --name, --namespace"),
    (["--mode", "node"], "--mode node needs --node-name"),
    (["--node-mode"], "--mode node needs --node-name"),
])
def test_a_mode_without_its_arguments_exits_naming_them(argv, message, monkeypatch):
    for var in ("NODE_NAME", "POD_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert str(exc.value).startswith(message), str(exc.value)


def test_a_kind_appears_once_per_mode(tmp_path):
    (tmp_path / "a.yml").write_text("[]")
    (tmp_path / "b.yml").write_text("[]")
    entries = watchmap.parse([{"kind": "GatewayServer", "playbook": "a.yml", "modes": ["controller"]},
                              {"kind": "GatewayServer", "playbook": "b.yml", "modes": ["gateway"]}], str(tmp_path))
    assert [e.modes for e in entries] == [("controller",), ("gateway",)]
    with pytest.raises(watchmap.WatchMapError, match=r"watches\[1\].kind: GatewayServer appears twice for mode\(s\) \['gateway'\]"):
        watchmap.parse([{"kind": "GatewayServer", "playbook": "a.yml", "modes": ["controller", "gateway"]},
                        {"kind": "GatewayServer", "playbook": "b.yml", "modes": ["gateway"]}], str(tmp_path))


def test_a_gateway_pod_watches_its_services_load_balancer():
    """A GatewayServer switched to LoadBalancer: the pod's run that sees the Service change type comes before the
    load balancer's address; the Service's status is an input of the pod's key, so the address reruns it."""
    import os  # pylint: disable=import-outside-toplevel
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    entries = watchmap.load(os.path.join(root, "controller", "watches-in-cluster.yaml"), os.path.join(root, "playbooks"))
    svc = [e for e in entries if e.kind == "Service"]
    assert len(svc) == 1 and list(svc[0].modes) == ["gateway"], svc
    assert svc[0].key == "{cluster}/gateway-pod" and svc[0].label_selector == "networking.liqo.io/component=gateway"
    assert "status.loadBalancer" in svc[0].inputs and svc[0].playbook.endswith("/internal/gateway_pod.yml")
    assert watchmap.RESOURCES["Service"].plural == "services"


@pytest.mark.parametrize("argv,message", [
    (["--webhook-secret", "liqo/tls"], "--webhook-secret needs --webhook-cert and --webhook-key"),
    (["--webhook-secret", "tls", "--webhook-cert", "c", "--webhook-key", "k"], "--webhook-secret: 'tls' must be NAMESPACE/NAME"),
    (["--webhook-secret", "a/b/c", "--webhook-cert", "c", "--webhook-key", "k"], "--webhook-secret: 'a/b/c' must be NAMESPACE/NAME"),
])
def test_webhook_secret_flag_errors_name_it(argv, message):
    """--webhook-secret (in-cluster: the webhook's files follow their Secret, controller/webhook_sync.py)."""
    with pytest.raises(SystemExit) as exc:
        cli.start_webhook_sync(cli.parse_args(argv), {"local": None})
    assert str(exc.value) == message
    assert cli.start_webhook_sync(cli.parse_args([]), {"local": None}) is None


def test_webhook_secret_without_its_keys_is_named(tmp_path):
    from controller.webhook_sync import WebhookSecretSync  # pylint: disable=import-outside-toplevel

    class OneSecret:  # the one call the sync makes, answered as the apiserver does for a Secret without tls.key
        @staticmethod
        def get(kind, namespace, name):
            return {"kind": kind, "metadata": {"namespace": namespace, "name": name}, "data": {"tls.crt": "Qw=="}}
    sync = WebhookSecretSync(OneSecret(), "liqo", "tls", str(tmp_path / "c"), str(tmp_path / "k"))
    with pytest.raises(ValueError, match="Secret liqo/tls has no tls.crt and tls.key"):
        sync.sync_once()
    assert not (tmp_path / "c").exists()


def test_a_gateways_status_mtu_reaches_the_node_agents_and_the_gateway_pods():
    """spec.mtu auto: the active gateway pod's path watch writes status.mtu; every node agent's overlay links and the
    gateway pods' end of them take it. It is an input of both modes' gateway entries (a run follows), and a node
    agent re-points its overlay in process at once (NodeRepointFeature), on a change of status.mtu only."""
    import os  # pylint: disable=import-outside-toplevel
    import threading  # pylint: disable=import-outside-toplevel
    from controller import node_repoint  # pylint: disable=import-outside-toplevel
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    entries = watchmap.load(os.path.join(root, "controller", "watches-in-cluster.yaml"), os.path.join(root, "playbooks"))
    gateways = [e for e in entries if e.kind in ("GatewayServer", "GatewayClient") and set(e.modes) & {"node", "gateway"}]
    assert len(gateways) == 4 and all("status.mtu" in e.inputs for e in gateways), [(e.kind, e.modes) for e in gateways]

    class Cluster:
        name, kubeconfig = "a", None

    class Engine:
        clusters, stop = {"a": Cluster()}, threading.Event()
    feature = node_repoint.NodeRepointFeature(Engine(), "node-1")
    wanted = feature.repoint["a"].wanted
    old = {"metadata": {"name": "server"}, "spec": {"mtu": "auto"}, "status": {"mtu": {"value": 1312, "source": "probed"}}}
    new = dict(old, status={"mtu": {"value": 1232, "source": "probed"}})
    feature.on_event(Cluster(), "GatewayServer", "MODIFIED", dict(old, metadata={"name": "server", "generation": 2}), old)
    assert not wanted.is_set()                   # another change of the gateway: the playbook run's
    feature.on_event(Cluster(), "GatewayServer", "MODIFIED", new, old)
    assert wanted.is_set()
    wanted.clear()
    feature.on_event(Cluster(), "GatewayClient", "ADDED", new, None)
    assert wanted.is_set()


STOPS_ON_A_SIGNAL = r"""
import signal, sys, threading
from controller import __main__ as cli
done = cli.stop_event()
other = threading.Thread(target=threading.Event().wait, daemon=True)
other.start()
# the kernel may hand a process-wide SIGTERM to any thread: this one gets it
threading.Timer(0.3, lambda: signal.pthread_kill(other.ident, signal.SIGTERM)).start()
cli.wait_for_signal(done)
print("stopped", flush=True)
"""


def test_a_signal_delivered_to_another_thread_stops_the_main_wait():
    """SIGTERM handled by a thread other than the main one: Python runs the handler (which sets the stop event) in
    the main thread only, once its wait returns; the controller stops at once all the same."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    from tests.conftest import ROOT  # pylint: disable=import-outside-toplevel
    proc = subprocess.run([sys.executable, "-c", STOPS_ON_A_SIGNAL], cwd=ROOT, capture_output=True, text=True,
                          timeout=20, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "stopped", proc.stdout + proc.stderr
