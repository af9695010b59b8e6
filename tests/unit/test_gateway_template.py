"""Gateway templates (plugins/module_utils/gateway/template.py) and the default templates in deploy/templates."""
import copy
import os
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

from ansible_collections.liqo.fabric.plugins.module_utils.gateway.template import (  # noqa: E402  pylint: disable=wrong-import-position
    TemplateError, render, render_gateway_template, render_string, template_data)
from controller.__main__ import parse_args  # noqa: E402  pylint: disable=wrong-import-position

SERVER = {
    "apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
    "metadata": {"name": "server", "namespace": "liqo-tenant-dry-paper", "uid": "1111-2222",
                 "labels": {"liqo.io/remote-cluster-id": "506f88d4-9918-4848-ab74-2a75ae32647f"}},
    "spec": {"endpoint": {"port": 51820, "serviceType": "NodePort", "nodePort": 0}, "mtu": 1340,
             "secretRef": {"name": "server-keys"},
             "serverTemplateRef": {"apiVersion": "networking.liqo.io/v1alpha1", "kind": "WgGatewayServerTemplate",
                                   "name": "wireguard-server", "namespace": "liqo"}},
}
CLIENT = {
    "apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayClient",
    "metadata": {"name": "client", "namespace": "default", "uid": "3333",
                 "labels": {"liqo.io/remote-cluster-id": "ef7a1f41-c753-4a0e-83e5-bed013e7fe4f"}},
    "spec": {"endpoint": {"addresses": ["10.42.3.54"], "port": 32133, "protocol": "UDP"}, "mtu": 1340},
    "status": {"secretRef": {"name": "client-keys", "namespace": "default"}},
}


def _load(name):
    with open(os.path.join(ROOT, "deploy", "templates", name), encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize("text, expected", [
    ("{{ .Name }}", "server"),
    ("{{.Namespace}}", "liqo-tenant-dry-paper"),
    ("{{ .Spec.Endpoint.Port }}", 51820),                 # whole placeholder keeps the type
    ("{{ .Spec.MTU }}", 1340),                            # Go field name, case-insensitive JSON key
    ("--mtu={{ .Spec.MTU }}", "--mtu=1340"),
    ("{{ .Name }}-{{ .GatewayUID }}", "server-1111-2222"),
    ("{{ .ClusterID }}", "506f88d4-9918-4848-ab74-2a75ae32647f"),
    ("{{ .SecretName }}", "server-keys"),
    ("{{ .Spec.Endpoint.LoadBalancerIP }}", ""),          # missing renders empty
    ("lb={{ .Spec.Endpoint.LoadBalancerIP }}", "lb="),
    ("{{ .Spec.Endpoint.NodePort }}", 0),
    ("{{ .Spec.ServerTemplateRef.Name }}", "wireguard-server"),
    ("no placeholder", "no placeholder"),
])
def test_render_string(text, expected):
    assert render_string(text, template_data(SERVER)) == expected


def test_index_lists_and_status_secret_fallback():
    data = template_data(CLIENT)
    assert render_string("{{ index .Spec.Endpoint.Addresses 0 }}", data) == "10.42.3.54"
    assert render_string("{{ index .Spec.Endpoint.Addresses 3 }}", data) == ""
    assert render_string("{{ .Spec.Endpoint.Addresses }}", data) == ["10.42.3.54"]
    assert render_string("a={{ .Spec.Endpoint.Addresses }}", data) == "a=10.42.3.54"
    assert render_string("{{ .SecretName }}", data) == "client-keys"


@pytest.mark.parametrize("text, words", [
    ("{{ .Nope }}", ["unknown value '.Nope'", ".Name"]),
    ("{{ if .Spec.MTU }}x{{ end }}", ["unsupported template expression"]),
    ("{{- .Name }}", ["unsupported"]),
    ("{{ .Name | upper }}", ["unsupported"]),
    ("x {{ .Spec }}", ["map cannot be embedded"]),
    ("{{ .Name }} }}", ["unbalanced"]),
    ("{{ .Name }} x }}", ["unbalanced"]),
])
def test_unsupported_or_unknown_expressions_fail_with_the_position(text, words):
    with pytest.raises(TemplateError) as err:
        render({"spec": {"containers": [{"args": [text]}]}}, SERVER)
    msg = str(err.value)
    assert msg.startswith("template.spec.containers[0].args[0]")
    for w in words:
        assert w in msg
    assert err.value.reason == "InvalidGatewayTemplate"


def test_optional_keys_and_forced_strings():
    tmpl = {
        "metadata": {"name": "{{ .Spec.MTU }}", "labels": {"mtu": "{{ .Spec.MTU }}", "n": 5}, "?annotations": "{{ .Annotations }}"},
        "ports": [{"port": "{{ .Spec.Endpoint.Port }}", "?nodePort": "{{ .Spec.Endpoint.NodePort }}",
                   "?loadBalancerIP": "{{ .Spec.Endpoint.LoadBalancerIP }}", "?type": "{{ .Spec.Endpoint.ServiceType }}"}],
        "replicas": 1,
        "flag": True,
    }
    out = render(tmpl, SERVER)
    assert out == {"metadata": {"name": "1340", "labels": {"mtu": "1340", "n": "5"}},
                   "ports": [{"port": 51820, "type": "NodePort"}], "replicas": 1, "flag": True}
    gw = copy.deepcopy(SERVER)
    gw["spec"]["endpoint"].update({"nodePort": 30316, "loadBalancerIP": "192.0.2.10"})
    gw["metadata"]["annotations"] = {"a": 1}
    out = render(tmpl, gw)
    assert out["ports"] == [{"port": 51820, "nodePort": 30316, "loadBalancerIP": "192.0.2.10", "type": "NodePort"}]
    assert out["metadata"]["annotations"] == {"a": "1"}


def test_render_does_not_mutate_its_inputs():
    tmpl = _load("wireguard-server.yaml")
    before_t, before_g = copy.deepcopy(tmpl), copy.deepcopy(SERVER)
    render_gateway_template(tmpl, SERVER)
    assert tmpl == before_t and SERVER == before_g


def assert_runs_the_engine_in_gateway_mode(container, kind, name, namespace):
    """The rendered container runs the image's engine, and the engine's own parser accepts its arguments."""
    assert container["command"] == ["python3", "-m", "controller"]
    args = parse_args(container["args"])
    assert (args.mode, args.gateway_kind, args.gateway_name, args.gateway_namespace) == ("gateway", kind, name, namespace)


def test_default_server_template_renders_service_and_deployment():
    out = render_gateway_template(_load("wireguard-server.yaml"), SERVER)
    assert "{{" not in yaml.safe_dump(out)
    svc = out["spec"]["service"]
    assert svc["metadata"]["name"] == "gw-server" and svc["metadata"]["namespace"] == "liqo-tenant-dry-paper"
    assert "annotations" not in svc["metadata"]
    assert svc["spec"]["type"] == "NodePort" and "loadBalancerIP" not in svc["spec"]
    assert svc["spec"]["ports"] == [{"name": "wireguard", "protocol": "UDP", "port": 51820, "targetPort": 51820}]
    dep = out["spec"]["deployment"]
    pod = dep["spec"]["template"]
    assert dep["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
    # The Service reaches only the active replica: the pod's labels plus the one the Lease holder sets.
    assert svc["spec"]["selector"] == {**pod["metadata"]["labels"], "networking.liqo.io/active": "true"}
    assert dep["spec"]["replicas"] == 2
    container = pod["spec"]["containers"][0]
    assert container["image"] == "docker.io/liqo-fabric/fabric:0.1.0" and container["imagePullPolicy"] == "IfNotPresent"
    assert_runs_the_engine_in_gateway_mode(container, "GatewayServer", "server", "liqo-tenant-dry-paper")
    assert container["ports"][0]["containerPort"] == 51820
    assert container["securityContext"] == {"privileged": True}
    assert out["metadata"]["labels"]["liqo.io/remote-cluster-id"] == "506f88d4-9918-4848-ab74-2a75ae32647f"


def test_default_server_template_with_node_port_and_load_balancer_ip():
    gw = copy.deepcopy(SERVER)
    gw["spec"]["endpoint"].update({"serviceType": "LoadBalancer", "nodePort": 30316, "loadBalancerIP": "192.0.2.10"})
    gw["spec"]["serviceAnnotations"] = {"lb.example/internal": "true"}
    svc = render_gateway_template(_load("wireguard-server.yaml"), gw)["spec"]["service"]
    assert svc["spec"]["type"] == "LoadBalancer" and svc["spec"]["loadBalancerIP"] == "192.0.2.10"
    assert svc["spec"]["ports"][0]["nodePort"] == 30316
    assert svc["metadata"]["annotations"] == {"lb.example/internal": "true"}


def test_default_client_template_renders_deployment():
    out = render_gateway_template(_load("wireguard-client.yaml"), CLIENT)
    assert "{{" not in yaml.safe_dump(out)
    assert "service" not in out["spec"]
    container = out["spec"]["deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert_runs_the_engine_in_gateway_mode(container, "GatewayClient", "client", "default")
    assert out["spec"]["deployment"]["metadata"]["namespace"] == "default"
    assert out["spec"]["secretRef"] == {"name": "client-keys"}


def test_template_without_spec_template():
    with pytest.raises(TemplateError) as err:
        render_gateway_template({"metadata": {"name": "broken"}, "spec": {}}, SERVER)
    assert "broken" in str(err.value)
