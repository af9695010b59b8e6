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
