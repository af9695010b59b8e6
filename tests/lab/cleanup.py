"""Removal of everything a lab made, found by its name prefix and its state file — nothing else.

Used by LabCluster/Lab.down() and by `make lab-clean` (after a crashed run), so both remove the same set:
processes living in the lab's netns, the etcd/apiserver processes it started (recorded in its state file
with their start times, and marked with MARK in their environment), the netns themselves (and with them
every link), wireguard-go sockets named with the prefix, and the state directory — kept while a process
it names may still run, so a later `make lab-clean` finds it.

Every process is signalled by PID only while it still has the start time it had when found (or recorded):
a PID recycled meanwhile belongs to someone else.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import time

from tests.lab import names, netns, owner

WG_SOCKET_DIR = "/var/run/wireguard"
SYSCTL_RECORD_DIR, SYSCTL_RECORD_PREFIX = "/run", "liqo-fabric-sysctl-"   # the lab inventory's gateway_sysctl_file


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill(pids, start_times: dict[int, int] | None = None) -> list[int]:
    """SIGTERM, then SIGKILL after 3 s, to each of `pids` that is still the process it was: its start time is
    the one in `start_times` or, for a PID not there, the one it has now. Returns those still alive."""
    known = {}
    for pid in pids:
        started = (start_times or {}).get(pid) or owner.start_time(pid)
        if started is not None:
            known[pid] = started
    alive = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in known if owner.start_time(p) == known[p]]
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
                if owner.start_time(pid) != known[pid] or "zombie" in _status(pid):
                    alive.remove(pid)
            time.sleep(0.02)
        if not alive:
            return []
    return alive


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


def recorded_pids(directory: str) -> dict[int, int]:
    """{pid: start time} of the processes the lab's state file records that are still those processes (same
    start time); for a state file without start times, the PIDs still running a command naming the directory."""
    try:
        with open(os.path.join(directory, "state.json"), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return {}
    out = {}
    for proc in state.get("processes", []):
        try:
            pid, started = int(proc["pid"]), int(proc["start_time"])
        except (KeyError, TypeError, ValueError):
            continue
        if owner.start_time(pid) == started:
            out[pid] = started
    if "processes" not in state:
        for pid in state.get("pids", []):
            started = owner.start_time(pid)
            if started is not None and directory in _cmdline(pid):
                out[pid] = started
    return out


# In the environment of every process a lab starts (tests.lab.apiserver, tests.lab.realnode): the lab's state
# directory. It finds the processes a lab started but could not record, its owner killed between the fork and
# the write of its state file, and those of labs whose state directory is gone.
MARK = "LIQO_FABRIC_LAB_DIR"


def marked_processes() -> dict[int, tuple[str, int]]:
    """{pid: (lab state directory, start time)} of every process carrying MARK in its environment."""
    out = {}
    needle = MARK.encode() + b"="
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if needle not in environ:
            continue
        for var in environ.split(b"\0"):
            if var.startswith(needle):
                started = owner.start_time(int(entry))
                if started is not None:
                    out[int(entry)] = (var[len(needle):].decode(errors="replace"), started)
                break
    return out


def marked_pids(directory: str) -> dict[int, int]:
    """{pid: start time} of the processes marked as started by the lab whose state directory is `directory`."""
    directory = os.path.normpath(directory)
    return {pid: st for pid, (d, st) in marked_processes().items() if os.path.normpath(d) == directory}


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
    stop_real_nodes(spaces, directory)  # kubelets, then containers through containerd (their shims exit cleanly)
    inside = sorted({pid for n in spaces for pid in netns.pids_in_netns(n)})
    owned = {**marked_pids(directory), **recorded_pids(directory)} if directory else {}
    wg = wireguard_go_pids(prefix)
    # wireguard-go processes living in the lab's netns: their interface names do not carry the lab prefix
    # (the fabric names them), so remember them to remove their control files too
    wg_ifnames = [_wireguard_go_ifname(pid) for pid in inside]
    survivors = _kill(sorted(set(inside + list(owned) + wg)), owned)
    removed["processes"] = sorted(set(inside + list(owned) + wg))
    removed["real_nodes"] = real_node_residue(prefix, directory)  # before the state dir goes (mounts in it)
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
    # the gateway role's record of a host's sysctls (cluster.py names it after the node's netns): a lab torn
    # down while connected never ran the gateway's removal, which deletes it
    removed["files"] = []
    for entry in os.listdir(SYSCTL_RECORD_DIR):
        if entry.startswith(SYSCTL_RECORD_PREFIX + prefix) and entry.endswith(".conf"):
            try:
                os.unlink(os.path.join(SYSCTL_RECORD_DIR, entry))
                removed["files"].append(entry)
            except OSError:
                pass
    # the state directory names the lab's processes: it stays while one of them may still run (one that
    # SIGKILL did not end within 3 s), so that a later `make lab-clean` finds them
    removed["survivors"] = [p for p in survivors if p in owned]
    if directory and os.path.isdir(directory) and not removed["survivors"]:
        shutil.rmtree(directory, ignore_errors=True)
        removed["dirs"].append(directory)
    return removed


def _lab_id_of(name: str) -> str | None:
    """The lab id in an object's name (PREFIX + 4 hex digits + anything), else None."""
    lab_id = name[len(names.PREFIX):len(names.PREFIX) + 4] if names.is_lab_name(name) else ""
    return lab_id if len(lab_id) == 4 and all(c in "0123456789abcdef" for c in lab_id) else None


def lab_ids_in_use() -> set[str]:
    """Ids of the labs that have objects on this machine (netns, wireguard-go control files, sysctl records,
    processes marked as theirs)."""
    found = list(netns.list_netns())
    if os.path.isdir(WG_SOCKET_DIR):
        found += os.listdir(WG_SOCKET_DIR)
    found += [e[len(SYSCTL_RECORD_PREFIX):] for e in os.listdir(SYSCTL_RECORD_DIR) if e.startswith(SYSCTL_RECORD_PREFIX)]
    found += [os.path.basename(os.path.normpath(d)) for d, _st in marked_processes().values()
              if os.path.dirname(os.path.normpath(d)) == os.path.normpath(names.STATE_ROOT)]
    return {i for i in map(_lab_id_of, found) if i}


def plan_clean(everything: bool = False) -> dict:
    """What `make lab-clean` removes: {"dead": [state dirs], "orphans": [lab ids without a state dir],
    "kept": [(lab id, why)]}. A lab is removed only when its owner is gone (tests.lab.owner), or with
    `everything` (`clean --all`)."""
    dirs = []
    if os.path.isdir(names.STATE_ROOT):
        dirs = sorted(os.path.join(names.STATE_ROOT, d) for d in os.listdir(names.STATE_ROOT) if names.is_lab_name(d))
    plan = {"dead": [], "orphans": [], "kept": []}
    for d in dirs:
        status, rec = owner.lab_status(d)
        if everything or status == owner.GONE:
            plan["dead"].append(d)
        elif status == owner.ALIVE:
            plan["kept"].append((os.path.basename(d), f"owner pid {rec['pid']} is running ({rec.get('cmdline', '')[:60]})"))
        else:
            plan["kept"].append((os.path.basename(d), "no owner recorded in its state file (`clean --all` removes it)"))
    with_dir = {_lab_id_of(os.path.basename(d)) for d in dirs}
    plan["orphans"] = sorted(lab_ids_in_use() - with_dir)
    return plan


def clean_all(everything: bool = False) -> list[dict]:
    """`make lab-clean`: the labs whose owner is gone and the objects of labs without a state dir (a crash
    before it was written); with `everything`, every lab-prefixed object on the machine."""
    plan = plan_clean(everything)
    results = [clean_prefix(os.path.basename(d), d) for d in plan["dead"]]
    # an orphan's state directory is gone, but its processes still carry its path (MARK); one there by now is a
    # lab that came up since the plan was made (its directory comes first, before any of its objects)
    results += [clean_prefix(names.lab_prefix(i), state_dir(i)) for i in plan["orphans"]
                if not os.path.isdir(state_dir(i))]
    if everything:
        results.append(clean_prefix(names.PREFIX))  # names that carry the prefix but no lab id
    return results


# -- real-node labs (tests.lab.realnode): containers, mounts, cgroups, CNI caches ----------------------------------------
CGROUP_ROOT = "/sys/fs/cgroup"
DISK_ROOT = os.environ.get("LIQO_FABRIC_LAB_DISK", "/var/lib/liqo-fabric-lab")


def reset_containerd(sock: str) -> list[str]:
    """Kills and deletes every task of the CRI's containers on this containerd (their shims then exit and
    remove their sockets in /run/containerd/s) and deletes the containers (and their snapshots)."""
    def ctr(*args):
        return netns.run(["ctr", "-a", sock, "-n", "k8s.io", *args], check=False, timeout=60)
    ids = ctr("tasks", "ls", "-q").stdout.split()
    for cid in ids:
        ctr("tasks", "kill", "-a", "-s", "SIGKILL", cid)
    if ids:
        ctr("tasks", "rm", "-f", *ids)
        deadline = time.monotonic() + 10
        while ctr("tasks", "ls", "-q").stdout.split() and time.monotonic() < deadline:
            time.sleep(0.1)
    conts = ctr("containers", "ls", "-q").stdout.split()
    if conts:
        ctr("containers", "rm", *conts)
    return ids


def stop_real_nodes(spaces: list[str], directory: str | None) -> None:
    """The kubelets living in these netns (they would restart containers), then every container through its
    node's containerd (a socket <directory>/<cluster>/<node netns>/containerd.sock)."""
    kubelets = [pid for n in spaces for pid in netns.pids_in_netns(n)
                if os.path.basename(_cmdline(pid).split(" ", 1)[0]) == "kubelet"]
    _kill(kubelets)
    if directory and os.path.isdir(directory):
        import glob  # pylint: disable=import-outside-toplevel
        for sock in glob.glob(os.path.join(directory, "*", "*", "containerd.sock")):
            if os.path.basename(os.path.dirname(sock)) in spaces:
                reset_containerd(sock)


def _cgroup_dirs(prefix: str) -> list[str]:
    """Top-level cgroups named with `prefix` in every hierarchy (a real node's cgroupRoot is /<its netns>).
    A prefix ending with "/" names one cgroup exactly (a node: n1 is not n10)."""
    exact = prefix.endswith("/")
    prefix = prefix.rstrip("/")
    out = []
    if not os.path.isdir(CGROUP_ROOT):
        return out
    for hierarchy in os.listdir(CGROUP_ROOT):
        base = os.path.join(CGROUP_ROOT, hierarchy)
        try:
            out += [os.path.join(base, d) for d in os.listdir(base)
                    if (d == prefix if exact else d.startswith(prefix)) and os.path.isdir(os.path.join(base, d))]
        except OSError:
            pass
    return out


def kill_in_cgroups(prefix: str) -> list[int]:
    """Stops (by PID) every process in the cgroups named with `prefix`: the containers of real nodes."""
    pids = set()
    for top in _cgroup_dirs(prefix):
        for root, _dirs, files in os.walk(top):
            if "cgroup.procs" in files:
                try:
                    with open(os.path.join(root, "cgroup.procs"), encoding="utf-8") as f:
                        pids.update(int(p) for p in f.read().split())
                except OSError:
                    pass
    _kill(sorted(pids))
    return sorted(pids)


def remove_cgroups(prefix: str) -> list[str]:
    """rmdir, deepest first, of the cgroups named with `prefix` (empty once their processes are gone)."""
    removed = []
    for top in _cgroup_dirs(prefix):
        for root, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
            for _attempt in range(20):
                try:
                    os.rmdir(root)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while the last task exits
                    time.sleep(0.05)
        if not os.path.isdir(top):
            removed.append(top)
    return removed


def _mounts_under(directory: str) -> list[str]:
    base = os.path.realpath(directory).rstrip("/") + "/"
    out = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                mp = line.split()[4].replace("\\040", " ")
                if mp.startswith(base):
                    out.append(mp)
    except OSError:
        pass
    return out


def unmount_under(directory: str) -> list[str]:
    """Detaches every mount below `directory`, deepest first: overlay rootfs, shm, pod netns, volumes."""
    import ctypes  # pylint: disable=import-outside-toplevel
    libc = ctypes.CDLL(None, use_errno=True)
    done = []
    for _round in range(3):  # a mount may hide another one below it
        mounts = _mounts_under(directory)
        if not mounts:
            break
        for mp in sorted(mounts, key=len, reverse=True):
            if libc.umount2(mp.encode(), 2) == 0:  # MNT_DETACH
                done.append(mp)
    return done


def real_node_residue(prefix: str, directory: str | None) -> dict:
    """After the lab's processes are stopped: containers left in its cgroups, mounts under its directories
    (each node's mount namespace file: with it go the mounts made inside), the cgroups, and its image store
    under DISK_ROOT."""
    disk = os.path.join(DISK_ROOT, prefix)
    removed = {"processes": kill_in_cgroups(prefix), "mounts": [], "cgroups": []}
    for d in filter(None, (directory, disk if len(prefix) > len(names.PREFIX) else None)):
        removed["mounts"] += unmount_under(d)
    removed["cgroups"] = remove_cgroups(prefix)
    if len(prefix) > len(names.PREFIX) and os.path.isdir(disk):
        shutil.rmtree(disk, ignore_errors=True)
    elif prefix == names.PREFIX and os.path.isdir(DISK_ROOT):  # every lab (clean --all)
        for d in os.listdir(DISK_ROOT):
            if d.startswith(prefix):
                unmount_under(os.path.join(DISK_ROOT, d))
                shutil.rmtree(os.path.join(DISK_ROOT, d), ignore_errors=True)
    return removed
