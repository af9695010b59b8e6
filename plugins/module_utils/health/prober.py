# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Live health of a gateway's peer: a UDP ping/pong through the tunnel at a fixed interval.

Each gateway end runs one prober: it answers the peer's pings and pings the peer's transit address
(UDP port PORT, the socket bound to the tunnel interface, so gateways sharing a host and the transit
addresses do not mix). THRESHOLD consecutive unanswered pings make the peer `Error`; one answer makes it
`Connected` again. Standard library only: the agentless probe process (peer_health_daemon) and the
in-cluster gateway pod (controller/peer_health.py) both run this.
"""

from __future__ import annotations

import errno
import select
import socket
import struct
import time

PORT = 12345          # UDP port of the probe on both tunnel ends (the same default as Liqo's gateways)
INTERVAL = 1.0        # seconds between two pings
THRESHOLD = 3         # consecutive lost pings that make the peer Error
MAGIC = b"LFH1"
PING, PONG = b"P", b"R"
_PACKET = struct.Struct("!4sc I Q")  # magic, type, sequence, sender's monotonic time (ns)
SO_BINDTODEVICE = getattr(socket, "SO_BINDTODEVICE", 25)

CONNECTING, CONNECTED, ERROR = "Connecting", "Connected", "Error"
# the Established condition's message when Connected: the gateway role's publish writes the same, so a rerun of
# the role after the probe wrote Connected changes nothing
CONNECTED_MESSAGE = "handshake and probe through the tunnel succeeded"


class HealthError(ValueError):
    """Bad input; the message names the field and the value."""


def validate(interface, address, port=PORT, interval=INTERVAL, threshold=THRESHOLD):
    """Checks the prober's parameters before anything is opened; raises HealthError naming the field."""
    if not isinstance(interface, str) or not 0 < len(interface) <= 15 or "/" in interface or " " in interface:
        raise HealthError("interface: %r is not a network interface name (1-15 characters)" % (interface,))
    try:
        socket.inet_aton(address)
        if address.count(".") != 3:
            raise OSError
    except (OSError, TypeError):
        raise HealthError("address: %r is not an IPv4 address" % (address,))
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise HealthError("port: %r is not a UDP port (1-65535)" % (port,))
    if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not 0.05 <= interval <= 60:
        raise HealthError("interval: %r is not a number of seconds between 0.05 and 60" % (interval,))
    if not isinstance(threshold, int) or isinstance(threshold, bool) or not 1 <= threshold <= 100:
        raise HealthError("threshold: %r is not a number of lost pings between 1 and 100" % (threshold,))


def encode(kind, seq, sent_ns):
    return _PACKET.pack(MAGIC, kind, seq & 0xFFFFFFFF, sent_ns & 0xFFFFFFFFFFFFFFFF)


def decode(data):
    """(kind, seq, sent_ns) of a probe packet, None for anything else."""
    if len(data) != _PACKET.size:
        return None
    magic, kind, seq, sent = _PACKET.unpack(data)
    if magic != MAGIC or kind not in (PING, PONG):
        return None
    return kind, seq, sent


class HealthState:
    """The peer's state from the outcome of each ping: `Connecting` until the first outcome, `Connected`
    on an answer, `Error` after `threshold` consecutive losses (and while they go on)."""

    def __init__(self, threshold=THRESHOLD, target=""):
        self.threshold, self.target = threshold, target
        self.value, self.reason, self.message = CONNECTING, "Probing", "no health probe answered yet"
        self.losses = 0
        self.latency_us = None
        self.since = None

    def observe(self, answered, rtt_us=None, now=None, why=None):
        """Records one ping's outcome; returns True when `value` changed."""
        before = self.value
        if answered:
            self.losses = 0
            self.latency_us = rtt_us
            self.value, self.reason = CONNECTED, "Established"
            self.message = CONNECTED_MESSAGE
        else:
            self.losses += 1
            if self.losses >= self.threshold:
                self.value, self.latency_us = ERROR, None
                self.reason = "NoInterface" if why == "NoInterface" else "PeerUnreachable"
                self.message = "%d consecutive health probes to %s unanswered%s" % (
                    self.losses, self.target, " (%s)" % why if why else "")
        if self.value != before:
            self.since = now if now is not None else time.time()
            return True
        return False


def restart_due(state, changed, client):
    """Whether a lost ping restarts the WireGuard session: at the Error (both ends); on a client, also at every lost
    ping up to the Error, then at every `threshold`-th.

    A client's restart takes a new source port, so its next handshake goes through the server's Service to
    whichever gateway pod is active now: waiting for the Error (THRESHOLD lost pings) would add those pings to a
    server failover, and a restart that came before the new pod was active is repeated one ping later instead of after
    WireGuard's 5 s handshake retry. That holds for a client still Connecting too: a client pod that takes over while
    the server's gateway fails over as well (both gateway pods replaced at once, as a roll of both clusters does)
    sends its first handshake before the server's new pod is reachable. A single ping lost with the peer alive
    costs one handshake (a round trip). A long outage (a peer down, a wrong key) restarts every `threshold` pings,
    not every ping."""
    if changed and state.value == ERROR:
        return True
    if not client or state.losses < 1:
        return False
    return state.losses <= state.threshold or state.losses % state.threshold == 0


class Prober:
    """The UDP socket of one tunnel end: answers pings, sends one ping per interval, measures the RTT.

    step() sends a ping, serves the socket until the next tick and returns (answered, rtt_us, why) for that
    ping. The socket is reopened when the interface is recreated (its index changed) or was missing."""

    def __init__(self, interface, address, port=PORT, interval=INTERVAL, clock=time.monotonic_ns):
        validate(interface, address, port, interval)
        self.interface, self.address, self.port, self.interval = interface, address, port, interval
        self.clock = clock
        self.sock = None
        self.ifindex = None
        self.seq = 0
        self.answered_pings = 0  # pings of the peer this end answered

    def _index(self):
        try:
            return socket.if_nametoindex(self.interface)
        except OSError:
            return None

    def _open(self):
        index = self._index()
        if index is None:
            self.close()
            return False
        if self.sock is not None and index == self.ifindex:
            return True
        self.close()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_BINDTODEVICE, self.interface.encode())
            sock.bind(("0.0.0.0", self.port))
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.sock, self.ifindex = sock, index
        return True

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock, self.ifindex = None, None

    def _serve(self, until_ns, want_seq):
        """Answers pings and waits for the pong of `want_seq` until `until_ns`; returns its RTT (ns) or None."""
        rtt = None
        while True:
            left = (until_ns - self.clock()) / 1e9
            if left <= 0:
                return rtt
            try:
                ready, _w, _x = select.select([self.sock], [], [], left)
            except (OSError, ValueError):
                return rtt
            if not ready:
                continue
            try:
                data, peer = self.sock.recvfrom(64)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNREFUSED):
                    continue
                return rtt
            pkt = decode(data)
            if pkt is None:
                continue
            kind, seq, sent = pkt
            if kind == PING:
                try:
                    self.sock.sendto(encode(PONG, seq, sent), peer)
                    self.answered_pings += 1
                except OSError:
                    pass
            elif seq == want_seq and rtt is None:
                rtt = max(0, self.clock() - sent)

    def step(self):
        """One interval: (answered, rtt_us or None, why or None)."""
        start = self.clock()
        until = start + int(self.interval * 1e9)
        try:
            if not self._open():
                time.sleep(self.interval)
                return False, None, "NoInterface"
        except OSError as exc:
            time.sleep(self.interval)
            return False, None, "socket on %s: %s" % (self.interface, exc.strerror or exc)
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        why = None
        try:
            self.sock.sendto(encode(PING, self.seq, start), (self.address, self.port))
        except OSError as exc:
            why = "send: %s" % (exc.strerror or exc)
        rtt = self._serve(until, self.seq)
        if rtt is None:
            return False, None, why
        return True, rtt / 1000.0, None


def latency_text(latency_us):
    """A latency as a Go duration string (the Connection's status.latency.value), e.g. '0.412ms'."""
    return "%.3fms" % (latency_us / 1000.0)
