"""module_utils/host/pod_netns.py on a real kernel: from a node's namespace, the pods attached to it are found by the
kernel's link to them, whether their namespace is named in /run/netns or only held by a process (containerd's
netns_mounts_under_state_dir, the real-node lab); a namespace not attached to this node is never returned, even
with the same address (the lab's overlapping pod CIDRs)."""
import os
import signal
import subprocess
import sys

import pytest

from tests.ansible_run import ROOT
from tests.lab import netns

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.host import pod_netns  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = pytest.mark.root


@pytest.fixture
def unnamed_pod():
    """A process alone in a namespace of its own that no /run/netns file names: (pid, its ns path)."""
    proc = subprocess.Popen(["unshare", "--net", "sleep", "300"])
    try:
        for _attempt in range(100):
            if os.readlink(f"/proc/{proc.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                break
            subprocess.run(["sleep", "0.05"], check=True)
        yield proc.pid
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(5)


def test_pods_are_found_by_their_link_named_or_not(netns_factory, unnamed_pod):
    node, named_pod, stranger = netns_factory("node", "pod", "other")
    netns.ip_batch([f"link add v-named netns {node} type veth peer name eth0 netns {named_pod}",
                    f"link add v-unnamed netns {node} type veth peer name eth0 netns {unnamed_pod}"])
    netns.ip_batch(["addr add 10.243.0.2/24 dev eth0", "link set eth0 up"], netns=named_pod)
    # the same address in a namespace not attached to the node: never the node's pod
    netns.ip_batch(["addr add 10.243.0.3/32 dev lo"], netns=stranger)
    subprocess.run(["nsenter", f"--net=/proc/{unnamed_pod}/ns/net", "ip", "addr", "add", "10.243.0.3/24", "dev",
                    "eth0"], check=True)
    subprocess.run(["nsenter", f"--net=/proc/{unnamed_pod}/ns/net", "ip", "link", "set", "eth0", "up"], check=True)

    wanted = ["10.243.0.2", "10.243.0.3", "10.243.0.9"]
    found = pod_netns.in_netns(f"/run/netns/{node}", lambda: pod_netns.pod_namespaces(wanted))
    assert found["10.243.0.2"] == f"/run/netns/{named_pod}"
    assert os.stat(found["10.243.0.3"]).st_ino == os.stat(f"/proc/{unnamed_pod}/ns/net").st_ino
    assert "10.243.0.9" not in found
    # and a command runs inside the unnamed pod's namespace, as pod_probe does
    code, out = pod_netns.run_in(found["10.243.0.3"], ["ip", "-4", "-o", "addr", "show", "dev", "eth0"], timeout=5)
    assert code == 0 and "10.243.0.3/24" in out
