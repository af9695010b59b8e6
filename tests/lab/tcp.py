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


STREAM_SINK = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1); print("ready", flush=True)
c, _a = s.accept(); n = 0
try:
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        n += len(b)
except OSError as exc:
    print("error", exc, flush=True)
print(n, flush=True)
"""

# one connection, `chunk` bytes every `period` s until its stdin closes; a send that fails, or data not acknowledged
# within 300 s (TCP_USER_TIMEOUT: an outage of a minute can put the next retransmission a minute later), ends it with
# exit 1
STREAM_SOURCE = r"""
import select, socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
c.settimeout(None)   # a send waits while the path is down (a full send buffer): TCP gives up, not a socket timeout
c.setsockopt(socket.IPPROTO_TCP, 18, 300000)
chunk, period, sent = b"x" * int(sys.argv[3]), float(sys.argv[4]), 0
try:
    while not select.select([sys.stdin], [], [], period)[0]:
        c.sendall(chunk); sent += len(chunk)
    c.shutdown(socket.SHUT_WR); c.recv(1)
except OSError as exc:
    print("error", exc, sent, flush=True); sys.exit(1)
print(sent, flush=True)
"""


class LongFlow:
    """One long-lived TCP connection from a source to a sink, each run under its own argv prefix (e.g. nsenter into a
    pod's network namespace): `chunk` bytes every `period` s until stop(). It survived when the source never failed
    and the sink received every byte sent, over the same connection."""

    def __init__(self, src_prefix: list, dst_prefix: list, address: str, port: int, chunk: int = 1000,
                 period: float = 0.1):
        self.sink = subprocess.Popen(dst_prefix + [sys.executable, "-c", STREAM_SINK, str(port)],  # pylint: disable=consider-using-with
                                     stdout=subprocess.PIPE, text=True)
        if self.sink.stdout.readline().strip() != "ready":
            self.sink.kill()
            self.sink.wait()
            raise AssertionError(f"the TCP sink did not start in {dst_prefix}")
        self.source = subprocess.Popen(src_prefix + [sys.executable, "-c", STREAM_SOURCE, address, str(port),  # pylint: disable=consider-using-with
                                                     str(chunk), str(period)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def alive(self) -> bool:
        return self.source.poll() is None

    def stop(self, timeout: float = 180) -> dict:
        """Ends the flow: {"source": its exit code, "sent": bytes, "received": bytes, "out": what they printed}. The
        source ends once the sink acknowledged everything (after an outage: at TCP's next retransmission)."""
        try:
            src_out = self.source.communicate(timeout=timeout)[0]   # its stdin closed: the source ends
            sink_out = self.sink.communicate(timeout=timeout)[0]
        finally:
            for proc in (self.source, self.sink):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        sent = src_out.split()[-1] if src_out.split() else "0"
        received = sink_out.split()[-1] if sink_out.split() else "0"
        return {"source": self.source.returncode, "sent": int(sent) if sent.isdigit() else 0,
                "received": int(received) if received.isdigit() else 0, "out": (src_out + sink_out).strip()}
