"""The previous release of the collection, built once from this repository's history and cached, for upgrade tests:
a pair connected by it, then the current tree's playbooks run over it (tests/e2e/test_agentless_upgrade.py).

The tree of a commit (`git archive`, no work tree of the repository is touched) goes to
~/.cache/liqo-fabric/releases/<sha>/, with its own build/collections link and Ansible home as `make collection` makes
them; the next run finds it there. A clone without that commit (shallow) cannot build it: the tests skip saying so.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from tests.conftest import ROOT

# The previous release: main as it was released before the drift events, the server's peer-key trial and the
# refused MTUs (InvalidMTU) came. docs/upgrade.md lists what an upgrade from it changes. Another commit (an older
# release to upgrade from): LIQO_FABRIC_PREVIOUS_RELEASE=<commit>.
PREVIOUS = os.environ.get("LIQO_FABRIC_PREVIOUS_RELEASE") or "38f8e87"
# The last main whose v1beta1 Configuration took a CIDR string (the next one took Liqo's lists only): what it stored
# must be migrated by the next install (docs/upgrade.md).
BEFORE_CIDR_LISTS = "31de09e"
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "liqo-fabric", "releases")
READY = ".liqo-fabric-release"   # written last: a tree without it is a build that did not finish


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=False)


def collection(commit: str = PREVIOUS) -> str:
    """The root of the collection's tree at `commit` (built and cached at the first call)."""
    if not shutil.which("git"):
        pytest.skip("git is not installed: the previous release is built from the repository's history")
    found = _git("rev-parse", "--verify", "--quiet", commit + "^{commit}")
    if found.returncode != 0:
        pytest.skip(f"commit {commit} (the previous release) is not in this clone (shallow?): `git fetch --unshallow`")
    sha = found.stdout.strip()
    root = os.path.join(CACHE, sha)
    if os.path.isfile(os.path.join(root, READY)):
        return root
    os.makedirs(CACHE, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{sha[:12]}-", dir=CACHE)
    try:
        archive = subprocess.Popen(["git", "-C", ROOT, "archive", "--format=tar", sha], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", tmp], stdin=archive.stdout, check=True)
        archive.stdout.close()
        if archive.wait() != 0:
            raise AssertionError(f"git archive {sha} failed")
        link = os.path.join(tmp, "build", "collections", "ansible_collections", "liqo", "fabric")
        os.makedirs(os.path.dirname(link))
        os.symlink(root, link)   # the final path: the tree is renamed there below
        os.makedirs(os.path.join(tmp, "build", "ansible-home"))
        with open(os.path.join(tmp, READY), "w", encoding="utf-8") as f:
            f.write(sha + "\n")
        try:
            os.rename(tmp, root)
        except OSError:          # another worker built it first (or a build that did not finish is in the way)
            if not os.path.isfile(os.path.join(root, READY)):
                shutil.rmtree(root, ignore_errors=True)
                os.rename(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def environ(root: str) -> dict:
    """What a playbook run of the tree at `root` needs in its environment instead of the current tree's."""
    return {"ANSIBLE_COLLECTIONS_PATH": os.path.join(root, "build", "collections"),
            "ANSIBLE_HOME": os.path.join(root, "build", "ansible-home"),
            "ANSIBLE_CONFIG": os.path.join(root, "ansible.cfg")}
