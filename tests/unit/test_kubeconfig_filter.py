"""The playbooks' clusters (filters liqo.fabric.kubeconfig and kubeconfig_errors): -e kubeconfig, else the environment
as the modules read it; the remote cluster only from -e remote_kubeconfig; one message per wrong input."""
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.liqo.fabric.plugins.filter.kubeconfig import kubeconfig, kubeconfig_errors


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(os.environ):
        if name.startswith("K8S_AUTH_") or name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("a", "b"):
        (tmp_path / name).write_text("{}")
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("given,env,expected", [
    ("x", {"K8S_AUTH_KUBECONFIG": "a"}, "x"),  # -e kubeconfig wins
    (None, {"K8S_AUTH_KUBECONFIG": "a", "KUBECONFIG": "b"}, "a"),
    (None, {"K8S_AUTH_HOST": "https://h", "KUBECONFIG": "b"}, None),  # the modules read K8S_AUTH_HOST themselves
    ("", {"KUBECONFIG": "a:b"}, "a:b"),
])
def test_kubeconfig_is_the_given_one_else_the_environments(monkeypatch, given, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert kubeconfig(given) == expected


def test_kubeconfig_without_any_cluster_names_every_place_looked_at():
    with pytest.raises(AnsibleFilterError, match=r"^no cluster given: no -e kubeconfig=PATH, K8S_AUTH_KUBECONFIG, "
                                                 r"K8S_AUTH_HOST or KUBECONFIG, no ~/.kube/config, and not running"):
        kubeconfig(None)


MISSING_LOCAL = ("kubeconfig: missing (-e kubeconfig=PATH%s), and the environment gives no cluster (no "
                 "K8S_AUTH_KUBECONFIG, K8S_AUTH_HOST or KUBECONFIG, no ~/.kube/config, not a pod with a service account)")
MISSING_REMOTE = ("remote_kubeconfig: missing (-e remote_kubeconfig=PATH, the remote cluster: the K8S_AUTH_* variables, "
                  "KUBECONFIG and ~/.kube/config give one cluster, the local one)")
LEAK = ("K8S_AUTH_API_KEY, K8S_AUTH_CONTEXT: set, and the modules would apply them to remote_kubeconfig's cluster too "
        "(the K8S_AUTH_* variables stand for one cluster): give the local cluster's credentials and context in a "
        "kubeconfig (-e kubeconfig=PATH or K8S_AUTH_KUBECONFIG) and unset them")


@pytest.mark.parametrize("given,remote_kubeconfig,remote,env,expected", [
    # one cluster
    ("a", None, "none", {}, []),
    (None, None, "none", {"K8S_AUTH_KUBECONFIG": "a"}, []),
    (None, None, "none", {"K8S_AUTH_HOST": "https://h", "K8S_AUTH_API_KEY": "t"}, []),
    (None, None, "none", {}, [MISSING_LOCAL % ""]),
    ("nope", None, "none", {}, ["kubeconfig: nope is not a file"]),
    ("a:nope", None, "none", {}, ["kubeconfig: a:nope is not a file"]),
    (None, None, "none", {"K8S_AUTH_KUBECONFIG": "nope"}, ["kubeconfig: nope (K8S_AUTH_KUBECONFIG) is not a file"]),
    (None, None, "none", {"KUBECONFIG": "a:nope"}, ["kubeconfig: a:nope (KUBECONFIG) is not a file"]),
    # two clusters: the environment gives the local one only
    (None, "b", "required", {"K8S_AUTH_KUBECONFIG": "a"}, []),
    (None, "b", "required", {"K8S_AUTH_HOST": "https://h", "K8S_AUTH_CERT_FILE": "c"}, []),
    (None, None, "required", {"K8S_AUTH_KUBECONFIG": "a"}, [MISSING_REMOTE]),
    (None, None, "optional", {"K8S_AUTH_KUBECONFIG": "a"}, []),
    (None, None, "required", {}, [MISSING_LOCAL % ", the local cluster", MISSING_REMOTE]),
    ("a", "nope", "optional", {}, ["remote_kubeconfig: nope is not a file"]),
    ("a", "a", "required", {}, ["kubeconfig and remote_kubeconfig: both are a, connect needs two different clusters"]),
    (None, "a", "required", {"K8S_AUTH_KUBECONFIG": "a"},
     ["kubeconfig and remote_kubeconfig: both are a, connect needs two different clusters"]),
    (None, "b", "required", {"K8S_AUTH_HOST": "https://h", "K8S_AUTH_API_KEY": "t", "K8S_AUTH_CONTEXT": "c"}, [LEAK]),
    ("a", "b", "optional", {"K8S_AUTH_CONTEXT": "c"}, [LEAK.replace("K8S_AUTH_API_KEY, ", "").replace("them", "it")]),
    ("a", None, "optional", {"K8S_AUTH_API_KEY": "t"}, []),  # no remote cluster to send it to
])
def test_kubeconfig_errors(monkeypatch, given, remote_kubeconfig, remote, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert kubeconfig_errors(given, remote_kubeconfig, remote=remote, command="connect") == expected


def test_kubeconfig_errors_refuses_an_unknown_remote_mode():
    with pytest.raises(AnsibleFilterError, match="remote is none, optional or required"):
        kubeconfig_errors("a", remote="yes")
