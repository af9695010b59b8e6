"""A run's client starts on its pty without a fork of the controller (controller/run_pty.py): real processes, no
root needed. The child is what ptyprocess's fork made (own session, the pty as controlling terminal and stdio, the
cwd and environment asked, SIGHUP ignored, no echo, the window size), and a lock held in the parent at the spawn
can no longer stop a run from starting."""
import json
import os
import signal
import sys
import threading

import pexpect
import ptyprocess

from controller import run_pty
from controller.runner import PlaybookRunner
from tests.conftest import ROOT

REPORT = r"""
import json, os, sys, fcntl, struct, termios
stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
ign = int([l for l in open("/proc/self/status") if l.startswith("SigIgn:")][0].split()[1], 16)
rows, cols = struct.unpack("HHHH", fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8))[:2]
print(json.dumps({"pid": os.getpid(), "sid": os.getsid(0), "tty_nr": int(stat[4]), "stdio": [os.ttyname(f) for f in (0, 1, 2)],
                  "ctty": os.open("/dev/tty", os.O_RDWR) > 2, "cwd": os.getcwd(), "marker": os.environ.get("MARKER"),
                  "hup_ignored": bool(ign & (1 << 0)), "echo": bool(termios.tcgetattr(0)[3] & termios.ECHO),
                  "winsize": [rows, cols], "exe": os.readlink("/proc/self/exe")}))
"""


def spawn_like_ansible_runner(cwd, env):
    """pexpect.spawn as ansible_runner calls it."""
    return pexpect.spawn(sys.executable, ["-c", REPORT], cwd=cwd, env=env, ignore_sighup=True, encoding="utf-8",
                         codec_errors="replace", echo=False, dimensions=(30, 100))


def test_the_client_gets_the_session_pty_cwd_env_and_signals_ptyprocess_gave_it(tmp_path):
    run_pty.install()
    run_pty.install()   # idempotent
    child = spawn_like_ansible_runner(str(tmp_path), dict(os.environ, MARKER="m1"))
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    assert child.exitstatus == 0, child.before
    seen = json.loads(child.before.strip().splitlines()[-1])
    assert seen["pid"] == child.pid and seen["sid"] == child.pid          # its own session: killpg stops only it
    assert seen["tty_nr"] != 0 and seen["ctty"]                          # the pty is its controlling terminal
    assert len(set(seen["stdio"])) == 1 and seen["stdio"][0].startswith("/dev/pts/")
    assert seen["cwd"] == str(tmp_path) and seen["marker"] == "m1"
    assert seen["hup_ignored"] and not seen["echo"] and seen["winsize"] == [30, 100]
    assert os.path.realpath(seen["exe"]) == os.path.realpath(sys.executable)   # env exec'd it: nothing in between


def test_a_caller_preexec_fn_keeps_the_fork(tmp_path):
    """posix_spawn cannot run a caller's code in the child: ptyprocess's own fork does."""
    run_pty.install()
    marker = tmp_path / "ran"
    proc = ptyprocess.PtyProcess.spawn(["/bin/true"], preexec_fn=lambda: marker.write_text("yes"))
    proc.wait()
    assert marker.read_text() == "yes"


def test_a_lock_held_at_the_spawn_does_not_stop_the_run(tmp_path):
    """ptyprocess's fork ran the at-fork hooks in the child: one that needs a lock held in the parent at the fork
    hung the child before exec, for as long as the run's timeout. posix_spawn runs none."""
    held = threading.Lock()
    armed = []

    def needs_the_lock():   # an at-fork hook cannot be removed: it acts only while armed
        if armed:
            held.acquire()

    os.register_at_fork(after_in_child=needs_the_lock)
    book = tmp_path / "pb.yml"
    book.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.debug: {msg: started}\n")
    runner = PlaybookRunner(str(tmp_path / "rt"), ROOT, warm=False)
    results = []
    worker = threading.Thread(target=lambda: results.append(runner.run(str(book), {}, 60, "lock")), daemon=True)
    held.acquire()
    armed.append(True)
    try:
        worker.start()
        worker.join(90)
        hung = worker.is_alive()
        if hung:   # the spawn waits for an exec that never comes: stop the forked child so the test ends
            for pid in children():
                os.kill(pid, signal.SIGKILL)
            worker.join(30)
    finally:
        armed.clear()
        held.release()
        runner.close()
    assert not hung, "the run's client never started: the fork hung before its exec"
    assert results[0].ok and results[0].status == "successful", results[0].message


def children() -> list:
    pids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children", encoding="ascii") as f:
            pids += [int(p) for p in f.read().split()]
    return pids
