"""The warm runner (plugins/plugin_utils/speed/warm.py) with real processes: zygote, client, ansible_runner,
ansible-playbook.

No root needed and no network: playbooks run on localhost with the local connection.
"""
import glob
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import warm
from controller import runner
from controller.runner import PlaybookRunner
from tests.conftest import ROOT

PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Change something
      ansible.builtin.command: "true"
    - name: Change again
      ansible.builtin.command: "true"
    - name: Declare stats
      ansible.builtin.set_stats:
        aggregate: true
        per_host: false
        data:
          fabric_dataplane: [{links: [liqo.vxlan], marker: "{{ marker }}"}]
    - name: Validate spec.mtu
      ansible.builtin.fail:
        msg: "spec.mtu: {{ mtu }} is out of range"
      when: mtu | int > 9000
"""

SLEEPER = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Sleep
      ansible.builtin.shell: "echo $$ > {{ pidfile }}; sleep 300; echo never"
"""


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    d = tmp_path_factory.mktemp("warm-books")
    (d / "pb.yml").write_text(PLAYBOOK)
    (d / "sleep.yml").write_text(SLEEPER)
    return d


@pytest.fixture
def runners(tmp_path):
    made = []

    def make(warm_on=True, name="rt"):
        r = PlaybookRunner(str(tmp_path / f"{name}-{len(made)}"), ROOT, warm=warm_on)
        made.append(r)
        if warm_on:
            assert r.zygote is not None and r.zygote.wait_ready(60), "zygote did not come up"
        return r

    yield make
    for r in made:
        r.close()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rfind(b")") + 2:].split()[0] != b"Z"


def pgid_members(pgid: int) -> list:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    st = f.read()
            except OSError:
                continue
            fields = st[st.rfind(b")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != b"Z":
                out.append(int(entry))
    return out


def wait_until(fn, timeout=15.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(interval)
    return fn()


def run_tree(zygote_pid: int, pidfile: str, timeout=60.0) -> list:
    """Once the playbook's shell wrote its pid: every process under the zygote (the run's child, Ansible's
    worker, the module, the shell, sleep)."""
    assert wait_until(lambda: os.path.exists(pidfile) and os.path.getsize(pidfile) > 0, timeout), "the playbook never started"
    shell = int(open(pidfile, encoding="utf-8").read())
    tree = warm.descendants(zygote_pid)
    assert shell in tree, (shell, tree)
    return tree


def comparable(res):
    return (res.ok, res.status, res.rc, res.changed, res.failed_task, res.failed_host, res.failed_msg,
            res.failed_result.get("msg"), res.stats)


def test_warm_gives_the_same_result_as_cold(runners, books):
    w, c = runners(True, "warm"), runners(False, "cold")
    for mtu, marker in ((1420, "a"), (9500, "b")):
        xv = {"mtu": mtu, "marker": marker}
        rw = w.run(str(books / "pb.yml"), xv, 120, "same")
        rc = c.run(str(books / "pb.yml"), xv, 120, "same")
        assert rw.warm is True and rc.warm is False
        assert comparable(rw) == comparable(rc)
        assert rw.changed == 2
        if mtu > 9000:
            assert not rw.ok and rw.failed_task == "Validate spec.mtu" and rw.failed_msg == "spec.mtu: 9500 is out of range"
        else:
            assert rw.ok and rw.stats == {"fabric_dataplane": [{"links": ["liqo.vxlan"], "marker": "a"}]}
    # the run's per-process temp dir was the child's and is gone; the zygote's own is still there
    tmp = w.env["ANSIBLE_LOCAL_TEMP"]
    left = [d for d in os.listdir(tmp) if d.startswith("ansible-local-")]
    assert left == [d for d in left if d.startswith(f"ansible-local-{w.zygote.pid}")], left


def test_mismatched_env_falls_back_to_cold_once_logged(runners, books, caplog):
    w = runners(True)
    w.env["ANSIBLE_TIMEOUT"] = "17"      # after the zygote started: its constants no longer match
    caplog.set_level(logging.WARNING, logger="controller.runner")
    r1 = w.run(str(books / "pb.yml"), {"mtu": 1500, "marker": "x"}, 120, "mismatch")
    r2 = w.run(str(books / "pb.yml"), {"mtu": 1500, "marker": "y"}, 120, "mismatch")
    assert r1.ok and r2.ok and r1.changed == 2
    assert r1.warm is False and r2.warm is False
    logged = [rec for rec in caplog.records if "environment differs" in rec.getMessage()]
    assert len(logged) == 1 and logged[0].fields["differs"] == ["ANSIBLE_TIMEOUT"]
    del w.env["ANSIBLE_TIMEOUT"]
    assert w.run(str(books / "pb.yml"), {"mtu": 1500, "marker": "z"}, 120, "mismatch").warm is True


def test_ansible_cfg_appearing_in_the_cwd_falls_back_to_cold(runners, books, caplog):
    w = runners(True)
    assert w.run(str(books / "pb.yml"), {"mtu": 1, "marker": "a"}, 120, "cfg").warm is True
    with open(os.path.join(w.project_dir, "ansible.cfg"), "w", encoding="utf-8") as f:
        f.write("[defaults]\nforks = 3\n")
    caplog.set_level(logging.WARNING, logger="controller.runner")
    r = w.run(str(books / "pb.yml"), {"mtu": 1, "marker": "b"}, 120, "cfg")
    assert r.ok and r.warm is False
    assert any(rec.fields.get("differs") == ["ansible.cfg"] for rec in caplog.records if hasattr(rec, "fields"))


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_timeout_and_cancel_kill_the_child_and_all_descendants(runners, books, tmp_path, how):
    w = runners(True)
    pidfile = str(tmp_path / "shell.pid")
    out = {}
    cancel = threading.Event()

    def go():
        out["res"] = w.run(str(books / "sleep.yml"), {"pidfile": pidfile}, 15 if how == "timeout" else 600, how,
                           cancel=cancel.is_set)

    t = threading.Thread(target=go)
    t.start()
    tree = run_tree(w.zygote.pid, pidfile)
    if how == "cancel":
        cancel.set()
    t.join(60)
    assert not t.is_alive()
    # the slot's ansible_runner settings: the cancel callback is looked at every CANCEL_POLL s, not every 5 s
    settings = glob.glob(os.path.join(w.runtime_dir, "slot*", "env", "settings"))
    assert settings and all(yaml.safe_load(open(f)) == {"pexpect_timeout": runner.CANCEL_POLL} for f in settings)
    res = out["res"]
    assert res.warm is True and not res.ok and res.status == ("timeout" if how == "timeout" else "canceled")
    assert wait_until(lambda: not any(alive(p) for p in tree), 10), [p for p in tree if alive(p)]
    for p in tree:   # every process group the run had (the child's, the setsid()ed workers') is empty
        assert pgid_members(p) == []
    assert w.zygote.proc.poll() is None          # the zygote itself lives on
    assert w.run(str(books / "pb.yml"), {"mtu": 1, "marker": "after"}, 120, "after").warm is True
    # the killed module's AnsiballZ payload dir is in the runner's own temp dir, not the host's /tmp, and
    # close() removes it
    left = [e for e in os.listdir(w.env["TMPDIR"]) if "_payload_" in e]
    assert left, os.listdir(w.env["TMPDIR"])
    w.close()
    assert not [e for e in os.listdir(w.env["TMPDIR"]) if "_payload_" in e]


def start_client(z, books, tmp_path, pidfile, **stdio):
    """The warm client as ansible_runner starts it, running sleep.yml (its shell's pid lands in `pidfile`)."""
    env = dict(z.env, AWX_ISOLATED_DATA_DIR=str(tmp_path))
    return subprocess.Popen([z.launcher, "-e", json.dumps({"pidfile": pidfile}), str(books / "sleep.yml")],
                            env=env, cwd=z.cwd, stdin=subprocess.DEVNULL, start_new_session=True, **stdio)


def test_sigkill_of_the_client_kills_the_child(runners, books, tmp_path):
    w = runners(True)
    pidfile = str(tmp_path / "shell.pid")
    z = w.zygote
    client = start_client(z, books, tmp_path, pidfile, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        tree = run_tree(z.pid, pidfile)
        marker = json.loads((tmp_path / "liqo_warm.json").read_text())
        assert marker["warm"] is True and marker["pid"] in tree
        os.kill(client.pid, signal.SIGKILL)
        client.wait(10)
        assert wait_until(lambda: not any(alive(p) for p in tree), 10), [p for p in tree if alive(p)]
        assert pgid_members(marker["pid"]) == []
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


def test_signals_are_forwarded_and_the_status_returned(runners, books, tmp_path):
    """SIGTERM to the client reaches ansible-playbook (its process group); the client exits as it did."""
    w = runners(True)
    pidfile = str(tmp_path / "shell.pid")
    z = w.zygote
    client = start_client(z, books, tmp_path, pidfile, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        tree = run_tree(z.pid, pidfile)
        client.send_signal(signal.SIGTERM)
        client.communicate(timeout=30)
        # ansible-playbook handles SIGTERM (its workers' groups are terminated) and exits non-zero
        assert client.returncode != 0
        assert wait_until(lambda: not any(alive(p) for p in tree), 15), [p for p in tree if alive(p)]
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


def test_client_exit_codes_follow_the_playbook(runners, books):
    w = runners(True)
    z = w.zygote
    base = [z.launcher]
    ok = subprocess.run(base + ["-e", "mtu=1 marker=a", str(books / "pb.yml")], env=z.env, cwd=z.cwd,
                        capture_output=True, text=True, check=False)
    bad = subprocess.run(base + ["-e", "mtu=9999 marker=a", str(books / "pb.yml")], env=z.env, cwd=z.cwd,
                         capture_output=True, text=True, check=False)
    missing = subprocess.run(base + [str(books / "nope.yml")], env=z.env, cwd=z.cwd, capture_output=True, text=True,
                             check=False)
    cold = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook")]
    cold_missing = subprocess.run(cold + [str(books / "nope.yml")], env=z.env, cwd=z.cwd, capture_output=True,
                                  text=True, check=False)
    assert ok.returncode == 0 and "ok=3" in ok.stdout
    assert bad.returncode == 2
    assert missing.returncode == cold_missing.returncode != 0


def test_close_stops_the_zygote_and_removes_the_socket(runners, books):
    w = runners(True)
    z = w.zygote
    assert stat.S_IMODE(os.stat(z.dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.dirname(z.sock_path)).st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(z.sock_path).st_mode)
    assert stat.S_IMODE(os.stat(z.sock_path).st_mode) & 0o077 == 0
    pid = z.pid
    w.close()
    assert z.proc.returncode is not None and not alive(pid)
    assert not os.path.exists(z.sock_path)
    # closed: runs still work, cold
    r = w.run(str(books / "pb.yml"), {"mtu": 1, "marker": "a"}, 120, "closed")
    assert r.ok and r.warm is False


def test_an_idle_zygote_exits_and_the_next_run_starts_a_new_one(tmp_path, books):
    """--warm-idle-exit (the node agents'): after that long without a run the zygote exits (its memory back, the
    socket gone); the next run starts a new zygote and, as any run while a zygote starts, waits for it: warm."""
    r = PlaybookRunner(str(tmp_path / "idle"), ROOT, warm_idle_exit=2.0)
    try:
        z = r.zygote
        assert z.wait_ready(60), "zygote did not come up"
        first = z.pid
        res = r.run(str(books / "pb.yml"), {"mtu": 1, "marker": "a"}, 120, "idle-1")
        assert res.ok and res.warm is True
        assert alive(first)   # a run just ended: not idle yet
        assert wait_until(lambda: z.proc.poll() is not None, timeout=30), "the idle zygote did not exit"
        assert z.proc.returncode == 0 and not alive(first) and not os.path.exists(z.sock_path)
        res = r.run(str(books / "pb.yml"), {"mtu": 1, "marker": "b"}, 120, "idle-2")
        assert res.ok and res.warm is True and z.pid != first and alive(z.pid)
    finally:
        r.close()
    assert not alive(z.pid)


def test_a_run_while_the_zygote_starts_waits_for_it(tmp_path, books):
    """The first run of a runner just made (a pod's engine that just started) does not import Ansible a second
    time beside the zygote: it waits for it and runs warm."""
    r = PlaybookRunner(str(tmp_path / "starting"), ROOT)
    try:
        assert not os.path.exists(r.zygote.sock_path)   # still importing Ansible
        res = r.run(str(books / "pb.yml"), {"mtu": 1, "marker": "a"}, 120, "first")
        assert res.ok and res.warm is True
    finally:
        r.close()


def test_zygote_dies_with_the_controller(tmp_path):
    """SIGKILL of the process that owns the PlaybookRunner: the zygote sees its lifeline close and goes,
    socket included."""
    code = ("import sys, time; sys.path.insert(0, %r); from controller.runner import PlaybookRunner; "
            "r = PlaybookRunner(%r, %r); assert r.zygote.wait_ready(60); "
            "print(r.zygote.pid, r.zygote.sock_path, flush=True); time.sleep(600)") % (ROOT, str(tmp_path / "rt"), ROOT)
    ctl = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        line = ctl.stdout.readline().split()
        zpid, sock = int(line[0]), line[1]
        assert alive(zpid) and os.path.exists(sock)
        ctl.kill()
        ctl.wait(10)
        assert wait_until(lambda: not alive(zpid), 10)
        assert not os.path.exists(sock)
    finally:
        if ctl.poll() is None:
            ctl.kill()
            ctl.wait()


def test_a_zygote_not_started_at_start_starts_at_prestart_or_the_first_run(tmp_path, books):
    """A gateway standby's runner (--standby-warmup-delay): its zygote is made but not started, so the standby's
    start costs no Ansible import; prestart() (the pod takes the Lease) or its first run starts it, and runs are
    warm."""
    r = PlaybookRunner(str(tmp_path / "lazy"), ROOT, zygote_at_start=False)
    try:
        z = r.zygote
        time.sleep(1.0)
        assert z.proc is None and not os.path.exists(z.sock_path)
        res = r.run(str(books / "pb.yml"), {"mtu": 1, "marker": "a"}, 120, "lazy-1")
        assert res.ok and res.warm is True and alive(z.pid)
    finally:
        r.close()
    r = PlaybookRunner(str(tmp_path / "pre"), ROOT, zygote_at_start=False)
    try:
        assert r.zygote.proc is None
        r.prestart()
        assert alive(r.zygote.pid) and r.zygote.wait_ready(60)
        first = r.zygote.pid
        r.prestart()                                   # running: left alone
        assert r.zygote.pid == first and alive(first)
    finally:
        r.close()
