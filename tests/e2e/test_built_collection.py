"""What users install: the `ansible-galaxy collection build` tarball, installed into an empty collections path
with a Python venv holding only what the README's Installation section lists, runs `install` and `connect` on two
lab clusters (the playbooks by FQCN from the installed collection, never from this repository)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require_root
from tests.e2e.fabric import get
from tests.lab import Lab

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed")]


def readme_pip_line():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = text.split("<!-- runtime-requirements -->", 1)[1].split("```", 2)[1]
    line = next(ln for ln in block.splitlines() if "pip install" in ln)
    return re.findall(r"'[^']+'|\S+", line.split("pip install", 1)[1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, collections path) with the built collection installed from its tarball."""
    require_root()
    tmp = tmp_path_factory.mktemp("built")
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-galaxy"), "collection", "build",
                    "--output-path", str(tmp), ROOT], check=True, capture_output=True, timeout=300)
    tarball = next(tmp.glob("liqo-fabric-*.tar.gz"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # what the README lists, at the versions this suite pins (requirements-dev.txt as constraints)
    reqs = [r.strip("'") for r in readme_pip_line()]
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *reqs,
                           "-c", os.path.join(ROOT, "requirements-dev.txt")], capture_output=True, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    collections = tmp / "collections"
    collections.mkdir()
    (tmp / "none.cfg").write_text("[defaults]\n")  # not this repository's ansible.cfg (it points at build/)
    env = _env(venv, collections, tmp)
    proc = subprocess.run([str(venv / "bin" / "ansible-galaxy"), "collection", "install", str(tarball), "-p",
                           str(collections)], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed_dir = collections / "ansible_collections" / "liqo" / "fabric"
    assert (installed_dir / "MANIFEST.json").is_file() and not os.path.islink(installed_dir)
    assert not (installed_dir / "tests").exists() and not (installed_dir / "molecule").exists()
    return venv, collections, tmp


def _env(venv, collections, tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"PATH": "%s:%s" % (venv / "bin", env.get("PATH", "/usr/bin:/bin")),
                "ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_HOME": str(tmp / "ansible-home"),
                "ANSIBLE_CONFIG": str(tmp / "none.cfg"), "ANSIBLE_HOST_KEY_CHECKING": "False",
                "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"})
    return env


def playbook(installed, name, inventory=None, **extra):
    venv, collections, tmp = installed
    argv = [str(venv / "bin" / "ansible-playbook"), "liqo.fabric." + name, "-e", json.dumps(extra),
            "-e", json.dumps({"ansible_python_interpreter": str(venv / "bin" / "python")})]
    if inventory:
        argv[1:1] = ["-i", inventory]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(venv, collections, tmp), cwd=tmp, timeout=600,
                          check=False)
    assert proc.returncode == 0, "%s failed:\n%s\n%s" % (name, proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


def test_the_venv_has_only_the_readme_requirements(installed):
    venv, collections, tmp = installed
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    names = {p["name"].lower() for p in json.loads(out)}
    assert {"ansible-core", "pyroute2", "kubernetes"} <= names
    assert not names & {"ansible", "ansible-runner", "pytest", "netaddr", "molecule"}
    proc = subprocess.run([str(venv / "bin" / "ansible-doc"), "-t", "role", "liqo.fabric.gateway"], capture_output=True,
                          text=True, env=_env(venv, collections, tmp), check=True)
    assert str(collections) in proc.stdout and "gateway_state" in proc.stdout


def test_install_and_connect_from_the_installed_collection(installed):
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=1, pods_per_node=1) as lab:
        for cluster in (lab["a"], lab["b"]):
            playbook(installed, "install", kubeconfig=cluster.kubeconfig, pod_cidr=cluster.pod_cidr,
                     service_cidr=cluster.service_cidr, reserved=[cluster.underlay_cidr])
        proc = playbook(installed, "connect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                        remote_kubeconfig=lab["b"].kubeconfig, gateway_group="cluster_a_gateway",
                        remote_gateway_group="cluster_b_gateway", wait=True, wait_timeout=30)
        assert "failed=0" in proc.stdout
        for cluster in (lab["a"], lab["b"]):
            assert [c["status"]["value"] for c in get(cluster, "connections")] == ["Connected"]
