"""LabCluster: one real Kubernetes "cluster" on this machine.

- a real etcd + kube-apiserver on loopback with its own kubeconfig;
- nodes = netns on an underlay switch (tests.lab.switch, in its own netns: the host namespace is never touched);
- pods = netns with a veth to a per-node bridge `cni0`; host-gw routes between nodes;
- Node/Pod objects registered in the apiserver with the real addresses;
- the first `gateways` nodes attached to the shared WAN (LabWan) with an address on `wan0`.
"""
from __future__ import annotations

import os
import threading
import time

from tests.lab import cleanup, interrupts, names, netns, owner, switch
from tests.lab.apiserver import ApiServer
from tests.lab.controlplane import ControlPlane
from tests.lab.kube import LabKube
from tests.lab.realnode import RealNodes
from tests.lab.topology import NodePlan, PodPlan, plan_cluster
from tests.lab.wan import LabWan


class LabCluster:
    def __init__(self, name: str, pod_cidr: str = "10.243.0.0/16", nodes: int = 3, pods_per_node: int = 2,
                 gateways: int = 1, wan: LabWan | None = None, lab_id: str | None = None,
                 underlay_cidr: str = "172.30.0.0/24", service_cidr: str = "10.96.0.0/12",
                 external_cidr: str = "10.70.0.0/16", internal_cidr: str = "10.80.0.0/16",
                 workdir: str | None = None, controller_manager: bool = False, real_nodes: bool = False,
                 cancel: threading.Event | None = None):
        if not name.isalnum() or len(name) > 6:
            raise ValueError(f"name: {name!r} must be alphanumeric, at most 6 characters (it is part of netns names)")
        self.name = name
        self.lab_id = lab_id or names.new_lab_id()
        self.prefix = names.lab_prefix(self.lab_id)
        self.pod_cidr = pod_cidr
        self.service_cidr = service_cidr
        self.external_cidr = external_cidr
        self.internal_cidr = internal_cidr
        self.underlay_cidr = underlay_cidr
        self.wan = wan
        self._owns_dir = workdir is None
        self.workdir = workdir or cleanup.state_dir(self.lab_id)
        # set once the lab is going down: a start still running in a thread stops at its next step (the Lab's,
        # shared by its clusters)
        self.cancel = cancel or threading.Event()
        self._claim_lock = threading.Lock()
        # real_nodes: kubelets run the pods (tests.lab.realnode); no netns pods of the light lab
        self.real = RealNodes(self) if real_nodes else None
        self.nodes: list[NodePlan] = plan_cluster(self.prefix, name, pod_cidr, underlay_cidr, nodes,
                                                  0 if real_nodes else pods_per_node, gateways if wan else 0)
        if real_nodes:
            self.apiserver = ControlPlane(name, os.path.join(self.workdir, name), service_cidr,
                                          netns=self.real.cp_netns, address=self.control_plane_ip, pod_cidr=pod_cidr)
        else:
            self.apiserver = ApiServer(name, os.path.join(self.workdir, name), service_cidr, controller_manager)
        self.apiserver.lab_dir, self.apiserver.cancel = self.workdir, self.cancel
        self.apiserver.on_spawn = self.spawned
        self.cluster_id = ""
        self.timings: dict[str, float] = {}
        self._kube: LabKube | None = None
        self.on_change = None  # set by Lab: rewrites the inventory when nodes come and go
        self.on_spawn = None   # set by Lab: records a process just started in its state file

    # -- properties -------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> str:
        return self.apiserver.kubeconfig

    @property
    def switch_netns(self) -> str:
        return f"{self.prefix}-{self.name}-sw"

    @property
    def underlay_router(self) -> str:
        import ipaddress  # pylint: disable=import-outside-toplevel
        return str(ipaddress.ip_network(self.underlay_cidr).network_address + 1)

    @property
    def control_plane_ip(self) -> str:
        """Real-node clusters: the apiserver's address on the underlay (its last host address)."""
        import ipaddress  # pylint: disable=import-outside-toplevel
        return str(ipaddress.ip_network(self.underlay_cidr).broadcast_address - 1)

    @property
    def gateway_nodes(self) -> list[NodePlan]:
        return [n for n in self.nodes if n.gateway]

    @property
    def pods(self):
        return [p for n in self.nodes for p in n.pods]

    def node(self, name: str) -> NodePlan:
        return next(n for n in self.nodes if n.name == name)

    def all_netns(self) -> list[str]:
        return [self.switch_netns] + [n.netns for n in self.nodes] + [p.netns for p in self.pods]

    @property
    def kube(self) -> LabKube:
        if self._kube is None:
            self._kube = LabKube(self.kubeconfig)
        return self._kube

    # -- lifecycle ---------------------------------------------------------------------------------
    def up(self) -> "LabCluster":
        if self._owns_dir:  # on its own: a signal tears it down as Lab.up's does (tests.lab.interrupts)
            self.cancel.clear()
            interrupts.enter(self, self.cancel, self.down)
        try:
            os.makedirs(self.workdir, mode=0o700, exist_ok=True)
            if self._owns_dir:  # on its own: record who owns it, so `make lab-clean` spares it while that runs
                owner.claim(self.workdir, self.lab_id, self.prefix)
            self.start_apiserver()
            self.build_dataplane()
            self.register()
        except BaseException:
            if self._owns_dir:
                self.cancel.set()
                self.down()
            raise
        return self

    def processes(self) -> list[dict]:
        """Every process this cluster started and runs: role ("<cluster>/<role>"), pid, start time."""
        procs = self.apiserver.processes() + (self.real.processes() if self.real else [])
        return [{**p, "role": f"{self.name}/{p['role']}"} for p in procs]

    def spawned(self) -> None:
        """A process was just started: into the state file (the Lab's, or this cluster's own when alone)."""
        if self.on_spawn:
            self.on_spawn()
        elif self._owns_dir:
            with self._claim_lock:  # real nodes start in threads
                owner.claim(self.workdir, self.lab_id, self.prefix, processes=self.processes())

    def start_apiserver(self) -> None:
        if self.real:  # the control plane lives on the underlay: switch and its netns first
            self.real.underlay_up()
        self.apiserver.start()
        self.timings["apiserver_start"] = self.apiserver.start_seconds

    def build_dataplane(self) -> None:
        t0 = time.monotonic()
        if self.wan:
            self.wan.up()
            for node in self.gateway_nodes:
                node.wan_ip = self.wan.allocate()
        netns.create_netns([n for n in self.all_netns() if not (self.real and n == self.switch_netns)])
        netns.ip_batch(([] if self.real else switch.up_commands())
                       + [c for n in self.nodes for c in switch.attach_commands(n.netns, "eth0")],
                       netns=self.switch_netns)
        if self.wan:
            netns.ip_batch([c for n in self.gateway_nodes for c in self.wan.attach_commands(n.netns, n.wan_ip)],
                           netns=self.wan.netns)
        netns.ip_batch([f"link add name eth0 netns {pod.netns} type veth peer name {pod.host_veth} netns {node.netns}"
                        for node in self.nodes for pod in node.pods])
        for node in self.nodes:
            self._configure_node(node)
        for node in self.nodes:
            for pod in node.pods:
                self._configure_pod(pod, node)
        self.timings["dataplane"] = time.monotonic() - t0

    def register(self) -> None:
        t0 = time.monotonic()
        self.cluster_id = self.kube.ensure_cluster_id()
        if self.real:  # kubelets register their Nodes; pods are scheduled and run for real
            self.real.start(self.nodes)
        else:
            self.kube.register_nodes(self.nodes)
            self.kube.register_pods(self.nodes)
        self.timings["register"] = time.monotonic() - t0

    def down(self) -> dict:
        if not self._owns_dir:  # part of a Lab, whose down() holds signals back
            return self._down()
        with interrupts.teardown(self):
            self.cancel.set()
            return self._down()

    def _down(self) -> dict:
        t0 = time.monotonic()
        if self.real:
            self.real.down()  # kubelets, containers, containerds, kube-proxies, their residue
        if self._kube:
            self._kube.close()
            self._kube = None
        self.apiserver.stop()
        prefix = f"{self.prefix}-{self.name}-"
        removed = cleanup.clean_prefix(prefix, self.workdir if self._owns_dir else None)
        self.timings["down"] = time.monotonic() - t0
        return removed

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    # -- changing the cluster while it runs (a node joins or leaves, a pod is scheduled or deleted) ----
    def add_node(self, pods: int = 1) -> NodePlan:
        """A new node (netns on the underlay, its own pod slice, host-gw routes both ways) with `pods`
        pods, registered in the apiserver."""
        import ipaddress  # pylint: disable=import-outside-toplevel
        i = max(n.index for n in self.nodes) + 1
        pods = 0 if self.real else pods
        plan = plan_cluster(self.prefix, self.name, self.pod_cidr, self.underlay_cidr, i + 1, pods, 0)[i]
        self.nodes.append(plan)
        netns.create_netns([plan.netns] + [p.netns for p in plan.pods])
        netns.ip_batch(switch.attach_commands(plan.netns, "eth0"), netns=self.switch_netns)
        netns.ip_batch([f"link add name eth0 netns {p.netns} type veth peer name {p.host_veth} netns {plan.netns}"
                        for p in plan.pods])
        self._configure_node(plan)
        for other in self.nodes:
            if other is not plan:
                netns.ip_batch([f"route add {plan.pod_cidr} via {plan.underlay_ip} dev eth0"], netns=other.netns)
        for pod in plan.pods:
            self._configure_pod(pod, plan)
        if self.real:  # its kubelet joins (returns once the Node is Ready)
            self.real.start([plan])
        else:
            self.kube.register_nodes([plan])
            self.kube.register_pods([plan])
        assert ipaddress.ip_network(plan.pod_cidr).subnet_of(ipaddress.ip_network(self.pod_cidr))
        if self.on_change:
            self.on_change()
        return plan

    def remove_node(self, name: str) -> None:
        plan = self.node(name)
        for pod in list(plan.pods):
            self.remove_pod(pod.name)
        if self.real:  # its kubelet and containers stop; the Node and its pods leave the API
            self.real.stop_node(name)
            self.real.pod_routes([plan], "del")
            for pod in self.kube.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items:
                self.kube.core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
        self.kube.delete_node(name)
        for other in self.nodes:
            if other is not plan:
                netns.ip_batch([f"route del {plan.pod_cidr} via {plan.underlay_ip} dev eth0"], netns=other.netns)
        cleanup.kill_in_netns([plan.netns])
        netns.delete_netns([plan.netns])  # and with it its switch port
        self.nodes.remove(plan)
        if self.on_change:
            self.on_change()

    def add_pod(self, node_name: str) -> PodPlan:
        node = self.node(node_name)
        j = max([int(p.host_veth[4:]) for p in node.pods] + [0]) + 1
        plan = plan_cluster(self.prefix, self.name, self.pod_cidr, self.underlay_cidr, node.index + 1, j, 0)[node.index].pods[j - 1]
        node.pods.append(plan)
        netns.create_netns([plan.netns])
        netns.ip_batch([f"link add name eth0 netns {plan.netns} type veth peer name {plan.host_veth} netns {node.netns}"])
        netns.ip_batch([f"link set {plan.host_veth} master cni0", f"link set {plan.host_veth} up"], netns=node.netns)
        self._configure_pod(plan, node)
        self.kube.register_pods([NodePlan(**{**node.__dict__, "pods": [plan]})])
        return plan

    def remove_pod(self, name: str) -> None:
        node = next(n for n in self.nodes if any(p.name == name for p in n.pods))
        plan = next(p for p in node.pods if p.name == name)
        self.kube.delete_pod(name)
        netns.delete_netns([plan.netns])
        node.pods.remove(plan)

    def _configure_node(self, node: NodePlan) -> None:
        plen = self.underlay_cidr.split("/")[1]
        cmds = ["link set lo up", f"addr add {node.underlay_ip}/{plen} dev eth0", "link set eth0 up"]
        if not self.real:  # real nodes: the CNI bridge plugin makes its own bridge (kbr0) with the slice
            cmds += ["link add cni0 type bridge", f"addr add {node.bridge_ip}/{node.pod_cidr.split('/')[1]} dev cni0",
                     "link set cni0 up"]
        for pod in node.pods:
            cmds += [f"link set {pod.host_veth} master cni0", f"link set {pod.host_veth} up"]
        for other in self.nodes:  # host-gw: other nodes' pod slices via their underlay address
            if other is not node:
                cmds.append(f"route add {other.pod_cidr} via {other.underlay_ip} dev eth0")
        # Like a real node, a default route (to the underlay's router address .1, which nobody holds: what
        # takes it dies in ARP inside the lab's own switch, nothing ever leaves the lab)
        cmds.append(f"route add default via {self.underlay_router} dev eth0")
        if node.gateway:
            cmds += [f"addr add {node.wan_ip} dev wan0", "link set wan0 up"] + self.wan.node_commands(node.wan_ip)
        netns.ip_batch(cmds, netns=node.netns)
        netns.sysctl_in(node.netns, {"net.ipv4.ip_forward": "1"})

    @staticmethod
    def _configure_pod(pod: PodPlan, node: NodePlan) -> None:
        mask = node.pod_cidr.split("/")[1]
        netns.ip_batch(["link set lo up", f"addr add {pod.ip}/{mask} dev eth0", "link set eth0 up",
                        f"route add default via {node.bridge_ip} dev eth0"], netns=pod.netns)

    # -- conveniences for tests and the demo ------------------------------------------------------
    def exec_in(self, ns: str, argv, **kw):
        return netns.exec_in(ns, argv, **kw)

    def ping(self, from_netns: str, address: str, count: int = 1, size: int | None = None) -> bool:
        argv = ["ping", "-n", "-q", "-c", str(count), "-W", "1", "-i", "0.2"]
        if size is not None:
            argv += ["-s", str(size), "-M", "do"]
        return netns.exec_in(from_netns, argv + [address], check=False).returncode == 0

    def inventory(self) -> dict:
        """Ansible inventory of this cluster: groups cluster_<name>, _nodes, _gateway."""
        import sys  # pylint: disable=import-outside-toplevel
        hosts = {}
        for node in self.nodes:
            hosts[node.name] = {
                "ansible_host": node.netns, "ansible_connection": "liqo.fabric.netns",
                "ansible_python_interpreter": sys.executable, "node_name": node.name,
                "internal_ip": node.underlay_ip, "node_pod_cidr": node.pod_cidr,
                # one sysctl record per host: labs on one machine share /run and their host names
                "gateway_sysctl_file": os.path.join(cleanup.SYSCTL_RECORD_DIR, f"{cleanup.SYSCTL_RECORD_PREFIX}{node.netns}.conf"),
                # the live health probe's files: in the lab's state directory (lab-clean removes it)
                "gateway_health_state_dir": os.path.join(self.workdir, "health", node.netns),
            }
            if node.gateway:
                hosts[node.name]["wan_ip"] = node.wan_ip.split("/")[0]
        group = f"cluster_{self.name}"
        return {group: {
            "vars": {"kubeconfig": self.kubeconfig, "cluster_name": self.name, "cluster_id": self.cluster_id,
                     "pod_cidr": self.pod_cidr, "service_cidr": self.service_cidr,
                     "external_cidr": self.external_cidr, "internal_cidr": self.internal_cidr},
            "children": {
                f"{group}_nodes": {"hosts": hosts},
                f"{group}_gateway": {"hosts": {n.name: {} for n in self.gateway_nodes}},
            },
        }}
