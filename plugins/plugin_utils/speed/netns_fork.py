# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a function in a forked child of the Ansible worker, optionally inside a named network namespace.

A host module run in-process must not change the worker: it may enter a network namespace, start daemons
(wireguard-go) or leave file descriptors behind. The child joins the namespace the way ``ip netns exec``
does before it execs (the network namespace, then a private mount namespace with that namespace's own
``/sys``), runs the function with fds 0-2 on /dev/null and a private file, and sends back its JSON result
through a pipe nothing else inherits. Python 3.11 has no ``os.setns``/``os.unshare``: libc through ctypes.
Unlike ``ip netns exec``, it does not bind-mount ``/etc/netns/<name>/*`` over ``/etc``: the collection's host
modules read nothing there.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import json
import os
import select
import signal
import tempfile
import typing as t

from ansible_collections.liqo.fabric.plugins.module_utils.host.manifest import NETNS_NAME_ENV
from ansible_collections.liqo.fabric.plugins.plugin_utils.netns_name import NETNS_RUN_DIR, valid_netns_name

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MNT_DETACH = 2


class ForkError(Exception):
    """The child could not run the function (namespace not entered, killed, no result)."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise ForkError("%s: %s" % (what, os.strerror(err) or errno.errorcode.get(err, err)))


def enter_netns(name: str) -> None:
    """Join /run/netns/<name> and give this process its own /sys for it (what `ip netns exec` does)."""
    if not valid_netns_name(name):
        raise ForkError("invalid network namespace name %r" % (name,))
    libc = _libc()
    path = os.path.join(NETNS_RUN_DIR, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ForkError("network namespace %r: %s" % (name, exc.strerror)) from None
    try:
        _check(libc.setns(fd, CLONE_NEWNET), "setns(%s)" % path)
    finally:
        os.close(fd)
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Our mounts must not propagate back to the host's mount namespace.
    _check(libc.mount(b"", b"/", b"none", MS_SLAVE | MS_REC, None), "mount --make-rslave /")
    flags = MS_RDONLY if os.statvfs("/sys").f_flag & os.ST_RDONLY else 0
    libc.umount2(b"/sys", MNT_DETACH)  # as ip does: a /sys that cannot be detached is mounted over
    _check(libc.mount(name.encode(), b"/sys", b"sysfs", flags, None), "mount sysfs on /sys")
    # a hint for dataplane_manifest.where(), which checks it: it need not stat every name under /run/netns (a lab
    # has one per node and pod)
    os.environ[NETNS_NAME_ENV] = name


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _child(fn: t.Callable[[], t.Any], netns: str | None, result_w: int, output_fd: int) -> t.NoReturn:
    # No garbage collection in this short-lived child: a collection walks the objects inherited from the worker
    # (ansible-playbook with its inventory and variables), writing to each one's header, so every page of the heap is
    # copied.
    gc.disable()
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        # Anything written straight to fd 1/2 (a C library, a subprocess) must not reach the worker's
        # stdout, which may be the stream ansible-runner parses.
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if netns:
            enter_netns(netns)
        payload = {"value": fn()}
    except BaseException as exc:  # pylint: disable=broad-exception-caught  # reported to the parent
        payload = {"error": str(exc) if isinstance(exc, ForkError) else "%s: %s" % (type(exc).__name__, exc)}
    try:
        _write_all(result_w, json.dumps(payload).encode())
    finally:
        os._exit(0)  # no atexit handlers, no flushing of the worker's buffers


def _start(fn: t.Callable[[], t.Any], netns: str | None, output: t.IO[bytes]) -> tuple[int, int]:
    """Forks the child; returns (its pid, the read end of its result pipe)."""
    result_r, result_w = os.pipe()  # O_CLOEXEC: subprocesses of the child never hold the write end
    pid = os.fork()
    if pid == 0:
        os.close(result_r)
        _child(fn, netns, result_w, output.fileno())
    os.close(result_w)
    return pid, result_r


def _outcome(data: bytes, status: int, output: t.IO[bytes]) -> tuple[t.Any, str]:
    output.seek(0)
    written = output.read().decode("utf-8", "replace")
    if not data:
        raise ForkError("the child process ended without a result (%s)" % _describe(status))
    payload = json.loads(data)
    if "error" in payload:
        raise ForkError(payload["error"])
    return payload["value"], written


def run_forked(fn: t.Callable[[], t.Any], netns: str | None = None) -> tuple[t.Any, str]:
    """fn() in a forked child (inside `netns` if given). Returns (its JSON-able value, what the child wrote
    to fds 1 and 2). Raises ForkError if the child could not run fn or died; if the caller is interrupted
    (a task timeout, ^C), the child is killed before the exception goes on."""
    with tempfile.TemporaryFile(prefix="liqo-fabric-fork-") as output:
        pid, result_r = _start(fn, netns, output)
        try:
            data = _read_all(result_r)
            dummy, status = os.waitpid(pid, 0)
        except BaseException:
            _kill(pid)
            raise
        finally:
            os.close(result_r)
        return _outcome(data, status, output)


def run_forked_many(jobs: t.Mapping[str, tuple[t.Callable[[], t.Any], str | None]],
                    parallel: int = 4) -> dict[str, tuple[t.Any, str] | ForkError]:
    """run_forked for many jobs (key -> (fn, netns)), at most `parallel` children at a time: one fork per job
    from this process, no other process started. Returns key -> (value, written) or the job's ForkError.
    Interrupted, every running child is killed before the exception goes on."""
    pending = list(jobs.items())
    running: dict[int, tuple[str, int, t.IO[bytes], list[bytes]]] = {}  # result fd -> (key, pid, output, chunks)
    done: dict[str, tuple[t.Any, str] | ForkError] = {}
    poller = select.poll()
    try:
        while pending or running:
            while pending and len(running) < max(1, parallel):
                key, (fn, netns) = pending.pop(0)
                output = tempfile.TemporaryFile(prefix="liqo-fabric-fork-")
                pid, result_r = _start(fn, netns, output)
                running[result_r] = (key, pid, output, [])
                poller.register(result_r, select.POLLIN | select.POLLHUP)
            for fd, dummy in poller.poll():
                key, pid, output, chunks = running[fd]
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    chunks.append(chunk)
                    continue
                poller.unregister(fd)
                os.close(fd)
                del running[fd]
                dummy, status = os.waitpid(pid, 0)
                try:
                    done[key] = _outcome(b"".join(chunks), status, output)
                except ForkError as exc:
                    done[key] = exc
                finally:
                    output.close()
    except BaseException:
        for fd, (key, pid, output, chunks) in running.items():
            _kill(pid)
            os.close(fd)
            output.close()
        raise
    return done


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return "killed by signal %d" % os.WTERMSIG(status)
    return "exit status %d" % os.waitstatus_to_exitcode(status)
