"""A TCP transfer between two lab network namespaces, with no tool but Python: a sink that counts what it receives,
a source that sends `size` bytes."""
from __future__ import annotations

import subprocess
import sys

from tests.lab import netns

SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _a = s.accept(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    n += len(b)
print(n, flush=True)
"""

SOURCE = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
left = int(sys.argv[3]); chunk = b"x" * (1 << 16)
while left > 0:
    c.sendall(chunk[:left]); left -= min(left, len(chunk))
c.close()
"""


def transfer(src_ns: str, dst_ns: str, address: str, port: int, size: int, timeout: float = 60) -> int:
    """Sends `size` bytes from `src_ns` to `address`:`port`, served by a sink in `dst_ns`; the bytes it received."""
    sink = netns.popen_in(dst_ns, [sys.executable, "-c", SINK, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout.readline().strip() == "ready"
        netns.exec_in(src_ns, [sys.executable, "-c", SOURCE, address, str(port), str(size)], timeout=timeout)
        return int(sink.stdout.readline().strip() or 0)
    finally:
        sink.kill()
        sink.wait()


STREAM = r"""
import select, socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.settimeout(None)   # a send waits while the path is down (a full send buffer): TCP gives up, not the socket
c.setsockopt(socket.IPPROTO_TCP, 18, int(float(sys.argv[4]) * 1000))   # TCP_USER_TIMEOUT: data unacknowledged so long
print("connected", flush=True)
sent, chunk = 0, b"x" * 1024
try:
    while not select.select([sys.stdin], [], [], float(sys.argv[3]))[0]:   # until stdin closes
        c.sendall(chunk)
        sent += len(chunk)
    c.shutdown(socket.SHUT_WR)
    print("sent", sent, flush=True)
except OSError as e:
    print("error", sent, e, flush=True)
"""


class Flow:
    """One long-lived TCP connection, 1 KiB every `interval` s, from one network namespace to `address`:`port`
    served by a sink in another, each entered through an argv prefix (`ip netns exec NS`, `nsenter -t PID -n`)
    while something happens. stop() ends it cleanly and says whether it lived throughout. `give_up`: the flow is
    dead when data stays unacknowledged that long (TCP_USER_TIMEOUT); an outage of a minute can put TCP's next
    retransmission a minute later, so a flow meant to outlive one needs minutes."""

    def __init__(self, src_enter: list, dst_enter: list, address: str, port: int, interval: float = 0.05,
                 give_up: float = 10):
        self.sink = subprocess.Popen(dst_enter + [sys.executable, "-c", SINK, str(port)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.sink.stdout.readline().strip() == "ready"
        self.source = subprocess.Popen(src_enter + [sys.executable, "-c", STREAM, address, str(port), str(interval),
                                                    str(give_up)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.source.stdout.readline().strip()
        if line != "connected":
            self.kill()
            raise AssertionError(f"flow to {address}:{port}: not connected: {line} {self.source.stderr.read()[-500:]}")

    def stop(self, timeout: float = 30) -> dict:
        """{sent, received (bytes), error (the source's, '' if none)}: a flow that lived throughout has no error and
        received == sent."""
        try:
            try:
                out, err = self.source.communicate(input="", timeout=timeout)   # stdin closed: the source ends
            except subprocess.TimeoutExpired:
                return {"sent": -1, "received": -1, "error": f"the source's send blocked for {timeout:g} s"}
            words = (out.strip().splitlines() or [""])[-1].split(" ", 2)
            sent = int(words[1]) if len(words) > 1 else 0
            error = "" if words[0] == "sent" else (words[2] if len(words) > 2 else err[-500:] or out)
            try:   # the sink prints its count at the flow's end (its FIN): none within `timeout`, the flow is dead
                received = int(self.sink.communicate(timeout=timeout)[0].strip() or -1)
            except subprocess.TimeoutExpired:
                received, error = -1, error or f"the sink saw no end of the flow within {timeout:g} s"
            return {"sent": sent, "received": received, "error": error}
        finally:
            self.kill()

    def kill(self) -> None:
        for p in (self.source, self.sink):
            if p.poll() is None:
                p.kill()
            p.wait()
