"""Real lab nodes: containerd, kubelet and kube-proxy inside each lab node's netns (LabCluster(real_nodes=True)).

Per node (plan = tests.lab.topology.NodePlan), everything named after the node's netns `<prefix>-<cluster>-n<i>`:
- processes started with `nsenter --net=/run/netns/<netns>` (network namespace only: `ip netns exec` would
  remount /sys and hide the cgroup hierarchies from the kubelet), each stopped by its PID;
- state under <lab state dir>/<cluster>/<netns> (sockets, kubelet root, CNI and IPAM state, network
  namespaces of pods: containerd's netns_mounts_under_state_dir), image content and snapshots under
  DISK_ROOT/<prefix>/<netns>;
- cgroup parent /<netns> in every hierarchy (kubelet cgroupRoot, made by the lab; the kubelet's QoS cgroups
  and every pod of the node live below it: /<netns>/kubepods/...), which is how teardown finds and stops
  the containers even after a crash. Its CPU weight is that of the machine's CPUs (node_cpu_weight): by default a
  cgroup weighs as much as one process, so every pod of a node together would get the CPU share of a single
  process of the host (an iperf3, a wireguard-go thread of an agentless gateway) when the CPUs are busy;
- CNI: a bridge `kbr0` (not the light lab's cni0) + host-local with the node's slice of the cluster's pod
  CIDR, network name = the netns name; routes to the other nodes' slices are the lab's host-gw routes;
- kube-proxy in iptables mode (Debian's iptables-nft; its rules die with the netns), masquerading all
  Service traffic so a pod reaches a Service backend on its own bridge;
- the images of tests.lab.images in the node's containerd before the kubelet starts (a hard-linked copy of a
  cached containerd root holding them: tests.lab.imagestore).
Nodes register themselves (the lab never writes a Node object: kubelet 1.20 panics on one without
capacity); the lab then sets spec.podCIDR to the node's slice and waits until every node is Ready.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import subprocess
import time

import yaml

from tests.lab import cleanup, imagestore, interrupts, netns, switch
from tests.lab.apiserver import _stop_pid, _tail, kube_bin_dir, spawn_recorded
from tests.lab.images import images
from tests.lab.kube import GATEWAY_LABEL
from tests.lab.topology import NodePlan

DISK_ROOT = cleanup.DISK_ROOT
CNI_BIN_DIR = "/usr/lib/cni"
CNI_BRIDGE = "kbr0"
SHARED_PATHS = ("/var/log/pods", "/var/log/containers", "/var/lib/cni")


def node_cpu_weight(cgroup: str) -> None:
    """A lab node's cgroup weighs what the machine's CPUs do (a node stands for a machine): cpu.shares 1024 per CPU
    (cgroup v1, the weight the kubelet gives kubepods for that many CPUs) or cpu.weight 100 per CPU (v2)."""
    cpus = os.cpu_count() or 1
    for path, value in ((os.path.join(cleanup.CGROUP_ROOT, "cpu", cgroup.lstrip("/"), "cpu.shares"), 1024 * cpus),
                        (os.path.join(cleanup.CGROUP_ROOT, cgroup.lstrip("/"), "cpu.weight"), min(100 * cpus, 10000))):
        if os.path.exists(path):
            with open(path, "w", encoding="ascii") as f:
                f.write(str(value))


class RealNodeError(RuntimeError):
    pass


def _write(path: str, text: str, mode: int = 0o600) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)


class RealNode:
    """containerd + kubelet + kube-proxy of one lab node."""

    def __init__(self, plan: NodePlan, cluster_dir: str, prefix: str, pod_cidr: str, node_kubeconfig: str):
        self.plan = plan
        self.dir = os.path.join(cluster_dir, plan.netns)
        self.disk = os.path.join(DISK_ROOT, prefix, plan.netns)
        self.cgroup = "/" + plan.netns
        self.pod_cidr = pod_cidr
        self.node_kubeconfig = node_kubeconfig
        self.sock = os.path.join(self.dir, "containerd.sock")
        self.pids: dict[str, int] = {}
        self.start_times: dict[str, int] = {}  # role -> start time of pids[role] (its identity: PIDs are recycled)
        self.timings: dict[str, float] = {}
        # set by RealNodes, as LabCluster sets them on its ApiServer
        self.lab_dir: str | None = None
        self.cancel = None
        self.on_spawn = None

    # -- configuration -----------------------------------------------------------------------------
    def _configure(self, img: dict) -> None:
        for d in (self.dir, self.disk, os.path.join(self.dir, "cni"), os.path.join(self.dir, "kubelet")):
            os.makedirs(d, mode=0o700, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        _write(os.path.join(self.dir, "containerd.toml"), f"""version = 2
root = "{self.disk}/root"
state = "{self.dir}/containerd"
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{self.disk}/opt"
[{cri}]
  sandbox_image = "{img['tiny']['name']}"
  # this sandbox denies lowering oom_score_adj: without it every sandbox fails in runc create
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self.dir}/cni"
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        Root = "{self.dir}/runc"
        SystemdCgroup = false
""")
        _write(os.path.join(self.dir, "cni", "10-lab.conflist"), json.dumps({
            "cniVersion": "0.4.0", "name": self.plan.netns, "plugins": [{
                "type": "bridge", "bridge": CNI_BRIDGE, "isGateway": True, "isDefaultGateway": True,
                "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": self.plan.pod_cidr}]],
                         "dataDir": os.path.join(self.dir, "ipam")}}]}, indent=1), 0o644)
        _write(os.path.join(self.dir, "kubelet.yaml"), yaml.safe_dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": self.plan.underlay_ip, "readOnlyPort": 0,
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs", "cgroupsPerQOS": True, "cgroupRoot": self.cgroup,
            "enforceNodeAllocatable": [], "failSwapOn": False, "resolvConf": "",
            "volumePluginDir": os.path.join(self.dir, "volume-plugins"),
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99, "serializeImagePulls": False,
            "nodeStatusUpdateFrequency": "5s"}))
        _write(os.path.join(self.dir, "kube-proxy.yaml"), yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": self.node_kubeconfig}, "hostnameOverride": self.plan.name,
            "bindAddress": "0.0.0.0", "clusterCIDR": self.pod_cidr, "mode": "iptables",
            "iptables": {"masqueradeAll": True, "syncPeriod": "30s", "minSyncPeriod": "0s"},
            "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
            "oomScoreAdj": 0,
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"}}))

    @property
    def mntns(self) -> str:
        return os.path.join(self.dir, "ns", "mnt")

    def _mount_namespace(self) -> None:
        """The node's mount namespace (slave of the host's: host mounts still appear in it), kept by a bind
        mount of its ns file, where the paths every kubelet and containerd would share are the node's own:
        /var/log/pods and /var/log/containers (a kubelet deletes the log directories of pods it does not
        know: another node's) and /var/lib/cni (CNI result caches). Its mounts (container rootfs, volumes,
        pods' netns) vanish with it: nothing to find on the host after teardown."""
        nsdir = os.path.dirname(self.mntns)
        os.makedirs(nsdir, mode=0o700, exist_ok=True)
        netns.run(["mount", "--bind", nsdir, nsdir])
        netns.run(["mount", "--make-private", nsdir])
        open(self.mntns, "w").close()  # pylint: disable=consider-using-with,unspecified-encoding
        binds = []
        for target in SHARED_PATHS:
            own = os.path.join(self.dir, "host" + target.replace("/", "-"))
            os.makedirs(own, mode=0o755, exist_ok=True)
            os.makedirs(target, mode=0o755, exist_ok=True)
            binds.append(f"mount --bind {own} {target}")
        netns.run(["unshare", f"--mount={self.mntns}", "--propagation", "slave", "sh", "-ec", "; ".join(binds)])

    def _spawn(self, role: str, argv: list[str]) -> None:
        interrupts.check(self.cancel, f"{self.plan.name}: starting {role}")
        spawn_recorded(self, role, ["nsenter", f"--mount={self.mntns}", f"--net=/run/netns/{self.plan.netns}", *argv],
                       os.path.join(self.dir, f"{role}.log"))

    def processes(self) -> list[dict]:
        """This node's processes: role, pid and start time, for the lab's state file."""
        times = dict(self.start_times)
        return [{"role": f"{self.plan.name}/{role}", "pid": pid, "start_time": times.get(role)}
                for role, pid in list(self.pids.items())]

    def ctr(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        """`ctr` against this node's containerd, namespace k8s.io (the CRI's)."""
        return netns.run(["ctr", "-a", self.sock, "-n", "k8s.io", *args], check=check, timeout=timeout)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """containerd, the images, then kubelet and kube-proxy. Returns before the node registers."""
        t0 = time.monotonic()
        img = images()
        bindir = kube_bin_dir()
        self._configure(img)
        self._mount_namespace()
        for hierarchy in os.listdir(cleanup.CGROUP_ROOT):  # the kubelet wants its cgroupRoot to exist
            if os.path.isfile(os.path.join(cleanup.CGROUP_ROOT, hierarchy, "cgroup.procs")):
                os.makedirs(os.path.join(cleanup.CGROUP_ROOT, hierarchy, self.cgroup.lstrip("/")), exist_ok=True)
        node_cpu_weight(self.cgroup)
        t1 = time.monotonic()
        seeded = imagestore.clone(imagestore.seed_root(img), os.path.join(self.disk, "root"))
        self._spawn("containerd", ["containerd", "--config", os.path.join(self.dir, "containerd.toml")])
        deadline = time.monotonic() + 30
        while self.ctr("version", check=False, timeout=10).returncode != 0:
            interrupts.check(self.cancel, f"{self.plan.name}: waiting for containerd")
            if time.monotonic() > deadline or not os.path.exists(f"/proc/{self.pids['containerd']}"):
                raise RealNodeError(f"{self.plan.name}: containerd did not start; log {self.dir}/containerd.log:\n"
                                    + _tail(os.path.join(self.dir, "containerd.log")))
            time.sleep(0.1)
        for key in ("tiny", "fabric") if not seeded else ():
            self.ctr("images", "import", img[key]["archive"], timeout=300)
        self.timings["images"] = time.monotonic() - t1
        labels = f"{GATEWAY_LABEL}=true" if self.plan.gateway else ""
        self._spawn("kubelet", [
            os.path.join(bindir, "kubelet"), "--config", os.path.join(self.dir, "kubelet.yaml"),
            "--kubeconfig", self.node_kubeconfig, "--container-runtime", "remote",
            "--container-runtime-endpoint", f"unix://{self.sock}", "--runtime-request-timeout", "2m",
            "--root-dir", os.path.join(self.dir, "kubelet"), "--cert-dir", os.path.join(self.dir, "kubelet", "pki"),
            "--hostname-override", self.plan.name, "--node-ip", self.plan.underlay_ip,
            "--pod-infra-container-image", img["tiny"]["name"], "--node-labels", labels, "--v", "0"])
        self._spawn("kube-proxy", [os.path.join(bindir, "kube-proxy"), "--config",
                                   os.path.join(self.dir, "kube-proxy.yaml"), "--v", "0"])
        self.timings["start"] = time.monotonic() - t0

    def check_alive(self) -> None:
        for role, pid in self.pids.items():
            if not os.path.exists(f"/proc/{pid}") or "zombie" in cleanup._status(pid):  # pylint: disable=protected-access
                log = os.path.join(self.dir, f"{role}.log")
                raise RealNodeError(f"{self.plan.name}: {role} exited; log {log}:\n{_tail(log)}")

    def stop(self) -> None:
        """Kubelet first (it would restart what follows), then every container task (their shims exit and
        remove their sockets), kube-proxy and containerd; then remove_node_residue()."""
        pid = self.pids.pop("kubelet", None)
        if pid:
            _stop_pid(pid, self.start_times.pop("kubelet", None))
        if "containerd" in self.pids:
            cleanup.reset_containerd(self.sock)
        for role in ("kube-proxy", "containerd"):
            pid = self.pids.pop(role, None)
            if pid:
                _stop_pid(pid, self.start_times.pop(role, None))
        remove_node_residue(self.plan.netns, self.dir, self.disk)


def remove_node_residue(node_netns: str, node_dir: str | None, disk_dir: str | None) -> dict:
    """What a real node can leave outside its netns, found by its name: processes in its cgroups (stopped by
    PID), mounts under its directories (its mount namespace, and with it the container rootfs, shm, pod
    netns and volumes), the cgroups, its directories. Used by RealNode.stop()."""
    removed = {"processes": cleanup.kill_in_cgroups(node_netns + "/"), "mounts": [], "cgroups": [], "files": []}
    for d in filter(None, (node_dir, disk_dir)):
        removed["mounts"] += cleanup.unmount_under(d)
    removed["cgroups"] = cleanup.remove_cgroups(node_netns + "/")
    for d in filter(None, (node_dir, disk_dir)):
        if os.path.isdir(d):
            shutil.rmtree(d, ignore_errors=True)
            removed["files"].append(d)
    return removed


class RealNodes:
    """The real nodes of one LabCluster, and its control-plane netns on the underlay."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.nodes: dict[str, RealNode] = {}

    @property
    def cp_netns(self) -> str:
        return f"{self.cluster.prefix}-{self.cluster.name}-cp"

    @property
    def cluster_dir(self) -> str:
        return os.path.join(self.cluster.workdir, self.cluster.name)

    def underlay_up(self) -> None:
        """The cluster's switch and the control-plane netns on it (before the apiserver starts there)."""
        c = self.cluster
        plen = c.underlay_cidr.split("/")[1]
        netns.create_netns([c.switch_netns, self.cp_netns])
        netns.ip_batch(switch.up_commands() + switch.attach_commands(self.cp_netns, "eth0"), netns=c.switch_netns)
        netns.ip_batch(["link set lo up", f"addr add {c.control_plane_ip}/{plen} dev eth0", "link set eth0 up"],
                       netns=self.cp_netns)

    def pod_routes(self, plans: list[NodePlan], op: str = "add") -> None:
        """host-gw routes of the control plane to these nodes' pod slices (replies to pods, webhooks)."""
        netns.ip_batch([f"route {op} {p.pod_cidr} via {p.underlay_ip} dev eth0" for p in plans], netns=self.cp_netns)

    def start(self, plans: list[NodePlan], timeout: float = 90) -> None:
        """Starts these nodes in parallel and returns once each is registered, has its podCIDR and is Ready."""
        t0 = time.monotonic()
        self.pod_routes(plans)
        new = [RealNode(p, self.cluster_dir, self.cluster.prefix, self.cluster.pod_cidr,
                        self.cluster.apiserver.node_kubeconfig) for p in plans]
        for node in new:
            node.lab_dir, node.cancel, node.on_spawn = self.cluster.workdir, self.cluster.cancel, self.cluster.spawned
            self.nodes[node.plan.name] = node
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(new))) as pool:
            for fut in [pool.submit(n.start) for n in new]:
                fut.result()
        self.cluster.timings["nodes_started"] = time.monotonic() - t0
        self.cluster.timings["images_import_max"] = max(n.timings.get("images", 0.0) for n in new)
        self._wait_ready(new, timeout)
        self.cluster.timings["nodes_ready"] = time.monotonic() - t0

    def _wait_ready(self, new: list[RealNode], timeout: float) -> None:
        core = self.cluster.kube.core
        pending = {n.plan.name: n for n in new}
        patched: set[str] = set()
        deadline = time.monotonic() + timeout
        while pending:
            interrupts.check(self.cluster.cancel, f"cluster {self.cluster.name}: waiting for its nodes")
            for node in pending.values():
                node.check_alive()
            by_name = {n.metadata.name: n for n in core.list_node().items}
            for name, node in list(pending.items()):
                obj = by_name.get(name)
                if obj is None:
                    continue
                if name not in patched:
                    cidr = node.plan.pod_cidr
                    core.patch_node(name, {"metadata": {"annotations": {"lab.liqo.io/netns": node.plan.netns}},
                                           "spec": {"podCIDR": cidr, "podCIDRs": [cidr]}})
                    patched.add(name)
                ready = [c for c in (obj.status.conditions or []) if c.type == "Ready"]
                if ready and ready[0].status == "True":
                    del pending[name]
            if pending and time.monotonic() > deadline:
                raise RealNodeError(f"nodes not Ready after {timeout}s: {sorted(pending)}; logs under "
                                    f"{self.cluster_dir}")
            if pending:
                time.sleep(0.3)

    def pids(self) -> list[int]:
        return [pid for n in list(self.nodes.values()) for pid in list(n.pids.values())]

    def processes(self) -> list[dict]:
        return [p for n in list(self.nodes.values()) for p in n.processes()]

    def stop_node(self, name: str) -> None:
        self.nodes.pop(name).stop()

    def down(self) -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.nodes))) as pool:
            for fut in [pool.submit(n.stop) for n in self.nodes.values()]:
                fut.result()
        self.nodes.clear()
        for d in (self.cluster_dir, os.path.join(DISK_ROOT, self.cluster.prefix)):
            cleanup.unmount_under(d)
