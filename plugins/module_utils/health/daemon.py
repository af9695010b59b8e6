# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agentless path's probe process: one per gateway on its gateway host, started and stopped by the
gateway role (module liqo.fabric.peer_health).

The process pings the peer through the tunnel (module_utils.health.prober), writes the health to the
gateway's Connection (peer_health_status; when it has a kubeconfig), and serves its state and the peer
metrics over HTTP on a Unix socket (`GET /metrics`, `GET /status`). Its files live in the gateway's state directory (0700): `<interface>.pid` (JSON: pid,
process start time, configuration hash) and `<interface>.sock`, both 0600; the process removes them when it
is stopped, `stop` removes what a killed process left.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time

from ansible_collections.liqo.fabric.plugins.module_utils.gateway import path_mtu as pmtu
from ansible_collections.liqo.fabric.plugins.module_utils.health import hold
from ansible_collections.liqo.fabric.plugins.module_utils.health import metrics as phm
from ansible_collections.liqo.fabric.plugins.module_utils.health import prober as ph
from ansible_collections.liqo.fabric.plugins.module_utils.health import status as phs
from ansible_collections.liqo.fabric.plugins.module_utils.host.atomic_file import write_atomic
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import session as wgs

STATE_DIR = "/run/liqo-fabric-health"
STATUS_INTERVAL = 10.0   # seconds between two latency refreshes of a Connected Connection
REQUIRED = ("interface", "address", "namespace", "connection_name")


class DaemonError(RuntimeError):
    """The probe process could not be started or stopped; the message says why."""


def check_spec(i, spec):
    """Validates one gateway's probe spec (entries of the module's `gateways`); raises ph.HealthError."""
    if not isinstance(spec, dict):
        raise ph.HealthError("gateways[%d]: expected a dict, got %r" % (i, type(spec).__name__))
    missing = [k for k in REQUIRED if not spec.get(k)]
    if missing:
        raise ph.HealthError("gateways[%d]: missing %s" % (i, ", ".join(missing)))
    try:
        ph.validate(spec["interface"], spec["address"], spec.get("port", ph.PORT), spec.get("interval", ph.INTERVAL),
                    spec.get("threshold", ph.THRESHOLD))
    except ph.HealthError as exc:
        raise ph.HealthError("gateways[%d].%s" % (i, exc))


def paths(state_dir, interface):
    return os.path.join(state_dir, interface + ".pid"), os.path.join(state_dir, interface + ".sock")


def config_hash(spec, kubeconfig):
    text = json.dumps([spec, kubeconfig], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _running(pid, start):
    """The process `pid` started at `start` still runs: it exists and is not a zombie (an exited probe process
    waits for its reaper, PID 1 or a subreaper, which may take a second or more)."""
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return len(fields) > 19 and fields[19] == start and fields[0] not in ("Z", "X")


def read_pidfile(state_dir, interface):
    """The record of a live probe process of `interface` ({pid, start, config}), else None."""
    pid_path = paths(state_dir, interface)[0]
    try:
        with open(pid_path, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int):
        return None
    # a killed probe is a zombie until its reaper takes it (which may take a while): not alive, so the drift check
    # sees it gone and start() starts it again at once
    return rec if _running(rec["pid"], rec.get("start")) else None


def running(state_dir):
    """Interfaces with a probe process file in `state_dir` (alive or not; a hold left without its process too)."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return []
    return sorted({n.rsplit(".", 1)[0] for n in names if n.endswith((".pid", ".sock", ".hold"))})


def stop(state_dir, interface, timeout=5.0, keep_hold=False):
    """Stops the probe process of `interface` and removes its files; True when there was something.
    keep_hold: a restart with a new configuration (a peer key adopted in a rotation) keeps the restart hold."""
    rec = read_pidfile(state_dir, interface)
    found = False
    if rec:
        found = True
        try:
            os.kill(rec["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while _running(rec["pid"], rec["start"]) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _running(rec["pid"], rec["start"]):
            os.kill(rec["pid"], signal.SIGKILL)
    for p in paths(state_dir, interface):
        try:
            os.unlink(p)
            found = True
        except FileNotFoundError:
            pass
    if not keep_hold and hold.release(state_dir, interface):
        found = True
    try:
        os.rmdir(state_dir)  # the last gateway of the host: no directory left behind
    except OSError:
        pass
    return found


def query(state_dir, interface, what="status", timeout=3.0):
    """GET /<what> from the probe process's socket: the parsed JSON for status, the text for metrics."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(paths(state_dir, interface)[1])
        sock.sendall(("GET /%s HTTP/1.0\r\n\r\n" % what).encode())
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    body = data.split(b"\r\n\r\n", 1)[1].decode()
    return json.loads(body) if what == "status" else body


def start(spec, state_dir, kube=None, wait=5.0):
    """Starts the probe process of one gateway (spec: interface, address, namespace, connection_name,
    remote_cluster_id, public_key, port, interval, threshold); returns True when it (re)started one, False
    when the same one already runs."""
    interface = spec["interface"]
    cfg = config_hash(spec, getattr(kube, "kubeconfig", None))
    rec = read_pidfile(state_dir, interface)
    if rec and rec.get("config") == cfg:
        return False
    stop(state_dir, interface, keep_hold=True)
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    os.chmod(state_dir, 0o700)
    pid_path, sock_path = paths(state_dir, interface)
    root = collection_root()
    if root:
        _spawn(root, spec, pid_path, sock_path, cfg, getattr(kube, "kubeconfig", None))
    else:
        _fork(spec, pid_path, sock_path, cfg, kube)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if read_pidfile(state_dir, interface) and os.path.exists(sock_path):
            return True
        time.sleep(0.02)
    stop(state_dir, interface)
    raise DaemonError("the probe process of %s did not start within %.0f s" % (interface, wait))


def collection_root():
    """The directory that holds this collection's `ansible_collections` when its files are on disk (an installed
    collection run in-process, the controller), else None (AnsiballZ's payload: a zip removed when the module
    ends, so the probe process cannot import from it later)."""
    pkg = sys.modules.get("ansible_collections.liqo.fabric")
    for path in list(getattr(pkg, "__path__", None) or []):  # each is <root>/ansible_collections/liqo/fabric
        collections_dir = os.path.dirname(os.path.dirname(path))
        on_disk = os.path.isfile(os.path.join(path, "plugins", "module_utils", "health", "daemon.py"))
        if os.path.basename(collections_dir) == "ansible_collections" and on_disk:
            return os.path.dirname(collections_dir)
    return None


# The probe process as a fresh interpreter: run in-process (plugin_utils/speed/in_process.py), the module is a fork of
# the Ansible worker, whose memory and file descriptors a forked probe process would keep for its whole life.
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as d; d.serve(sys.argv[2])")


def _spawn(root, spec, pid_path, sock_path, cfg, kubeconfig):
    args = json.dumps({"spec": spec, "pid_path": pid_path, "sock_path": sock_path, "config": cfg,
                       "kubeconfig": kubeconfig})
    subprocess.Popen([sys.executable, "-c", _BOOT, root, args], stdin=subprocess.DEVNULL,  # pylint: disable=consider-using-with
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/", close_fds=True,
                     start_new_session=True)


def serve(args):  # pragma: no cover - the probe process: covered by the integration and e2e tests
    """Entry of a spawned probe process (_spawn): the arguments as JSON."""
    a = json.loads(args)
    os.umask(0o077)
    kube = None
    if a.get("kubeconfig"):
        from ansible_collections.liqo.fabric.plugins.module_utils.kube.client import Kube
        kube = Kube(a["kubeconfig"])
    Daemon(a["spec"], a["pid_path"], a["sock_path"], a["config"], kube).run()


def _fork(spec, pid_path, sock_path, cfg, kube):
    """The probe process as a double fork of the module's own (small) AnsiballZ process."""
    child = os.fork()
    if child == 0:  # pragma: no cover - the daemon side is covered by the integration and e2e tests
        try:
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            _detach()
            Daemon(spec, pid_path, sock_path, cfg, kube).run()
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def _detach():
    os.chdir("/")
    os.umask(0o077)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


class _Stopping(BaseException):
    """Raised in the main thread by the stop signal's handler: ends the probe loop wherever it waits (a
    BaseException, so the loop's `except Exception` does not take it for a failed probe)."""


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server API)
        d = self.server.daemon_ref
        path = self.path.split("?")[0]
        if path == "/metrics":
            body, ctype = d.metrics().encode(), "text/plain; version=0.0.4"
        elif path == "/status":
            body, ctype = (json.dumps(d.snapshot()) + "\n").encode(), "application/json"
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # nothing to log to
        pass


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        conn, _addr = super().get_request()
        return conn, ("local", 0)  # BaseHTTPRequestHandler formats the client address


class Daemon:
    """The probe loop, the Connection writer (its own thread: a slow apiserver never delays the pings the
    peer waits for) and the HTTP server."""

    def __init__(self, spec, pid_path, sock_path, cfg, kube):
        self.spec, self.pid_path, self.sock_path, self.cfg, self.kube = spec, pid_path, sock_path, cfg, kube
        target = "%s:%d via %s" % (spec["address"], spec.get("port", ph.PORT), spec["interface"])
        self.state = ph.HealthState(spec.get("threshold", ph.THRESHOLD), target)
        self.prober = ph.Prober(spec["interface"], spec["address"], spec.get("port", ph.PORT),
                                spec.get("interval", ph.INTERVAL))
        self.stopping = threading.Event()
        self.wake = threading.Condition()
        self.dirty = False
        self.written = None          # (value, time) of the last Connection write
        self.write_error = None
        self.counters = None
        self.counter = phm.Counters(spec["interface"], spec.get("public_key"))
        self.counter_lock = threading.Lock()
        self.sessions_restarted, self.session_error = 0, None
        self.restarts_held, self.restart_pending = 0, False
        # spec.mtu auto: the path re-probed in its own thread (a probe of a black hole waits for its timeouts)
        self.mtu_watch = pmtu.Watch(spec["interface"], spec["address"], spec.get("public_key"), spec.get("mtu_cap")) \
            if spec.get("mtu_auto") else None
        self.mtu_live = pmtu.Live(self.mtu_watch, kube, spec.get("kind"), spec["namespace"], spec["connection_name"]) \
            if self.mtu_watch else None

    # --- views
    def snapshot(self):
        s = self.state
        return {"interface": self.spec["interface"], "address": self.spec["address"], "value": s.value, "reason": s.reason, "message": s.message,
                "latency_us": s.latency_us, "losses": s.losses, "since": s.since, "pid": os.getpid(),
                "answered_pings": self.prober.answered_pings, "counters": self.counters,
                "connection_written": self.written, "connection_error": self.write_error,
                "sessions_restarted": self.sessions_restarted, "session_error": self.session_error,
                "restarts_held": self.restarts_held,
                "path_mtu": self.mtu_watch.snapshot() if self.mtu_watch else None,
                "mtu_written": self.mtu_live.written if self.mtu_live else None,
                "mtu_write_error": self.mtu_live.write_error if self.mtu_live else None}

    def metrics(self):
        with self.counter_lock:
            self.counters = self.counter.read()
        s = self.state
        return phm.render([phm.sample(self.spec.get("remote_cluster_id"), s.value == ph.CONNECTED, s.latency_us,
                                      self.counters, _read_mtu(self.spec["interface"], self.mtu_watch))])

    # --- lifecycle
    def _on_signal(self, *_args):
        """SIGTERM/SIGINT: stop now, not at the end of the probe interval the main thread is waiting out (up to
        `interval`, 1 s by default, for every probe `stop()` ends: disconnect and reset stop them all)."""
        if not self.stopping.is_set():
            self.stopping.set()
            raise _Stopping()

    def run(self):
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        if os.path.exists(self.sock_path):
            os.unlink(self.sock_path)
        unix = _UnixServer(self.sock_path, _Handler)
        os.chmod(self.sock_path, 0o600)
        unix.daemon_ref = self
        threading.Thread(target=unix.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
        threading.Thread(target=self._writer, daemon=True).start()
        if self.mtu_live:
            threading.Thread(target=self.mtu_live.run, args=(self.stopping,), daemon=True).start()
        write_atomic(self.pid_path, json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid()),
                                                "config": self.cfg}))
        try:
            while not self.stopping.is_set():
                try:
                    answered, rtt, why = self.prober.step()
                except Exception as exc:  # pylint: disable=broad-except
                    # the process lives on: an unexpected failure is a lost probe, named in the state
                    self.prober.close()
                    time.sleep(self.prober.interval)
                    answered, rtt, why = False, None, "probe failed: %s" % exc
                before = self.state.value
                changed = self.state.observe(answered, rtt, why=why)
                if self.mtu_watch and changed and before == ph.ERROR and self.state.value == ph.CONNECTED:
                    self.mtu_watch.kick("reconnected")  # a failover, a restarted peer: maybe another path
                if self.state.value != ph.ERROR:
                    self.restart_pending = False
                elif changed or self.restart_pending:
                    self._restart_session()
                due = self.state.value == ph.CONNECTED and (
                    self.written is None or time.time() - self.written[1] >= STATUS_INTERVAL)
                if changed or due:
                    with self.wake:
                        self.dirty = True
                        self.wake.notify()
        except _Stopping:
            pass
        finally:
            self.prober.close()
            unix.server_close()
            if self.mtu_watch:
                try:
                    self.mtu_watch.restore()
                except Exception:  # pylint: disable=broad-except  # the interface is gone: nothing to put back
                    pass
            for p in (self.sock_path, self.pid_path):
                try:
                    os.unlink(p)
                except OSError:
                    pass

    def _restart_session(self):
        """The peer went silent: restart the WireGuard session so a peer that restarted is reached at its next
        handshake, not after WireGuard's 15 s (module_utils/wireguard/session.py). Not while a key rotation holds
        the restarts (health/hold.py): then once the hold is gone, if the peer is still silent."""
        if hold.remaining(os.path.dirname(self.pid_path), self.spec["interface"]) > 0:
            if not self.restart_pending:
                self.restarts_held += 1
            self.restart_pending = True
            return
        self.restart_pending = False
        with self.counter_lock:
            self.counter.read()  # what was counted so far: the re-added peer's counters start from 0
            try:
                if wgs.restart_session(self.spec["interface"], self.spec.get("public_key")):
                    self.sessions_restarted += 1
                self.session_error = None
            except Exception as exc:  # pylint: disable=broad-except
                self.session_error = str(exc)[:300]

    def _writer(self):
        if self.kube is None:
            return
        while True:
            with self.wake:
                while not self.dirty:
                    self.wake.wait()
                self.dirty = False
            s = self.state
            value, reason, message, latency = s.value, s.reason, s.message, s.latency_us
            if value == ph.CONNECTING:
                continue
            try:
                phs.write(self.kube, self.spec["namespace"], self.spec["connection_name"], value, reason, message,
                          latency)
                self.written, self.write_error = (value, time.time()), None
            except Exception as exc:  # pylint: disable=broad-except
                self.write_error = str(exc)[:300]
                time.sleep(1)
                with self.wake:
                    self.dirty = True


def _read_mtu(interface, watch=None):
    try:
        return watch.interface_mtu() if watch else pmtu.link_mtu(interface)
    except (OSError, ValueError):
        return None
