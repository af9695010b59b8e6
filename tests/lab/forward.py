"""A TCP forwarder from the host's loopback into a lab netns: how tests and kubectl on the host reach the
apiserver of a real-node cluster, which lives in the cluster's control-plane netns (on the cluster's
underlay, where nodes and pods reach it and it reaches the kubelets) without touching the host's routes.

    python -m tests.lab.forward <listen-port> <netns> <target-ip> <target-port>

The listening socket is made in the host netns; then the process joins <netns> (setns on the whole process:
it is single-purpose) and every outgoing socket is made there. Prints "ready" once listening.
"""
from __future__ import annotations

import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(conn: socket.socket, target: tuple) -> None:
    try:
        out = socket.create_connection(target, timeout=10)
    except OSError:
        conn.close()
        return
    out.settimeout(None)
    t = threading.Thread(target=_pipe, args=(out, conn), daemon=True)
    t.start()
    _pipe(conn, out)
    t.join()
    conn.close()
    out.close()


def main(argv: list[str]) -> int:
    listen_port, ns, ip, port = int(argv[0]), argv[1], argv[2], int(argv[3])
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", listen_port))
    lsock.listen(128)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:  # os.setns is Python >= 3.12
        raise OSError(ctypes.get_errno(), f"setns {ns}")
    os.close(fd)
    print("ready", flush=True)
    while True:
        conn, _peer = lsock.accept()
        threading.Thread(target=_serve, args=(conn, (ip, port)), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
