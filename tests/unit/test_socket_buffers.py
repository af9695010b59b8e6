"""module_utils/socket_buffers.py on a real process: a child holding two UDP sockets, a TCP one and a unix one.
Only the UDP sockets are sized, as the kernel itself shows (ss); reruns write nothing, buffers never shrink,
check mode writes nothing. On wireguard-go: tests/integration/test_gateway_dataplane.py."""
import re
import subprocess
import sys

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils import socket_buffers as sb

CHILD = r"""
import socket, sys, time
u4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u4.bind(("127.0.0.1", 0))
u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u6.bind(("::1", 0))
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM); t.bind(("127.0.0.1", 0)); t.listen()
x = socket.socketpair()
print(u4.getsockname()[1], u6.getsockname()[1], t.getsockname()[1], flush=True)
sys.stdin.read()
"""


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ports = [int(p) for p in proc.stdout.readline().split()]
    yield proc, ports
    if not proc.stdin.closed:
        proc.stdin.close()
    proc.wait(timeout=10)


def kernel_view(pid):
    """{'udp'|'tcp': [(rb, tb)]} of the process's IP sockets, from ss (not from the code under test)."""
    out = subprocess.run(["ss", "-ampn", "-tu"], capture_output=True, text=True, check=True).stdout
    found = {}
    for proto, rb, tb in re.findall(r"^(udp|tcp)\s.*pid=%d,.*\n\s*skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)" % pid, out, re.M):
        found.setdefault(proto, []).append((int(rb), int(tb)))
    return found


def test_only_udp_sockets_are_sized_and_never_shrunk(child):
    proc, (p4, p6, dummy) = child
    tcp_before = kernel_view(proc.pid)["tcp"]
    res = sb.sync_buffers(proc.pid, 1 << 20)
    want = sb.reported(1 << 20)
    assert res["changed"] and res["writes"] == 4
    assert sorted(res["after"]) == sorted([f"udp 127.0.0.1:{p4} rcvbuf {want} sndbuf {want}",
                                           f"udp [::1]:{p6} rcvbuf {want} sndbuf {want}"])
    view = kernel_view(proc.pid)
    assert view["udp"] == [(want, want)] * 2 and view["tcp"] == tcp_before

    assert sb.sync_buffers(proc.pid, 1 << 20) == {"changed": False, "before": res["after"], "after": res["after"],
                                                  "writes": 0}
    assert not sb.sync_buffers(proc.pid, 64 << 10)["changed"]  # smaller: left as it is
    assert kernel_view(proc.pid)["udp"] == [(want, want)] * 2


def test_check_mode_reports_and_writes_nothing(child):
    proc, dummy = child
    before = kernel_view(proc.pid)["udp"]
    res = sb.sync_buffers(proc.pid, 4 << 20, check=True)
    assert res["changed"] and res["writes"] == 0
    assert all(line.endswith(f"rcvbuf {sb.reported(4 << 20)} sndbuf {sb.reported(4 << 20)}") for line in res["after"])
    assert kernel_view(proc.pid)["udp"] == before


def test_zero_leaves_the_sockets_alone(child):
    proc, dummy = child
    before = kernel_view(proc.pid)["udp"]
    assert sb.sync_buffers(proc.pid, 0) == {"changed": False, "before": [], "after": [], "writes": 0}
    assert kernel_view(proc.pid)["udp"] == before


def test_bad_size_names_the_field():
    with pytest.raises(ValueError, match=r"udp_buffer_size: -1"):
        sb.sync_buffers(1, -1)


def test_a_process_that_is_gone_is_reported_with_its_pid(child):
    proc, dummy = child
    proc.stdin.close()
    proc.wait(timeout=10)
    with pytest.raises(sb.SocketBufferError, match=r"pid %d" % proc.pid):
        sb.sync_buffers(proc.pid, 1 << 20)


@pytest.mark.parametrize("size,shown", [(1 << 20, 2 << 20), (7 << 20, 14 << 20), (0x7FFFFFFF, 0x7FFFFFFE)])
def test_the_kernel_shows_twice_the_size(size, shown):
    assert sb.reported(size) == shown


def test_the_gateway_reports_unreachable_sockets_instead_of_failing(child):
    """gateway_dataplane: a tunnel works with default buffers, so sockets it cannot reach are a warning."""
    from ansible_collections.liqo.fabric.plugins.module_utils import gateway_dataplane as gd  # pylint: disable=import-outside-toplevel
    proc, dummy = child
    proc.stdin.close()
    proc.wait(timeout=10)
    wres = {"backend": gd.wg.BACKEND_USERSPACE, "created": False, "pid": proc.pid}
    res = gd._buffers(wres, 1 << 20, False)  # pylint: disable=protected-access
    assert not res["changed"] and res["writes"] == 0 and "No such process" in res["skipped"]
    # the kernel backend is not looked at, so not even the gone process is noticed
    assert gd._buffers(dict(wres, backend="kernel"), 1 << 20, False) == {  # pylint: disable=protected-access
        "changed": False, "before": [], "after": [], "writes": 0}
