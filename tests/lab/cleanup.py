"""Removal of everything a lab made, found by its name prefix and its state file — nothing else.

Used by LabCluster/Lab.down() and by `make lab-clean` (after a crashed run), so both remove the same set:
processes living in the lab's netns, the etcd/apiserver processes it recorded (checked against their
command line), the netns themselves (and with them every link), wireguard-go sockets named with the
prefix, and the state directory.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import time

from tests.lab import names, netns

WG_SOCKET_DIR = "/var/run/wireguard"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in pids if os.path.exists(f"/proc/{p}")]
        for pid in alive:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while alive and time.monotonic() < deadline:
            for pid in list(alive):
                try:
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        alive.remove(pid)
                        continue
                except ChildProcessError:
                    pass
                if not os.path.exists(f"/proc/{pid}") or "zombie" in _status(pid):
                    alive.remove(pid)
            time.sleep(0.02)
        if not alive:
            return


def _status(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("State:"):
                    return line
    except OSError:
        pass
    return "zombie"


def state_dir(lab_id: str) -> str:
    return os.path.join(names.STATE_ROOT, names.lab_prefix(lab_id))


def recorded_pids(directory: str) -> list[int]:
    """PIDs from the lab's state file that still run a command naming the lab's directory."""
    try:
        with open(os.path.join(directory, "state.json"), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return []
    return [pid for pid in state.get("pids", []) if directory in _cmdline(pid)]


def wireguard_go_pids(prefix: str) -> list[int]:
    """wireguard-go processes of interfaces named with `prefix`, from their pid files, each checked
    against its command line so a recycled PID is never signalled."""
    pids = []
    if not os.path.isdir(WG_SOCKET_DIR):
        return pids
    for entry in os.listdir(WG_SOCKET_DIR):
        if entry.startswith(prefix) and entry.endswith(".pid"):
            ifname = entry[:-4]
            try:
                with open(os.path.join(WG_SOCKET_DIR, entry), encoding="utf-8") as f:
                    pid = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            cmd = _cmdline(pid).split()
            if cmd and os.path.basename(cmd[0]) == "wireguard-go" and ifname in cmd:
                pids.append(pid)
    return pids


def _wireguard_go_ifname(pid: int) -> str | None:
    """Interface name of a wireguard-go process (`wireguard-go [-f] <ifname>`), else None."""
    cmd = _cmdline(pid).split()
    if not cmd or os.path.basename(cmd[0]) != "wireguard-go":
        return None
    args = [a for a in cmd[1:] if not a.startswith("-")]
    return args[0] if args else None


def kill_in_netns(spaces: list[str]) -> None:
    """Stops the processes living in these namespaces (the lab started them, or the fabric did in them)."""
    _kill(sorted({pid for n in spaces for pid in netns.pids_in_netns(n)}))


def clean_prefix(prefix: str, directory: str | None = None) -> dict:
    """Removes every lab object whose name starts with `prefix`; returns what was removed."""
    removed = {"processes": [], "netns": [], "sockets": [], "dirs": []}
    spaces = [n for n in netns.list_netns() if n.startswith(prefix)]
    inside = sorted({pid for n in spaces for pid in netns.pids_in_netns(n)})
    owned = recorded_pids(directory) if directory else []
    wg = wireguard_go_pids(prefix)
    # wireguard-go processes living in the lab's netns: their interface names do not carry the lab prefix
    # (the fabric names them), so remember them to remove their control files too
    wg_ifnames = [_wireguard_go_ifname(pid) for pid in inside]
    _kill(sorted(set(inside + owned + wg)))
    removed["processes"] = sorted(set(inside + owned + wg))
    for ifname in filter(None, wg_ifnames):
        for ext in (".sock", ".pid", ".log"):
            path = os.path.join(WG_SOCKET_DIR, ifname + ext)
            if os.path.exists(path):
                os.unlink(path)
                removed["sockets"].append(ifname + ext)
    netns.delete_netns(spaces)
    removed["netns"] = spaces
    if os.path.isdir(WG_SOCKET_DIR):
        for entry in os.listdir(WG_SOCKET_DIR):
            if entry.startswith(prefix):
                try:
                    os.unlink(os.path.join(WG_SOCKET_DIR, entry))
                    removed["sockets"].append(entry)
                except OSError:
                    pass
    if directory and os.path.isdir(directory):
        shutil.rmtree(directory, ignore_errors=True)
        removed["dirs"].append(directory)
    return removed


def clean_all() -> list[dict]:
    """`make lab-clean`: every lab's state dir and every netns/socket carrying the lab prefix."""
    results = []
    dirs = []
    if os.path.isdir(names.STATE_ROOT):
        dirs = [os.path.join(names.STATE_ROOT, d) for d in os.listdir(names.STATE_ROOT) if names.is_lab_name(d)]
    for d in dirs:
        results.append(clean_prefix(os.path.basename(d), d))
    results.append(clean_prefix(names.PREFIX))  # orphans without a state dir
    return results
