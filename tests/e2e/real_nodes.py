"""The real-node lab of the kubelet-lab modules, and what they use on it: kubectl, and the residue a lab could leave.

Two clusters a and b, both pod CIDR 10.243.0.0/16, 3 nodes each (kubelets, containerd, the project's image in every
node), gateway hosts on the WAN. Bringing one up costs about a minute of both CPUs, so the modules in MODULES share
one: tests/e2e/conftest.py hands them to one worker, one after the other, and the last of them takes it down.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess

from tests.lab import Lab, cleanup, netns
from tests.lab.apiserver import kube_bin_dir
from tests.lab.images import images
from tests.lab.imagestore import seed_root

# the modules that share the lab, in the order they run: test_real_lab's last tests take the lab down
MODULES = ("test_in_cluster.py", "test_rolling_upgrade.py", "test_real_lab.py")
# real-node modules with a lab of their own, run on the same worker right after MODULES, once the shared lab is down
# (real-node labs come up one at a time per host: another worker would wait idle for the lock)
LATER = ("test_three_clusters.py",)


def kubectl_binary() -> str:
    """$KUBECTL, the installed kubectl, else the one hack/build-kube-apiserver.sh builds with the cluster."""
    return os.environ.get("KUBECTL") or shutil.which("kubectl") or os.path.join(kube_bin_dir(), "kubectl")


def kubectl(cluster, *args, check=True, input=None, timeout=60) -> subprocess.CompletedProcess:
    proc = subprocess.run([kubectl_binary(), "--kubeconfig", cluster.kubeconfig, *args], input=input, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _entries(path: str) -> list[str]:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def residue(lab) -> dict:
    """Everything of this lab that could outlive it, outside what it removes by name."""
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        cmd = cleanup._cmdline(int(pid))  # pylint: disable=protected-access
        if lab.workdir in cmd or lab.prefix in cmd:
            procs.append(cmd[:120])
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        mounts = [line.split()[4] for line in f if lab.prefix in line]
    return {
        "processes": sorted(procs), "mounts": sorted(mounts),
        "netns": [n for n in netns.list_netns() if n.startswith(lab.prefix)],
        "cgroups": sorted(g for g in glob.glob("/sys/fs/cgroup/*/*") if os.path.basename(g).startswith(lab.prefix)),
        "shim_sockets": _entries("/run/containerd/s"), "cni_cache": _entries("/var/lib/cni/results"),
        "pod_logs": _entries("/var/log/pods"), "container_logs": _entries("/var/log/containers"),
        "dirs": [d for d in (lab.workdir, os.path.join(cleanup.DISK_ROOT, lab.prefix)) if os.path.exists(d)],
    }


def assert_no_residue(after: dict, before: dict) -> None:
    """A real-node lab's zero-residue check once it is down: `after` its residue(), `before` the host's snapshot from
    before it came up (SharedLab.before)."""
    for key in ("processes", "mounts", "netns", "cgroups", "dirs"):
        assert after[key] == [], (key, after[key])
    for key in ("shim_sockets", "cni_cache", "container_logs"):
        assert set(after[key]) <= set(before[key]), (key, sorted(set(after[key]) - set(before[key])))
    assert set(after["pod_logs"]) <= set(before["pod_logs_host"]), \
        sorted(set(after["pod_logs"]) - set(before["pod_logs_host"]))


def new_lab() -> Lab:
    """The lab's shape, not yet up. The WAN is routed (tests/lab/wan.py): the path MTU between the gateway hosts can
    be lowered (test_in_cluster's spec.mtu auto)."""
    return Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=3, real_nodes=True, wan_routed=True)


def gateway_hosts_on_the_wan(cluster) -> None:
    """What a cloud gives a gateway host and the lab does not: its public (WAN) address where a remote reaches it
    (the node annotation the fabric reads, as it would read an ExternalIP) and the NAT of pod traffic leaving
    through that WAN (a CNI's ipMasq): the lab's nodes reach the WAN only from gateway hosts."""
    for node in cluster.gateway_nodes:
        kubectl(cluster, "annotate", "node", node.name, f"liqo.io/gateway-address={node.wan_ip.split('/')[0]}", "--overwrite")
        netns.run(["ip", "netns", "exec", node.netns, "iptables-nft", "-t", "nat", "-A", "POSTROUTING", "-s",
                   cluster.pod_cidr, "-o", "wan0", "-j", "MASQUERADE"])


def bring_up(lab: Lab) -> Lab:
    """The lab up (a real-node lab waits for any other on the host), gateway hosts on the WAN; down again on an error."""
    seed_root(images())  # the images of this work tree, in the containerd root every node starts from
    lab.up()
    try:
        for c in lab.clusters.values():
            gateway_hosts_on_the_wan(c)
    except BaseException:
        lab.down()
        raise
    return lab


class SharedLab:
    """The one lab of a worker's kubelet-lab modules: made by the first that asks, taken down after the last.
    `before` is the host's residue snapshot taken before the lab came up (what its zero-residue check compares)."""

    def __init__(self, shape=None):
        self.shape = shape or new_lab   # what get() brings up
        self.lab: Lab | None = None
        self.before: dict = {}

    def get(self) -> Lab:
        if self.lab is None:
            lab = self.shape()
            self.before = {**residue(lab), "pod_logs_host": _entries("/var/log/pods")}
            self.lab = bring_up(lab)
        return self.lab

    def release(self, request) -> None:
        """At a module's teardown: down, unless a later module of this session's run shares the lab."""
        items = request.session.items
        here = request.node.path
        last = max((i for i, item in enumerate(items) if item.path == here), default=len(items))
        if not any(item.path.name in MODULES and item.path != here for item in items[last + 1:]):
            self.down()

    def down(self) -> None:
        if self.lab is not None:
            self.lab.down()
            self.lab = None
