# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel change notifications of the network namespaces the drift checks read, as they happen.

For each namespace, two netlink sockets are opened inside it (a short-lived thread joins it with setns(2); a socket
stays in the namespace it was made in): rtnetlink (links, addresses, routes and rules of IPv4 and IPv6, forwarding
settings) and nfnetlink's nftables group (tables, chains, rules, sets). One thread polls every socket, and a pidfd
per watched process (wireguard-go, a health probe). A message that can undo what a run built (a link deleted or
changed, an address, route or rule deleted, any nftables change, a forwarding setting) or a watched process's exit
calls `on_event(namespace, what)`.

A socket keeps its namespace alive: the poller drops the sockets of a named namespace whose file is gone or names
another namespace within POLL seconds, so a deleted namespace is not held by the controller. Only the poller closes
descriptors (between two polls), so a number it polls is never reused under it.
"""
from __future__ import annotations

import logging
import os
import select
import socket
import struct
import threading
from typing import Callable, Dict, List, Optional

from controller.drift import NETNS_DIR, in_netns
from controller.logs import fields

log = logging.getLogger("controller.kernel_events")

NETLINK_ROUTE, NETLINK_NETFILTER = 0, 12
SOL_NETLINK, NETLINK_ADD_MEMBERSHIP = 270, 1
# rtnetlink multicast groups: link, IPv4/IPv6 addresses, routes, rules, netconf (forwarding)
RT_GROUPS = (1, 5, 7, 8, 9, 11, 19, 24, 25)
NFNLGRP_NFTABLES = 7
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_NEWGEN = 15
# rtnetlink messages that can undo a build (a new route or rule cannot remove one of ours)
RT_EVENTS = {16: "link changed", 17: "link deleted", 21: "address deleted", 25: "route deleted", 33: "rule deleted",
             80: "forwarding setting changed"}
_NLHDR = struct.Struct("=IHHII")
POLL = 0.2          # seconds between checks that each named namespace is still the one listened in
RCVBUF = 1 << 20
_READ = select.POLLIN | select.POLLERR | select.POLLHUP | select.POLLNVAL


def classify(buf: bytes) -> Optional[str]:
    """What a batch of netlink messages did that can undo a build, or None (new routes, the nftables generation)."""
    off = 0
    while off + _NLHDR.size <= len(buf):
        length, mtype = _NLHDR.unpack_from(buf, off)[:2]
        if mtype in RT_EVENTS:
            return RT_EVENTS[mtype]
        if mtype >> 8 == NFNL_SUBSYS_NFTABLES and mtype & 0xff != NFT_MSG_NEWGEN:
            return "nftables changed"
        if length < _NLHDR.size:
            break
        off += (length + 3) & ~3
    return None


def netns_inode(name: Optional[str]) -> Optional[int]:
    try:
        return os.stat(os.path.join(NETNS_DIR, name) if name else "/proc/thread-self/ns/net").st_ino
    except OSError:
        return None


def _netlink(proto: int, groups) -> socket.socket:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, proto)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        s.bind((0, 0))
        for g in groups:
            s.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, g)
    except OSError:
        s.close()
        raise
    return s


def open_sockets() -> List[socket.socket]:
    """The two notification sockets, in the calling thread's namespace."""
    rt = _netlink(NETLINK_ROUTE, RT_GROUPS)
    try:
        return [rt, _netlink(NETLINK_NETFILTER, (NFNLGRP_NFTABLES,))]
    except OSError:
        rt.close()
        raise


class Space:
    """What is listened to in one namespace: its sockets and the pidfds of its processes."""

    def __init__(self, netns: Optional[str], inode: int, socks: List[socket.socket]):
        self.netns, self.inode, self.socks = netns, inode, socks
        self.pidfds: Dict[int, tuple] = {}      # pid -> (fd, what)
        self.reported: set = set()              # pids whose exit (or absence) was told

    def fds(self) -> list:
        return [s.fileno() for s in self.socks] + [entry[0] for entry in self.pidfds.values()]


class KernelEvents:
    """Notifications of a set of namespaces, kept to match `watch()`, told to `on_event(namespace, what)`."""

    def __init__(self, on_event: Callable[[Optional[str], str], None]):
        self.on_event = on_event
        self.spaces: Dict[Optional[str], Space] = {}
        self.unlistenable: Dict[Optional[str], int] = {}   # namespace -> inode where sockets could not be opened
        self._closing: list = []                            # sockets and fds the poller closes
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------------ what to listen to (any thread)
    def watch(self, wanted: Dict[Optional[str], Dict[int, str]]) -> None:
        """Listens in exactly the namespaces of `wanted` ({namespace: {pid: what}}, None: this process's own)."""
        told = []
        with self._lock:
            for ns in [ns for ns, sp in self.spaces.items() if ns not in wanted or netns_inode(ns) != sp.inode]:
                self._drop(ns)
            for ns, pids in wanted.items():
                sp = self.spaces.get(ns) or self._open(ns)
                if sp is not None:
                    told += self._set_pids(sp, pids)
            if self._thread is None and self.spaces:
                self._thread = threading.Thread(target=self._poll, name="kernel-events", daemon=True)
                self._thread.start()
        for ns, what in told:
            self.on_event(ns, what)
        self._wake()

    def _open(self, ns: Optional[str]) -> Optional[Space]:
        inode = netns_inode(ns)
        if inode is None or self.unlistenable.get(ns) == inode:
            return None
        try:
            socks = in_netns(ns, open_sockets, timeout=5.0)
        except (OSError, TimeoutError) as exc:
            self.unlistenable[ns] = inode
            log.warning("no kernel notifications of a network namespace: the periodic drift check covers it",
                        extra=fields(netns=ns or "own", error=str(exc)))
            return None
        self.unlistenable.pop(ns, None)
        sp = self.spaces[ns] = Space(ns, inode, socks)
        return sp

    def _set_pids(self, sp: Space, pids: Dict[int, str]) -> list:
        told = []
        for pid in [p for p in sp.pidfds if p not in pids]:
            self._closing.append(sp.pidfds.pop(pid)[0])
        sp.reported &= set(pids)
        for pid, what in pids.items():
            if pid in sp.pidfds or pid in sp.reported:
                continue
            try:
                sp.pidfds[pid] = (os.pidfd_open(pid), what)
            except OSError:      # gone already: the drift check finds it
                sp.reported.add(pid)
                told.append((sp.netns, f"{what} (pid {pid}) is not running"))
        return told

    def _drop(self, ns: Optional[str]) -> None:
        sp = self.spaces.pop(ns)
        self._closing += sp.socks + [entry[0] for entry in sp.pidfds.values()]

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            for ns in list(self.spaces):
                self._drop(ns)
            self._close_pending()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    # ------------------------------------------------------------------ the poller
    def _close_pending(self) -> None:
        for x in self._closing:
            try:
                x.close() if isinstance(x, socket.socket) else os.close(x)
            except OSError:
                pass
        self._closing = []

    def _poll(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                for ns in [ns for ns, sp in self.spaces.items() if ns and netns_inode(ns) != sp.inode]:
                    self._drop(ns)       # deleted or replaced: let it go
                self._close_pending()
                owner = {fd: sp for sp in self.spaces.values() for fd in sp.fds()}
            poller = select.poll()
            poller.register(self._wake_r, select.POLLIN)
            for fd in owner:
                poller.register(fd, _READ)
            told = []
            for fd, _event in poller.poll(POLL * 1000):
                if fd == self._wake_r:
                    _drain_pipe(fd)
                    continue
                with self._lock:
                    told += self._readable(owner[fd], fd)
            for ns, what in told:
                self.on_event(ns, what)

    def _readable(self, sp: Space, fd: int) -> list:
        if self.spaces.get(sp.netns) is not sp:
            return []            # dropped meanwhile
        for pid, (pfd, what) in list(sp.pidfds.items()):
            if pfd == fd:
                del sp.pidfds[pid]
                sp.reported.add(pid)
                self._closing.append(pfd)
                return [(sp.netns, f"{what} (pid {pid}) exited")]
        sock = next((s for s in sp.socks if s.fileno() == fd), None)
        what = _drain(sock) if sock is not None else None      # None: a pidfd no longer watched
        return [(sp.netns, what)] if what else []


def _drain_pipe(fd: int) -> None:
    try:
        while os.read(fd, 64):
            pass
    except BlockingIOError:
        pass


def _drain(sock: socket.socket) -> Optional[str]:
    found = None
    while True:
        try:
            buf = sock.recv(65536)
        except BlockingIOError:
            return found
        except OSError:     # ENOBUFS: notifications were lost; something changed
            found = found or "notifications overflowed"
            continue
        found = found or classify(buf)
