"""The collection's execution-environment metadata as ansible-builder uses it: `ansible-builder create` makes the build
context of an execution environment that installs the built collection, and that context's own introspection script
(what the image build runs after installing the collections) finds every line of the collection's requirements.txt
and bindep.txt. No container engine: `create` only writes the context, and the script runs here on an install of the
built tarball."""
import os
import shutil
import subprocess

import pytest
import yaml
from packaging.requirements import Requirement

from tests.ansible_run import ROOT, VENV_BIN, ansible_env


def lines(name):
    """The entries of a requirements or bindep file: no comments, no blank lines."""
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return [ln.split("#", 1)[0].strip() for ln in f if ln.split("#", 1)[0].strip()]


def test_metadata_names_the_two_files_and_they_hold_the_runtime_needs():
    meta = yaml.safe_load(open(os.path.join(ROOT, "meta", "execution-environment.yml"), encoding="utf-8"))
    assert meta["dependencies"] == {"python": "requirements.txt", "system": "bindep.txt"}
    python = {Requirement(ln).name: Requirement(ln) for ln in lines("requirements.txt")}
    # ranges, not the suite's pins; ansible-core is the environment's own
    assert {"pyroute2", "cryptography", "kubernetes", "ansible-runner", "prometheus-client"} <= set(python), python
    assert all(not str(r.specifier).startswith("==") for r in python.values()), python
    assert not {"ansible", "ansible-core"} & set(python)
    system = {ln.split()[0] for ln in lines("bindep.txt")}
    assert {"iproute2", "nftables", "wireguard-tools", "wireguard-go"} <= system, system
    assert all("[platform:" in ln for ln in lines("bindep.txt")), lines("bindep.txt")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The collection built by ansible-galaxy and installed from its tarball into a directory of its own."""
    tmp = tmp_path_factory.mktemp("ee")
    galaxy = os.path.join(VENV_BIN, "ansible-galaxy")
    proc = subprocess.run([galaxy, "collection", "build", "--output-path", str(tmp), ROOT], capture_output=True,
                          text=True, env=ansible_env(), check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tarball = next(tmp.glob("liqo-fabric-*.tar.gz"))
    installed = tmp / "installed"
    # the only collections path: otherwise the tree's own link (build/collections) counts as installed already
    proc = subprocess.run([galaxy, "collection", "install", "--offline", "-p", str(installed), str(tarball)],
                          capture_output=True, text=True, env=ansible_env({"ANSIBLE_COLLECTIONS_PATH": str(installed)}),
                          check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (installed / "ansible_collections" / "liqo" / "fabric" / "MANIFEST.json").is_file(), proc.stdout
    return tmp, tarball, installed


def test_ansible_builder_create_makes_a_context_whose_introspection_finds_the_collection_needs(built):
    tmp, tarball, installed = built
    builder = os.path.join(VENV_BIN, "ansible-builder")  # requirements-test.txt
    shutil.copy(tarball, tmp / "liqo-fabric.tar.gz")
    # a user's definition (schema version 3) whose only collection is this one, from the tarball beside it
    (tmp / "requirements.yml").write_text(yaml.safe_dump(
        {"collections": [{"name": "/build/collections/liqo-fabric.tar.gz", "type": "file"}]}))
    (tmp / "execution-environment.yml").write_text(yaml.safe_dump({
        "version": 3,
        "images": {"base_image": {"name": "quay.io/fedora/python-311:latest"}},
        "dependencies": {"ansible_core": {"package_pip": "ansible-core>=2.16"},
                         "ansible_runner": {"package_pip": "ansible-runner"},
                         "galaxy": "requirements.yml"},
        "additional_build_files": [{"src": "liqo-fabric.tar.gz", "dest": "collections"}],
    }, sort_keys=False))
    context = tmp / "context"
    proc = subprocess.run([builder, "create", "-f", str(tmp / "execution-environment.yml"), "-c", str(context),
                           "--output-filename", "Containerfile"], capture_output=True, text=True, check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile and "introspect" in containerfile, containerfile
    assert (context / "_build" / "collections" / "liqo-fabric.tar.gz").is_file()
    assert "liqo-fabric.tar.gz" in (context / "_build" / "requirements.yml").read_text()
    # what the image build runs once the collections are in: the context's own copy of the script
    introspect = context / "_build" / "scripts" / "introspect.py"
    pip_out, bindep_out = tmp / "requirements.out", tmp / "bindep.out"
    proc = subprocess.run([os.path.join(VENV_BIN, "python"), str(introspect), "introspect", "--write-pip",
                           str(pip_out), "--write-bindep", str(bindep_out), str(installed)], capture_output=True,
                          text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found_pip = pip_out.read_text().splitlines()
    found_bindep = bindep_out.read_text().splitlines()
    assert found_pip == [f"{ln}  # from collection liqo.fabric" for ln in lines("requirements.txt")], found_pip
    assert found_bindep == [f"{ln}  # from collection liqo.fabric" for ln in lines("bindep.txt")], found_bindep
