"""The control plane of a real-node lab cluster: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler inside the cluster's control-plane netns (`<prefix>-<cluster>-cp`, a port on the cluster's
underlay switch at the underlay's last host address).

There, kubelets and pods reach the apiserver (https://<address>:6443, and as the `kubernetes` Service whose
Endpoints the apiserver keeps with its lease reconciler), and the apiserver reaches every kubelet at the
node's InternalIP (kubectl logs/exec). The host reaches it through tests.lab.forward on 127.0.0.1:<port>,
which is what `kubeconfig` names: the host's routes are never touched, so two labs may use the same
underlay and pod CIDRs.

Credentials: the admin token (system:masters) for the lab's own clients; one node token (user
system:node:lab, groups system:nodes and system:masters) in `node_kubeconfig` for kubelets, kube-proxy,
the scheduler and the controller manager.
"""
from __future__ import annotations

import ipaddress
import os
import secrets
import sys
import time


from tests.lab.apiserver import (WEBHOOK_ROLE, ApiServer, _stop_pid, etcd_binary, free_port, kube_bin_dir,
                                 write_kubeconfig)
from tests.lab.pki import make_pki

API_PORT = 6443


class ControlPlane(ApiServer):
    """ControlPlane("a", workdir, netns="lfab1234-a-cp", address="172.30.0.254", pod_cidr="10.243.0.0/16")"""

    def __init__(self, name: str, workdir: str, service_cidr: str = "10.96.0.0/12", *, netns: str, address: str,
                 pod_cidr: str):
        super().__init__(name, workdir, service_cidr, controller_manager=True)
        self.netns = netns
        self.address = address
        self.pod_cidr = pod_cidr
        self.node_kubeconfig = os.path.join(workdir, "kubeconfig-node")
        self.node_token = ""
        self.sa_key = ""

    @property
    def in_cluster_url(self) -> str:
        return f"https://{self.address}:{API_PORT}"

    @property
    def service_ip(self) -> str:
        """ClusterIP of the `kubernetes` Service (first address of the service CIDR)."""
        return str(ipaddress.ip_network(self.service_cidr).network_address + 1)

    def _spawn_in(self, role: str, argv: list[str], env: dict | None = None):
        return self._spawn(role, ["nsenter", f"--net=/run/netns/{self.netns}", *argv], env=env)

    def start(self, timeout: float = 60.0) -> "ControlPlane":
        t0 = time.monotonic()
        os.makedirs(self.workdir, mode=0o700, exist_ok=True)
        bindir = kube_bin_dir()
        pki = make_pki(self.workdir, self.name, extra_ips=(self.address, self.service_ip))
        self.ca, self.sa_key = pki["ca.crt"], pki["sa.key"]
        self.token, self.node_token = secrets.token_hex(16), secrets.token_hex(16)
        tokens = os.path.join(self.workdir, "tokens.csv")
        fd = os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f'{self.token},lab-admin,lab-admin,"system:masters"\n'
                    f'{self.node_token},system:node:lab,lab-node,"system:nodes,system:masters"\n')
        etcd_env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self._spawn_in("etcd", [
            etcd_binary(), "--name", "lab", "--data-dir", os.path.join(self.workdir, "etcd"),
            "--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
            "--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
            "--initial-cluster", "lab=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level", "error"],
            env=etcd_env)
        self._spawn_in("kube-apiserver", [
            os.path.join(bindir, "kube-apiserver"), "--etcd-servers", "http://127.0.0.1:2379",
            "--bind-address", "0.0.0.0", "--secure-port", str(API_PORT), "--advertise-address", self.address,
            "--tls-cert-file", pki["apiserver.crt"], "--tls-private-key-file", pki["apiserver.key"],
            "--client-ca-file", pki["ca.crt"],
            "--cert-dir", self.workdir, "--token-auth-file", tokens, "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", pki["sa.key"], "--service-account-signing-key-file", pki["sa.key"],
            "--service-cluster-ip-range", self.service_cidr, "--endpoint-reconciler-type", "lease",
            "--kubelet-preferred-address-types", "InternalIP", "--enable-priority-and-fairness=false",
            # webhooks by Service (the CRD conversion webhook of deploy/) dialled at the endpoint (pod IP, routed
            # here), not at the ClusterIP (no kube-proxy in this netns)
            "--enable-aggregator-routing=true",
            "--allow-privileged=true", "--v", "0"])
        self.port = free_port()
        self._spawn("forward", [sys.executable, "-m", "tests.lab.forward", str(self.port), self.netns, self.address,
                                str(API_PORT), self.workdir],
                    env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.dirname(
                        os.path.abspath(__file__))))})
        self._write_kubeconfig()
        self._write_node_kubeconfig()
        self._wait_ready(timeout)
        self.start_webhook(pki, self._spawn_in)  # in the netns: the apiserver reaches it on 127.0.0.1
        self._spawn_in("kube-controller-manager", [
            os.path.join(bindir, "kube-controller-manager"), "--kubeconfig", self.node_kubeconfig,
            "--bind-address", "127.0.0.1", "--secure-port", "10257", "--port", "0", "--leader-elect=false",
            "--use-service-account-credentials=false", "--service-account-private-key-file", pki["sa.key"],
            "--root-ca-file", pki["ca.crt"], "--cluster-cidr", self.pod_cidr, "--allocate-node-cidrs=false",
            "--controllers", "*,-nodeipam", "--node-monitor-grace-period", "20s", "--v", "0"])
        self._spawn_in("kube-scheduler", [
            os.path.join(bindir, "kube-scheduler"), "--kubeconfig", self.node_kubeconfig,
            "--authentication-kubeconfig", self.node_kubeconfig, "--authorization-kubeconfig", self.node_kubeconfig,
            "--bind-address", "127.0.0.1", "--secure-port", "10259", "--port", "0", "--leader-elect=false",
            "--v", "0"])
        self.start_seconds = time.monotonic() - t0
        return self

    def restart_webhook(self, spawn=None) -> None:
        super().restart_webhook(spawn or self._spawn_in)

    def _write_node_kubeconfig(self) -> None:
        write_kubeconfig(self.node_kubeconfig, self.name, self.in_cluster_url, self.ca, "lab-node", self.node_token)

    def stop(self) -> None:
        grace = self._stop_grace()
        for role in ("forward", "kube-scheduler", "kube-controller-manager", WEBHOOK_ROLE, "kube-apiserver", "etcd"):
            pid = self.pids.pop(role, None)
            if pid:
                _stop_pid(pid, self.start_times.pop(role, None), grace)
        self.ready = False
