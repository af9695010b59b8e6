# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pods of this host seen from the host: the network namespaces at the other end of its veth links, and
commands run inside them (liqo.fabric.pod_probe: a pod's own traffic without a shell or tools in its image).

A pod's namespace is found the way the kernel links it to the node: a veth of the host's namespace carries the
peer namespace's id (IFLA_LINK_NETNSID); the named namespaces (/run/netns: CNI's cni-*, the lab's), then those
of running processes (/proc/<pid>/ns/net: runtimes that keep pod namespaces elsewhere), are matched to those ids
(RTM_GETNSID), then read from inside. Overlapping pod CIDRs of other clusters on the same machine
(the lab) never mix: only namespaces attached to this host's links count. setns(2) is per thread on Linux, so
each namespace is entered by a short-lived thread and a process it starts runs there; Python 3.11 has no
os.setns: libc through ctypes."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading
import time

NETNS_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


class PodNetnsError(Exception):
    pass


def in_netns(path, fn, timeout=30.0):
    """fn() in a fresh thread that joined the namespace at `path`; its result, or its exception raised here."""
    box = {}

    def body():
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise PodNetnsError("setns(%s): %s" % (path, os.strerror(err)))
            finally:
                os.close(fd)
            box["result"] = fn()
        except BaseException as exc:  # pylint: disable=broad-except
            box["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise PodNetnsError("%s: nothing answered in %s s" % (path, timeout))
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _candidates():
    """Namespace files to match: the named ones first (/run/netns: CNI's cni-*, the lab's), then one
    /proc/<pid>/ns/net per namespace not seen yet (a runtime that keeps its pods' namespaces elsewhere, such as
    containerd's netns_mounts_under_state_dir: the pod's sandbox process is in it all the same)."""
    try:
        names = sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        names = []
    for name in names:
        yield os.path.join(NETNS_DIR, name)
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        yield "/proc/%s/ns/net" % pid


# pyroute2 for links and namespace ids: a few messages with nested attributes; route tables take route/'s own stack (route/__init__.py)
def attached_namespaces():
    """{path: nsid} of the namespaces at the other end of this namespace's links (one path per namespace)."""
    from pyroute2 import IPRoute  # pylint: disable=import-outside-toplevel
    with IPRoute() as ipr:
        peers = {link.get_attr("IFLA_LINK_NETNSID") for link in ipr.get_links()} - {None}
        out, seen = {}, set()
        for path in _candidates():
            if set(out.values()) >= peers:
                break
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:  # a process that exited, a file that is not a namespace
                continue
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                nsid = (ipr.get_netnsid(fd=fd) or {}).get("nsid")
            except Exception:  # pylint: disable=broad-except  # a stale or foreign file: not ours
                nsid = None
            finally:
                os.close(fd)
            if nsid in peers and nsid not in out.values():
                out[path] = nsid
        return out


def _ipv4_addresses():
    from pyroute2 import IPRoute  # pylint: disable=import-outside-toplevel
    with IPRoute() as ipr:
        return [a.get_attr("IFA_ADDRESS") for a in ipr.get_addr(family=socket.AF_INET)]


def pod_namespaces(addresses):
    """{address: namespace path} for those of `addresses` that belong to a pod attached to this host."""
    wanted, found = set(addresses), {}
    for path in attached_namespaces():
        if wanted <= set(found):
            break
        for address in in_netns(path, _ipv4_addresses):
            if address in wanted:
                found[address] = path
    return found


def start_in(path, argv, settle=0.3):
    """A background process started in the namespace at `path` (None: this one), in its own session: (pid, None),
    or (None, its error output) when it exited within `settle` seconds (a port in use, a bad address)."""
    def start():
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(settle)
        if proc.poll() is not None:
            return None, proc.stderr.read().decode(errors="replace").strip() or "exited"
        return proc.pid, None
    return start() if path is None else in_netns(path, start)


def run_in(path, argv, timeout):
    """A command run in the namespace at `path` (None: this one): (returncode, stdout)."""
    def run():
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        return proc.returncode, proc.stdout
    return run() if path is None else in_netns(path, run, timeout + 5)
