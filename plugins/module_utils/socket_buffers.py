# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""UDP socket buffers of a running wireguard-go, as a desired state.

Debian's wireguard-go (0.0.20220316) leaves its UDP sockets at the netns's default buffer (208 KiB here).
A receiving gateway at ~300 Mbit/s then drops thousands of tunnel packets per second before wireguard-go
reads them (UdpRcvbufErrors), and TCP through the tunnel pays with retransmits. Later wireguard-go releases
size these buffers themselves (7 MiB); raising net.core.rmem_default instead would change every socket of the
host. So the fabric sizes only wireguard-go's own sockets: it takes a copy of each socket's descriptor from the
process (pidfd_getfd, Linux >= 5.6, needs the rights of ptrace, i.e. root) and sets SO_RCVBUFFORCE and
SO_SNDBUFFORCE on it. A buffer is never shrunk. A socket that wireguard-go opens again (a new listen port, a
restart) starts from the default and is sized by the next run.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket

SYS_PIDFD_OPEN = 434   # the same number on every architecture (syscalls from 424 on are shared)
SYS_PIDFD_GETFD = 438
SO_SNDBUFFORCE = 32    # asm-generic values (x86, arm, arm64, ...)
SO_RCVBUFFORCE = 33
DEFAULT_SIZE = 7 << 20  # what later wireguard-go releases set on their own sockets
_KINDS = (("rcvbuf", socket.SO_RCVBUF, SO_RCVBUFFORCE), ("sndbuf", socket.SO_SNDBUF, SO_SNDBUFFORCE))


class SocketBufferError(OSError):
    """The process's sockets cannot be reached (no pidfd_getfd in this kernel, no permission, process gone)."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _syscall(libc, number, *args):
    res = libc.syscall(number, *args)
    if res < 0:
        err = ctypes.get_errno()
        raise SocketBufferError(err, os.strerror(err))
    return res


def check_size(size) -> None:
    """Raises ValueError naming udp_buffer_size unless `size` is 0 or a positive number of bytes."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError("udp_buffer_size: %r must be 0 (leave the sockets alone) or a size in bytes" % (size,))


def _capped(size):
    return min(size, 0x7FFFFFFF // 2)  # the kernel doubles it into an int


def reported(size: int) -> int:
    """What getsockopt reports after setting `size`: the kernel doubles the value (room for its bookkeeping)."""
    return _capped(size) * 2


def _udp_sockets(libc, pid):
    """(socket, 'udp <addr>:<port>') of every IPv4/IPv6 datagram socket of `pid`, as local copies."""
    pidfd = _syscall(libc, SYS_PIDFD_OPEN, pid, 0)
    found = []
    try:
        for name in sorted(os.listdir("/proc/%d/fd" % pid), key=int):
            try:
                if not os.readlink("/proc/%d/fd/%s" % (pid, name)).startswith("socket:"):
                    continue
                local = _syscall(libc, SYS_PIDFD_GETFD, pidfd, int(name), 0)
            except OSError as e:
                if e.errno in (errno.ENOENT, errno.EBADF):  # closed meanwhile
                    continue
                raise
            sock = socket.socket(fileno=local)
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_DGRAM:
                host, port = sock.getsockname()[:2]
                found.append((sock, "udp %s:%d" % ("[%s]" % host if sock.family == socket.AF_INET6 else host, port)))
            else:
                sock.close()
    except BaseException:
        for sock, dummy in found:
            sock.close()
        raise
    finally:
        os.close(pidfd)
    return found


def _line(label, values):
    return " ".join([label] + ["%s %d" % (kind, values[kind]) for kind, dummy, dummy2 in _KINDS])


def sync_buffers(pid: int, size: int, check: bool = False) -> dict:
    """Every UDP socket of process `pid` gets receive and send buffers of at least `size` bytes (0: leave them).

    Returns changed, before and after (a line per socket: 'udp <addr>:<port> rcvbuf N sndbuf N', as getsockopt
    reports them) and writes. Raises SocketBufferError when the sockets cannot be reached."""
    check_size(size)
    if not size:
        return {"changed": False, "before": [], "after": [], "writes": 0}
    try:
        socks = _udp_sockets(_libc(), pid)
    except OSError as e:
        if e.errno == errno.ENOSYS:
            raise SocketBufferError(e.errno, "this kernel has no pidfd_getfd (Linux >= 5.6 is needed)") from None
        raise SocketBufferError(e.errno, "the sockets of wireguard-go (pid %d): %s" % (pid, e.strerror)) from None
    want = reported(size)
    before, after, writes = [], [], 0
    try:
        for sock, label in socks:
            now = {kind: sock.getsockopt(socket.SOL_SOCKET, get) for kind, get, dummy in _KINDS}
            before.append(_line(label, now))
            for kind, get, force in _KINDS:
                if now[kind] < want:
                    writes += 1
                    if not check:
                        sock.setsockopt(socket.SOL_SOCKET, force, _capped(size))
            after.append(_line(label, {kind: max(now[kind], want) if check else sock.getsockopt(socket.SOL_SOCKET, get)
                                       for kind, get, dummy in _KINDS}))
    finally:
        for sock, dummy in socks:
            sock.close()
    return {"changed": writes > 0, "before": before, "after": after, "writes": 0 if check else writes}
