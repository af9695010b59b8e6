"""A lab leaves zero residue, a crashed one is cleaned, the CLI works.
`lab-clean` removes only labs whose owner is gone; a live lab next to a dead one survives."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, require_root
from tests.lab import Lab, cleanup, names, netns
from tests.lab.cleanup import WG_SOCKET_DIR


def _snapshot():
    links = netns.run(["ip", "-o", "link", "show"]).stdout.splitlines()
    procs = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    socks = sorted(os.listdir(WG_SOCKET_DIR)) if os.path.isdir(WG_SOCKET_DIR) else []
    return set(netns.list_netns()), {line.split(":")[1].strip() for line in links}, procs, socks


def _lab_processes(workdir: str) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    if workdir.encode() in f.read():
                        out.append(int(p))
            except OSError:
                pass
    return out


def test_down_leaves_zero_residue():
    # other labs may come and go meanwhile (other runs share the machine): only this lab's objects count
    require_root()
    _ns0, links0, _procs0, _socks0 = _snapshot()
    lab = Lab([{"name": "a"}, {"name": "b"}], nodes=2, pods_per_node=1).up()
    try:
        # a stray wireguard-go-like socket and a process inside a lab netns, as later features will leave
        os.makedirs(WG_SOCKET_DIR, exist_ok=True)
        stray_sock = os.path.join(WG_SOCKET_DIR, f"{lab.prefix}wg0.sock")
        open(stray_sock, "w").close()
        # the gateway role's sysctl record of a lab host, as a lab torn down while connected leaves it
        record = os.path.join(cleanup.SYSCTL_RECORD_DIR, f"{cleanup.SYSCTL_RECORD_PREFIX}{lab['a'].nodes[0].netns}.conf")
        open(record, "w").close()
        sleeper = netns.popen_in(lab["a"].nodes[0].netns, ["sleep", "300"])
        ours = [n for n in netns.list_netns() if n.startswith(lab.prefix)]
        assert len(ours) == 2 * (1 + 2 + 2) + 1  # switch+nodes+pods per cluster, WAN
        assert _lab_processes(lab.workdir)
        # `ip netns exec` enters the namespace after its start, then execs sleep: on a busy machine that takes a while
        deadline = time.monotonic() + 10
        while True:
            in_netns = sorted({pid for n in ours for pid in netns.pids_in_netns(n)})
            if sleeper.pid in in_netns or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sleeper.pid in in_netns
    finally:
        lab.down()
    sleeper.wait(timeout=5)
    _ns1, links1, _procs1, socks1 = _snapshot()
    assert not [n for n in netns.list_netns() if n.startswith(lab.prefix)]
    assert links1 == links0  # the lab never touches the host's links
    assert not [s for s in socks1 if s.startswith(lab.prefix)]
    assert not _lab_processes(lab.workdir)
    assert not [p for p in in_netns if os.path.exists(f"/proc/{p}") and "zombie" not in _state(p)]
    assert not os.path.exists(lab.workdir)
    assert not os.path.exists(record)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            return next((line for line in f if line.startswith("State:")), "")
    except OSError:
        return "zombie"


def test_lab_clean_removes_a_dead_lab_and_spares_a_live_one():
    require_root()
    bystander = "lfx-bystander"  # not the lab prefix: must survive lab-clean
    legacy = "lfab" + "%04x" % (os.getpid() % 0x10000)  # a state file without an owner: kept without --all
    legacy_dir = os.path.join(names.STATE_ROOT, legacy)
    netns.create_netns([bystander, f"{legacy}-x"])
    os.makedirs(legacy_dir, mode=0o700)
    with open(os.path.join(legacy_dir, "state.json"), "w", encoding="utf-8") as f:
        json.dump({"lab_id": legacy[4:], "prefix": legacy, "workdir": legacy_dir, "pids": []}, f)
    live = Lab([{"name": "a"}], nodes=1, pods_per_node=1).up()  # owned by this (running) test
    try:
        code = ("import os\nfrom tests.lab import Lab\n"
                "lab = Lab([{'name': 'a'}, {'name': 'b'}], nodes=1, pods_per_node=1).up()\n"
                "print(lab.prefix, lab.workdir, flush=True)\nos.kill(os.getpid(), 9)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                              check=False)
        assert proc.returncode == -signal.SIGKILL
        prefix, workdir = proc.stdout.split()
        assert [n for n in netns.list_netns() if n.startswith(prefix)]
        assert _lab_processes(workdir)  # the apiservers outlived the crash
        live_ns = sorted(n for n in netns.list_netns() if n.startswith(live.prefix))
        live_procs = _lab_processes(live.workdir)
        assert live_ns and live_procs

        dry = subprocess.run([sys.executable, "-m", "tests.lab", "clean", "--dry-run"], capture_output=True,
                             text=True, cwd=ROOT, check=True, timeout=120).stdout
        assert f"would remove {prefix} (owner gone)" in dry
        assert f"kept {live.prefix}: owner pid {os.getpid()} is running" in dry
        assert [n for n in netns.list_netns() if n.startswith(prefix)]  # a dry run removes nothing

        out = subprocess.run([sys.executable, "-m", "tests.lab", "clean"], capture_output=True, text=True,
                             cwd=ROOT, check=True, timeout=120).stdout
        assert "lab-clean: removed" in out
        assert f"kept {legacy}: no owner recorded" in out
        time.sleep(0.2)
        assert not [n for n in netns.list_netns() if n.startswith(prefix)]
        assert not _lab_processes(workdir)
        assert not os.path.exists(workdir)
        # the live lab is untouched: its netns, its apiserver (still answering), its state
        assert sorted(n for n in netns.list_netns() if n.startswith(live.prefix)) == live_ns
        assert sorted(_lab_processes(live.workdir)) == sorted(live_procs)
        assert os.path.exists(os.path.join(live.workdir, "state.json"))
        assert [n.metadata.name for n in live["a"].kube.core.list_node().items]
        assert live["a"].ping(live["a"].pods[0].netns, live["a"].nodes[0].underlay_ip)
        assert f"{legacy}-x" in netns.list_netns() and os.path.isdir(legacy_dir)
        assert bystander in netns.list_netns()
    finally:
        live.down()
        cleanup.clean_prefix(legacy, legacy_dir)
        netns.delete_netns([bystander])


def test_cli_up_status_down():
    require_root()
    env = dict(os.environ, PYTHONPATH=ROOT)
    up = subprocess.run([sys.executable, "-m", "tests.lab", "up", "--clusters", "c", "--nodes", "1",
                         "--pods-per-node", "1"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
                        check=False)
    assert up.returncode == 0, up.stderr
    lab_id = up.stdout.split()[1]
    try:
        status = subprocess.run([sys.executable, "-m", "tests.lab", "status"], capture_output=True, text=True,
                                cwd=ROOT, env=env, check=True).stdout
        # etcd, kube-apiserver and the conversion webhook (python -m controller --mode webhook)
        assert f"lab {lab_id}: 4 netns, 3/3 processes alive" in status
        assert f"owner {os.getpid()} alive" in status  # the test run that ran `up`, not the exited CLI
    finally:
        down = subprocess.run([sys.executable, "-m", "tests.lab", "down", lab_id], capture_output=True,
                              text=True, cwd=ROOT, env=env, check=True).stdout
    assert f"lab {lab_id}: removed 4 netns, 3 processes" in down
    assert not [n for n in netns.list_netns() if n.startswith(f"lfab{lab_id}")]


# -- a lab interrupted while it comes up (or while it is up) --------------------------------------------------------
# A light lab in a process of its own, as a benchmark or `make demo` holds one: it says when up() starts and when
# the lab is up, then holds it until it is stopped.
_HOLDER = ("import sys, time\nfrom tests.lab import Lab\n"
           "lab = Lab([{'name': 'a'}], nodes=1, pods_per_node=1, lab_id=sys.argv[1])\n"
           "print('starting', flush=True)\n"
           "with lab:\n    print('up', flush=True)\n    time.sleep(600)\n")


def _free_lab_id() -> str:
    import secrets  # pylint: disable=import-outside-toplevel
    while True:
        lab_id = secrets.token_hex(2)
        if not os.path.exists(cleanup.state_dir(lab_id)) and lab_id not in cleanup.lab_ids_in_use():
            return lab_id


@contextlib.contextmanager
def _holder(lab_id: str):
    """A process that brings lab `lab_id` up and holds it; afterwards it is killed if still running, and whatever
    of the lab the test left is removed."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, lab_id], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "starting", proc.stderr.read() if proc.poll() is not None else ""
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cleanup.clean_prefix(names.lab_prefix(lab_id), cleanup.state_dir(lab_id))


def _recorded_roles(lab_id: str) -> list[str]:
    try:
        with open(os.path.join(cleanup.state_dir(lab_id), "state.json"), encoding="utf-8") as f:
            return [p["role"] for p in json.load(f).get("processes", [])]
    except (OSError, ValueError):
        return []


def _wait_recorded(proc: subprocess.Popen, lab_id: str, role: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while role not in _recorded_roles(lab_id):
        assert proc.poll() is None, f"the lab's process exited ({proc.returncode}): {proc.stderr.read()[-2000:]}"
        assert time.monotonic() < deadline, f"{role} not recorded in {timeout} s"
        time.sleep(0.02)


def _residue(lab_id: str) -> dict:
    """Whatever of lab `lab_id` is on the machine: processes (command line or environment naming its state
    directory), netns, wireguard-go files, its state directory, and what `python -m tests.lab status` says of it."""
    prefix, workdir = names.lab_prefix(lab_id), cleanup.state_dir(lab_id)
    procs = sorted(p for p in set(_lab_processes(workdir)) | set(cleanup.marked_pids(workdir))
                   if "zombie" not in _state(p))
    status = subprocess.run([sys.executable, "-m", "tests.lab", "status"], capture_output=True, text=True, cwd=ROOT,
                            check=True, timeout=60).stdout
    out = {"processes": procs, "netns": [n for n in netns.list_netns() if n.startswith(prefix)],
           "sockets": [s for s in (os.listdir(WG_SOCKET_DIR) if os.path.isdir(WG_SOCKET_DIR) else [])
                       if s.startswith(prefix)],
           "state dir": os.path.exists(workdir),
           "status": [ln for ln in status.splitlines() if prefix in ln or f"lab {lab_id}" in ln
                      or any(str(p) in ln.split() for p in procs)]}
    return {k: v for k, v in out.items() if v}


def _stop_holder(proc: subprocess.Popen, sig: int) -> str:
    proc.send_signal(sig)
    try:
        _out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"the lab's process did not end within 90 s of signal {sig}: {err[-2000:]}") from None
    return err


@pytest.mark.parametrize("moment", ["0.5 s into up()", "kube-apiserver started", "up"])
def test_sigterm_during_up_tears_the_lab_down(moment):
    """SIGTERM (what `make bench` gets when stopped) while the lab comes up, or while it is up: the process tears the
    lab down as an exception would, and nothing of it is left."""
    require_root()
    lab_id = _free_lab_id()
    with _holder(lab_id) as proc:
        if moment == "up":
            assert proc.stdout.readline().strip() == "up", proc.stderr.read() if proc.poll() is not None else ""
        elif moment == "kube-apiserver started":
            _wait_recorded(proc, lab_id, "a/kube-apiserver")
        else:
            time.sleep(0.5)
        assert proc.poll() is None
        err = _stop_holder(proc, signal.SIGTERM)
        assert proc.returncode != 0
        assert "LabInterrupted: SIGTERM while a lab was up" in err, err[-2000:]  # the teardown ran, as on an error
        assert _residue(lab_id) == {}


def test_sigkilled_while_coming_up_then_lab_clean_removes_everything():
    """SIGKILL (no teardown can run) once etcd and kube-apiserver started: every process was recorded as it
    started, the state directory is there, and `python -m tests.lab clean` removes the lab entirely."""
    require_root()
    lab_id = _free_lab_id()
    with _holder(lab_id) as proc:
        _wait_recorded(proc, lab_id, "a/kube-apiserver")
        _stop_holder(proc, signal.SIGKILL)
        assert proc.returncode == -signal.SIGKILL
        left = _residue(lab_id)
        assert left.get("processes") and left.get("state dir")  # what the crash left: the processes outlived it
        out = subprocess.run([sys.executable, "-m", "tests.lab", "clean"], capture_output=True, text=True, cwd=ROOT,
                             check=True, timeout=120).stdout
        assert "lab-clean: removed" in out
        assert _residue(lab_id) == {}


def test_lab_clean_finds_processes_of_a_lab_whose_state_dir_is_gone():
    """A process a lab started carries the lab's state directory in its environment (cleanup.MARK): even with the
    directory gone, `status` lists it and `clean` stops it."""
    require_root()
    lab_id = _free_lab_id()
    stray = subprocess.Popen(["sleep", "300"], env={**os.environ, cleanup.MARK: cleanup.state_dir(lab_id)})
    try:
        status = subprocess.run([sys.executable, "-m", "tests.lab", "status"], capture_output=True, text=True,
                                cwd=ROOT, check=True, timeout=60).stdout
        assert any(ln.startswith("orphan lab processes") and str(stray.pid) in ln.split() for ln in status.splitlines())
        dry = subprocess.run([sys.executable, "-m", "tests.lab", "clean", "--dry-run"], capture_output=True, text=True,
                             cwd=ROOT, check=True, timeout=60).stdout
        assert f"would remove {names.lab_prefix(lab_id)} (objects without a state dir)" in dry
        subprocess.run([sys.executable, "-m", "tests.lab", "clean"], capture_output=True, text=True, cwd=ROOT,
                       check=True, timeout=120)
        assert stray.wait(timeout=10) is not None
        assert _residue(lab_id) == {}
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()
