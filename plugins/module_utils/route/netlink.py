# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric's rtnetlink transport: one NETLINK_ROUTE socket, its dumps, and writes packed back to back.

Every write of an apply goes into a few large sendmsg() calls on one socket, followed by a NOOP barrier whose
ACK proves the kernel processed everything before it. Writes carry no ACK request; the kernel reports failures
anyway (netlink always acks errors), so 10,000 routes cost 10,000 kernel operations and a handful of syscalls.
Messages are packed with `struct`. pyroute2 is only used to open the socket inside a named network namespace
(`netns=`).
"""
from __future__ import annotations

import os
import socket
import struct
from typing import Dict, List, Optional, Tuple

# netlink and rtnetlink constants (linux/netlink.h, linux/rtnetlink.h, linux/if_link.h).
NETLINK_ROUTE = 0
SOL_NETLINK = 270
NETLINK_CAP_ACK = 10
NETLINK_EXT_ACK = 11
NETLINK_GET_STRICT_CHK = 12
NLMSG_NOOP, NLMSG_ERROR, NLMSG_DONE = 1, 2, 3
NLM_F_REQUEST, NLM_F_MULTI, NLM_F_ACK = 0x1, 0x2, 0x4
NLM_F_DUMP = 0x300
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400
NLM_F_ACK_TLVS = 0x200
NLMSGERR_ATTR_MSG = 1
RTM_NEWLINK, RTM_GETLINK = 16, 18
RTM_NEWROUTE, RTM_DELROUTE, RTM_GETROUTE = 24, 25, 26
RTM_NEWRULE, RTM_DELRULE, RTM_GETRULE = 32, 33, 34
IFLA_IFNAME, IFLA_MTU = 3, 4

_NLHDR = struct.Struct("=IHHII")
_NLATTR = struct.Struct("=HH")
_RTMSG = struct.Struct("=BBBBBBBBI")  # also the layout of struct fib_rule_hdr
_U32 = struct.Struct("=I")
_I32 = struct.Struct("=i")


class NetlinkError(RuntimeError):
    def __init__(self, msg: str, failures: Optional[list] = None):
        super().__init__(msg)
        self.failures = failures or []


def _attr(atype: int, payload: bytes) -> bytes:
    n = 4 + len(payload)
    return _NLATTR.pack(n, atype) + payload + b"\0" * ((4 - n % 4) % 4)


def _parse_attrs(buf, off: int, end: int) -> Dict[int, bytes]:
    attrs = {}
    while off + 4 <= end:
        alen, atype = _NLATTR.unpack_from(buf, off)
        if alen < 4:
            break
        attrs[atype & 0x3FFF] = buf[off + 4:off + alen]
        off += (alen + 3) & ~3
    return attrs


class RtnlSocket:
    """One NETLINK_ROUTE socket: dumps, and batched writes checked by a final ACK barrier."""

    CHUNK = 96 * 1024  # bytes per sendmsg(); below the default 208 KiB sndbuf

    def __init__(self, netns: Optional[str] = None):
        if netns:
            # Imported here, not at module load: importing pyroute2 is slow and only this needs it.
            try:
                from pyroute2 import netns as pyroute2_netns  # pylint: disable=import-outside-toplevel
            except ImportError:
                raise NetlinkError("pyroute2 is required to open a socket in a named network namespace") from None
            self.sock = pyroute2_netns.create_socket(netns, socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE, flags=0)
        else:
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        for opt in (NETLINK_GET_STRICT_CHK, NETLINK_EXT_ACK, NETLINK_CAP_ACK):
            try:
                self.sock.setsockopt(SOL_NETLINK, opt, 1)
            except OSError:
                pass  # older kernels: dumps are filtered again in userspace, errors lose their text
        for opt, fallback in ((getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF),):
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, opt, 8 * 1024 * 1024)
            except OSError:
                self.sock.setsockopt(socket.SOL_SOCKET, fallback, 8 * 1024 * 1024)
        self.sock.bind((0, 0))
        self.seq = 0
        self.writes = 0
        self._buf = bytearray(1024 * 1024)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _recv(self, flags=0):
        n = self.sock.recv_into(self._buf, len(self._buf), flags)
        return memoryview(self._buf)[:n]

    @staticmethod
    def _error(data, off: int, flags: int, end: int) -> Tuple[int, str]:
        code = -_I32.unpack_from(data, off)[0]
        text = ""
        if flags & NLM_F_ACK_TLVS:
            # With NETLINK_CAP_ACK the echoed request is its 16-byte header only.
            orig_len = _NLHDR.unpack_from(data, off + 4)[0] if code and not flags & 0x100 else 16
            attrs = _parse_attrs(data, off + 4 + ((orig_len + 3) & ~3), end)
            if NLMSGERR_ATTR_MSG in attrs:
                text = bytes(attrs[NLMSGERR_ATTR_MSG]).rstrip(b"\0").decode(errors="replace")
        return code, text

    def dump(self, msg_type: int, body: bytes, attrs: bytes = b"") -> List[bytes]:
        """Sends one dump request, returns the payload (family header + attributes) of every reply."""
        seq = self._next_seq()
        payload = body + attrs
        self.sock.send(_NLHDR.pack(16 + len(payload), msg_type, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + payload)
        out = []
        while True:
            data = self._recv()
            off = 0
            while off + 16 <= len(data):
                mlen, mtype, mflags, mseq, _pid = _NLHDR.unpack_from(data, off)
                if mlen < 16:
                    raise NetlinkError("malformed netlink reply")
                if mseq == seq:
                    if mtype == NLMSG_DONE:
                        return out
                    if mtype == NLMSG_ERROR:
                        code, text = self._error(data, off + 16, mflags, off + mlen)
                        if code:
                            raise NetlinkError(f"dump failed: {os.strerror(code)} {text}".strip())
                        return out
                    out.append(bytes(data[off + 16:off + mlen]))
                off += (mlen + 3) & ~3

    def apply(self, messages: List[Tuple[int, int, bytes]]) -> List[Tuple[int, int, str]]:
        """Sends (type, flags, payload) messages back to back, then a NOOP with ACK as a barrier.
        Returns failures as (index into messages, errno, kernel text); [] when all applied."""
        failures: List[Tuple[int, int, str]] = []
        first_seq = self.seq + 1
        chunk = bytearray()
        for mtype, mflags, payload in messages:
            seq = self._next_seq()
            chunk += _NLHDR.pack(16 + len(payload), mtype, mflags | NLM_F_REQUEST, seq, 0)
            chunk += payload
            if len(chunk) >= self.CHUNK:
                self._send_chunk(chunk, first_seq, failures)
                chunk = bytearray()
        barrier = self._next_seq()
        chunk += _NLHDR.pack(16, NLMSG_NOOP, NLM_F_REQUEST | NLM_F_ACK, barrier, 0)
        self.sock.send(chunk)
        self.writes += len(messages)
        while not self._collect(first_seq, failures, barrier, 0):
            pass
        return failures

    def _send_chunk(self, chunk, first_seq, failures):
        self.sock.send(chunk)
        # Drain error replies so a flood of failures cannot overflow the receive buffer.
        while True:
            try:
                if self._collect(first_seq, failures, None, socket.MSG_DONTWAIT):
                    break
            except BlockingIOError:
                break

    def _collect(self, first_seq, failures, barrier, flags) -> bool:
        data = self._recv(flags)
        off = 0
        done = False
        while off + 16 <= len(data):
            mlen, mtype, mflags, mseq, _pid = _NLHDR.unpack_from(data, off)
            if mlen < 16:
                raise NetlinkError("malformed netlink reply")
            if mtype == NLMSG_ERROR:
                code, text = self._error(data, off + 16, mflags, off + mlen)
                if mseq == barrier:
                    done = True
                elif code and mseq >= first_seq:
                    failures.append((mseq - first_seq, code, text))
            off += (mlen + 3) & ~3
        return done


# --- links --------------------------------------------------------------------------------------------

def read_links(sock: RtnlSocket) -> Dict[int, str]:
    """{ifindex: ifname} of the namespace."""
    links = {}
    for p in sock.dump(RTM_GETLINK, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)):
        index = struct.unpack_from("=i", p, 4)[0]
        attrs = _parse_attrs(p, 16, len(p))
        if IFLA_IFNAME in attrs:
            links[index] = bytes(attrs[IFLA_IFNAME]).rstrip(b"\0").decode()
    return links


def read_link_mtus(sock: RtnlSocket) -> Dict[str, Optional[int]]:
    """{ifname: mtu} of the namespace (one RTM_GETLINK dump); None for a link that reports no MTU."""
    out = {}
    for p in sock.dump(RTM_GETLINK, struct.pack("=BxHiII", 0, 0, 0, 0, 0)):
        attrs = _parse_attrs(p, 16, len(p))
        if IFLA_IFNAME in attrs:
            name = bytes(attrs[IFLA_IFNAME]).rstrip(b"\0").decode()
            out[name] = _U32.unpack(bytes(attrs[IFLA_MTU])[:4])[0] if IFLA_MTU in attrs else None
    return out


# --- writes -------------------------------------------------------------------------------------------

def _raise_failures(failures, describe):
    lines = [f"{describe(i)}: {os.strerror(code)}{' (' + text + ')' if text else ''}" for i, code, text in failures[:20]]
    more = f" (and {len(failures) - 20} more)" if len(failures) > 20 else ""
    raise NetlinkError("kernel refused: " + "; ".join(lines) + more, failures)
