"""Who owns a lab: the process that brought it up, recorded in the lab's state file.

`make lab-clean` removes only labs whose owner is gone, so a lab another run or a person is using survives.
A PID alone is no identity (PIDs are recycled): the record also carries the process's start time (field 22
of /proc/<pid>/stat, clock ticks since boot) and the boot id; the owner counts as alive only while all three
match. A state file without a usable record (written before owners were recorded, or being written) is
"unknown" and kept: only `clean --all` removes it.
"""
from __future__ import annotations

import json
import os

ALIVE, GONE, UNKNOWN = "alive", "gone", "unknown"

# Commands that only run another one: `sudo make lab-up` is owned by the shell that typed it, not by sudo/make
_WRAPPERS = {"sudo", "su", "doas", "runuser", "make", "gmake", "env", "timeout", "nice", "ionice", "stdbuf",
             "setsid", "nohup", "time", "chrt", "taskset"}


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: fields start after the last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def record(pid: int | None = None) -> dict:
    """The owner record of `pid` (default: this process) for a lab's state file."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "start_time": start_time(pid), "boot_id": boot_id(), "cmdline": _cmdline(pid)[:200]}


def status(rec: dict | None) -> str:
    """ALIVE, GONE or UNKNOWN (no usable record) for an owner record."""
    if not isinstance(rec, dict) or not isinstance(rec.get("pid"), int) or not isinstance(rec.get("start_time"), int):
        return UNKNOWN
    if rec.get("boot_id") and rec["boot_id"] != boot_id():
        return GONE
    return ALIVE if start_time(rec["pid"]) == rec["start_time"] else GONE


def lab_status(directory: str) -> tuple[str, dict | None]:
    """(status, owner record) of the lab whose state directory is `directory`."""
    try:
        with open(os.path.join(directory, "state.json"), encoding="utf-8") as f:
            rec = json.load(f).get("owner")
    except (OSError, ValueError, AttributeError):
        return UNKNOWN, None
    return status(rec), rec


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def invoking_pid() -> int:
    """Owner of a lab brought up from the command line (`python -m tests.lab up`), which exits at once: the
    first ancestor that is not a wrapper (sudo, make, env, ...), usually the person's shell or a test run."""
    pid = os.getppid()
    while pid > 1 and _comm(pid) in _WRAPPERS:
        pid = _ppid(pid)
    return pid if pid > 1 else os.getppid()


def claim(directory: str, lab_id: str, prefix: str, pid: int | None = None, processes: list | None = None) -> None:
    """A minimal state file naming this lab's owner and the processes it started (role, pid, start_time): a
    LabCluster brought up on its own; Lab writes a full one."""
    processes = processes or []
    path = os.path.join(directory, "state.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"lab_id": lab_id, "prefix": prefix, "workdir": directory, "owner": record(pid),
                   "pids": [p["pid"] for p in processes], "processes": processes}, f)
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)
