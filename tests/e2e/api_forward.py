"""The lab's apiserver, reachable from inside a lab node's netns at the kubeconfig's own address.

A light lab's apiserver listens on the host's loopback, which a node netns does not see; a real gateway host
reaches its cluster's API. This listens on 127.0.0.1:<apiserver port> inside the node netns and forwards each
connection to the same address in the host netns, so the cluster's kubeconfig works unchanged on that host
(the serving certificate names 127.0.0.1). A thread of the test process (setns is per thread): nothing to
clean up but the socket, closed with the context."""
from __future__ import annotations

import ctypes
import os
import socket
import threading
import urllib.parse

import yaml

from tests.lab import netns
from tests.lab.forward import CLONE_NEWNET, _serve


def _setns(fd: int) -> None:
    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def api_port(kubeconfig: str) -> int:
    with open(kubeconfig, encoding="utf-8") as f:
        server = yaml.safe_load(f)["clusters"][0]["cluster"]["server"]
    return urllib.parse.urlsplit(server).port


class ApiIntoNetns:
    def __init__(self, ns: str, kubeconfig: str):
        self.ns, self.port = ns, api_port(kubeconfig)
        self.sock = None
        self.error = None

    def _listen(self, ready: threading.Event) -> None:
        host = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.ns}", os.O_RDONLY)
        try:
            _setns(target)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self.port))
            sock.listen(64)
            self.sock = sock
        except OSError as exc:
            self.error = exc
        finally:
            _setns(host)  # back: the connections out are made in the host netns
            os.close(host)
            os.close(target)
            ready.set()
        while self.sock is not None:
            try:
                conn, _peer = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=_serve, args=(conn, ("127.0.0.1", self.port)), daemon=True).start()

    def __enter__(self):
        netns.exec_in(self.ns, ["ip", "link", "set", "lo", "up"])
        ready = threading.Event()
        threading.Thread(target=self._listen, args=(ready,), daemon=True).start()
        ready.wait(10)
        if self.error:
            raise self.error
        return self

    def __exit__(self, *exc):
        sock, self.sock = self.sock, None
        if sock:
            sock.close()
