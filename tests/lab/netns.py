"""Network namespace primitives for the lab and the root tests.

Work is batched: one `ip -batch` process per namespace (or one for the host) instead of one process per
link, route or address, which keeps a 60-pod lab well under a second of `ip` time.
"""
from __future__ import annotations

import os
import signal
import subprocess
from typing import Iterable, Sequence

NETNS_DIR = "/run/netns"


class CommandError(RuntimeError):
    pass


def run(argv: Sequence[str], *, input: str | None = None, check: bool = True,
        timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), input=input, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise CommandError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def ip_batch(commands: Iterable[str], netns: str | None = None) -> None:
    """Runs many `ip` commands in one process; `-force` keeps going and reports every error."""
    script = "\n".join(commands) + "\n"
    if not script.strip():
        return
    argv = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    run(argv, input=script)


def exec_in(netns: str, argv: Sequence[str], **kw) -> subprocess.CompletedProcess:
    return run(["ip", "netns", "exec", netns, *argv], **kw)


def popen_in(netns: str, argv: Sequence[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", netns, *argv], **kw)


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def create_netns(names: Iterable[str]) -> None:
    """Adds namespaces in one process; callers bring `lo` up in their per-namespace batch."""
    ip_batch(f"netns add {n}" for n in names)


def delete_netns(names: Iterable[str]) -> None:
    existing = set(list_netns())
    todo = [n for n in names if n in existing]
    if todo:
        run(["ip", "-force", "-batch", "-"], input="".join(f"netns del {n}\n" for n in todo), check=False)


def pids_in_netns(name: str) -> list[int]:
    proc = run(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in proc.stdout.split()]


def delete_netns_and_processes(names: Iterable[str]) -> None:
    """Throwaway namespaces gone, with what still runs in them (a wireguard-go a test left): only processes living
    in these namespaces, by PID."""
    names = list(names)
    for n in names:
        for pid in pids_in_netns(n):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    delete_netns(names)


def sysctl_in(netns: str, settings: dict[str, str]) -> None:
    exec_in(netns, ["sysctl", "-q", "-w", *[f"{k}={v}" for k, v in settings.items()]])
