# -*- coding: utf-8 -*-
# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A lock held per network namespace: a bound abstract Unix socket.

Two writers of one namespace's overlay (a node agent re-pointing its link in process while its playbook run's
module syncs the same node) must not interleave their reads and writes. Abstract socket names belong to the
network namespace, so the lock is exactly as wide as what it guards (the light lab's nodes, all on one host,
never wait for each other), it leaves no file behind, and the kernel releases it when its holder dies.
"""
from __future__ import annotations

import contextlib
import errno
import socket
import time

POLL = 0.02


class LockTimeout(RuntimeError):
    """The lock stayed held by another process for the whole wait."""


@contextlib.contextmanager
def netns_lock(name: str, timeout: float = 60.0):
    """Holds the lock `name` of the current network namespace for the body; waits up to `timeout` s for it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                sock.bind("\0liqo.fabric/" + name)
                break
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"lock {name} of this network namespace held by another process "
                                      f"for {timeout:g} s") from None
                time.sleep(POLL)
        yield
    finally:
        sock.close()
