"""Issue 2 acceptance: a lab leaves zero residue, a crashed one is cleaned, the CLI works.

Kept apart from test_lab.py: `lab-clean` removes every lab on the machine, so no lab fixture may be
alive while these run."""
import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT, require_root
from tests.lab import Lab, netns
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
    require_root()
    ns0, links0, procs0, socks0 = _snapshot()
    lab = Lab([{"name": "a"}, {"name": "b"}], nodes=2, pods_per_node=1).up()
    # a stray wireguard-go-like socket and a process inside a lab netns, as later features will leave
    os.makedirs(WG_SOCKET_DIR, exist_ok=True)
    stray_sock = os.path.join(WG_SOCKET_DIR, f"{lab.prefix}wg0.sock")
    open(stray_sock, "w").close()
    sleeper = netns.popen_in(lab["a"].nodes[0].netns, ["sleep", "300"])
    assert len(set(netns.list_netns()) - ns0) == 2 * (1 + 2 + 2) + 1  # switch+nodes+pods per cluster, WAN
    assert _lab_processes(lab.workdir)
    lab.down()
    sleeper.wait(timeout=5)
    ns1, links1, procs1, socks1 = _snapshot()
    assert ns1 == ns0
    assert links1 == links0
    assert socks1 == socks0
    assert not _lab_processes(lab.workdir)
    assert not os.path.exists(lab.workdir)
    leftover = [p for p in procs1 - procs0 if os.path.exists(f"/proc/{p}") and p != os.getpid()]
    names = []
    for p in leftover:
        try:
            with open(f"/proc/{p}/comm", encoding="utf-8") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    assert not [n for n in names if n in ("etcd", "kube-apiserver", "sleep", "wireguard-go")], names


def test_lab_clean_removes_a_crashed_lab_and_nothing_else():
    require_root()
    bystander = "lfx-bystander"  # not the lab prefix: must survive lab-clean
    netns.create_netns([bystander])
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
        out = subprocess.run([sys.executable, "-m", "tests.lab", "clean"], capture_output=True, text=True,
                             cwd=ROOT, check=True, timeout=120).stdout
        assert "lab-clean: removed" in out
        time.sleep(0.2)
        assert not [n for n in netns.list_netns() if n.startswith(prefix)]
        assert not _lab_processes(workdir)
        assert not os.path.exists(workdir)
        assert bystander in netns.list_netns()
    finally:
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
        assert f"lab {lab_id}: 4 netns, 2/2 processes alive" in status
    finally:
        down = subprocess.run([sys.executable, "-m", "tests.lab", "down", lab_id], capture_output=True,
                              text=True, cwd=ROOT, env=env, check=True).stdout
    assert f"lab {lab_id}: removed 4 netns, 2 processes" in down
    assert not [n for n in netns.list_netns() if n.startswith(f"lfab{lab_id}")]
