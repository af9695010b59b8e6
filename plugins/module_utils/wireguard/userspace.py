# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `wireguard-go` backend: the userspace implementation, one `wireguard-go -f <ifname>` process per interface,
configured over its UAPI socket `/var/run/wireguard/<ifname>.sock` (one socket exchange per apply, whatever the
number of peers). That directory is shared by all network namespaces of a host, so names must be unique per host."""
from __future__ import absolute_import, division, print_function

import contextlib
import fcntl
import os
import signal
import socket
import struct
import subprocess
import time

from ansible_collections.liqo.fabric.plugins.module_utils.host.atomic_file import write_atomic
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.errors import WireGuardError
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.uapi import parse_uapi_get, render_uapi_set

RUN_DIR = "/var/run/wireguard"
WIREGUARD_GO = "wireguard-go"
BACKEND_USERSPACE = "wireguard-go"


def _same_netns(pid):
    try:
        return os.stat("/proc/%d/ns/net" % pid).st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def _proc_alive(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def _is_wireguard_go(pid, ifname, binary=WIREGUARD_GO):
    """True if `pid` is a live wireguard-go serving `ifname` (guards against PID reuse)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    argv = [a.decode("utf-8", "replace") for a in argv if a]
    if len(argv) < 2 or argv[-1] != ifname:
        return False
    return os.path.basename(argv[0]) == os.path.basename(binary) and _proc_alive(pid)


class UserspaceBackend(object):
    """One `wireguard-go -f <ifname>` process per interface, started in the caller's netns, in its own
    session (survives the module's exit). Files in `run_dir`: <if>.sock (wireguard-go), <if>.pid and
    <if>.log (ours, 0600)."""

    name = BACKEND_USERSPACE

    def __init__(self, ifname, run_dir=RUN_DIR, binary=WIREGUARD_GO, timeout=5.0):
        self.ifname = ifname
        self.run_dir = run_dir
        self.binary = binary
        self.timeout = timeout
        self.sock_path = os.path.join(run_dir, ifname + ".sock")
        self.pid_path = os.path.join(run_dir, ifname + ".pid")
        self.log_path = os.path.join(run_dir, ifname + ".log")

    # -- socket
    def _connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.sock_path)
        except OSError:
            s.close()
            raise
        return s

    def socket_live(self):
        try:
            self._connect().close()
            return True
        except OSError:
            return False

    def exchange(self, request):
        """One request on one connection; returns the response text (up to the blank line)."""
        s = self._connect()
        try:
            s.sendall(request.encode("ascii"))
            chunks = []
            tail = b""
            while True:
                data = s.recv(1 << 16)
                if not data:
                    break
                chunks.append(data)
                tail = (tail + data)[-2:]
                if tail == b"\n\n":
                    break
        finally:
            s.close()
        return b"".join(chunks).decode("ascii")

    def read(self):
        return parse_uapi_get(self.exchange("get=1\n\n"))

    def apply(self, change):
        text = render_uapi_set(change)
        if not text:
            return False
        resp = self.exchange(text)
        code = None
        for line in resp.split("\n"):
            if line.startswith("errno="):
                code = int(line[6:])
        if code != 0:
            raise WireGuardError("wireguard-go rejected the configuration of %s: errno %s (%s)" % (
                self.ifname, code, os.strerror(abs(code)) if code else "no answer"))
        return True

    @contextlib.contextmanager
    def config_lock(self):
        """Serializes our read-then-write changes of this interface (the modules, the health probe's session
        restart): an advisory lock on the interface's pid file, which exists exactly while we run it."""
        try:
            fd = os.open(self.pid_path, os.O_RDONLY)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # -- process
    def recorded_pid(self, same_netns=True):
        """PID of our wireguard-go for this interface: the pid file, else the socket's peer credentials;
        checked against /proc/<pid>/cmdline (PID reuse) and, by default, our network namespace."""
        pid = self._pid_from_file() or self._pid_from_socket()
        if pid is None or (same_netns and not _same_netns(pid)):
            return None
        return pid

    def _pid_from_file(self):
        try:
            with open(self.pid_path, "r", encoding="ascii") as f:
                pid = int(f.read().strip() or 0)
            if pid > 0 and _is_wireguard_go(pid, self.ifname, self.binary):
                return pid
        except (OSError, ValueError):
            pass
        return None

    def _pid_from_socket(self):
        try:
            s = self._connect()
        except OSError:
            return None
        try:
            cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid = struct.unpack("3i", cred)[0]
        finally:
            s.close()
        return pid if pid > 0 and _is_wireguard_go(pid, self.ifname, self.binary) else None

    def running(self, link):
        """True if this interface's wireguard-go serves `link` in this netns. Raises if the name is used by
        a wireguard-go of another network namespace (sockets are shared by all namespaces)."""
        live = self.socket_live()
        if live and link is None:
            pid = self.recorded_pid(same_netns=False)
            where = " (pid %d)" % pid if pid else ""
            raise WireGuardError("interface name %r is used by a wireguard-go%s in another network namespace: "
                                 "wireguard-go names must be unique per host" % (self.ifname, where))
        return live and link is not None

    @contextlib.contextmanager
    def name_lock(self):
        """Makes starting and stopping a wireguard-go one step for every network namespace of the machine.
        The socket directory is shared: a stop that cleaned up after a new process of the same name had taken
        the name (a failover between two namespaces of one machine) would delete that process's socket, and
        wireguard-go exits when its socket file is deleted. An advisory lock on the directory itself, so
        nothing is left behind."""
        if not os.path.isdir(self.run_dir):
            os.makedirs(self.run_dir, 0o755)
        fd = os.open(self.run_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def start(self):
        with self.name_lock():
            return self._start()

    def _start(self):
        if os.path.exists(self.sock_path) and not self.socket_live():
            os.unlink(self.sock_path)  # stale: nobody listens
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LOG_LEVEL": "error"}
        try:
            proc = subprocess.Popen([self.binary, "-f", self.ifname], stdin=subprocess.DEVNULL, stdout=log_fd,
                                    stderr=log_fd, cwd="/", env=env, close_fds=True, start_new_session=True)
        except OSError as e:
            raise WireGuardError("cannot start %s: %s" % (self.binary, e))
        finally:
            os.close(log_fd)
        write_atomic(self.pid_path, "%d\n" % proc.pid)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise WireGuardError("%s %s exited with %s: %s" % (self.binary, self.ifname, proc.returncode,
                                                                   self._log_tail()))
            if self.socket_live():
                return proc.pid
            time.sleep(0.005)
        self._kill(proc.pid)
        raise WireGuardError("%s %s: no UAPI socket %s after %.0f s" % (self.binary, self.ifname, self.sock_path,
                                                                        self.timeout))

    def _log_tail(self):
        try:
            with open(self.log_path, "r", encoding="utf-8", errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-3:]) or "no output"
        except OSError:
            return "no log"

    def _kill(self, pid):
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 2.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not _proc_alive(pid):
                    return
                time.sleep(0.01)

    def stop(self, ipr=None):
        """Stops our process (by recorded PID) and removes the link and the files that are ours: socket, pid and
        log files are left to a wireguard-go of the same name in another network namespace."""
        with self.name_lock():
            pid = self.recorded_pid()
            if pid is not None:
                self._kill(pid)  # wireguard-go removes its socket as it exits
            elif ipr is not None:
                # Not ours to signal (started by someone else, daemonized): deleting the TUN link ends it.
                idx = ipr.link_lookup(ifname=self.ifname)
                if idx:
                    ipr.link("del", index=idx[0])
            deadline = time.monotonic() + 3.0
            while self._served_here() and time.monotonic() < deadline:
                time.sleep(0.01)
            self._remove(self.leftovers())
        if ipr is not None:
            idx = ipr.link_lookup(ifname=self.ifname)
            if idx:
                ipr.link("del", index=idx[0])
        return pid

    def _served_here(self):
        """Whether the socket is served by a wireguard-go of this network namespace (or one we cannot tell)."""
        if not self.socket_live():
            return False
        owner = self._pid_from_socket()
        return owner is None or _same_netns(owner)

    def leftovers(self):
        """Files of this name that no live wireguard-go owns: a stale socket, the pid and log files of a process
        that is gone. Empty while a wireguard-go of this name runs in any network namespace."""
        if self.socket_live() or self._pid_from_file() is not None:
            return []
        return [p for p in (self.sock_path, self.pid_path, self.log_path) if os.path.exists(p)]

    @staticmethod
    def _remove(paths):
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def remove_leftovers(self, check=False):
        """Removes the files no live wireguard-go owns (see leftovers); returns whether there were any."""
        if check:
            return bool(self.leftovers())
        with self.name_lock():
            found = self.leftovers()
            self._remove(found)
        return bool(found)
