"""tests.lab.interrupts: SIGTERM/SIGINT/SIGHUP while a lab is up raise LabInterrupted once, in the main thread; signals
wait for a teardown; the previous handlers come back once the last lab is down. Each case runs in a fresh
interpreter (it signals itself and changes its signal handlers)."""
import os
import signal
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRELUDE = """
import os, signal, sys, threading
from tests.lab import interrupts
from tests.lab.interrupts import LabInterrupted

class FakeLab:
    def __init__(self, name):
        self.name, self.cancel, self.downs = name, threading.Event(), 0
    def up(self):
        interrupts.enter(self, self.cancel, self.down)
        return self
    def down(self):
        with interrupts.teardown(self):
            self.downs += 1
            print(f"{self.name} down", flush=True)
"""


def _default_signals() -> None:
    # a suite started in the background (`cmd &` without job control) inherits SIGINT ignored, and under nohup
    # SIGHUP: the cases start from the dispositions of a foreground process
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _run(body: str) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False, env=dict(os.environ, PYTHONPATH=ROOT),
                          preexec_fn=_default_signals)  # pylint: disable=subprocess-popen-preexec-fn


def test_signal_while_up_raises_once_then_handlers_come_back():
    proc = _run("""
        lab = FakeLab("a").up()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            print("not interrupted")
        except LabInterrupted as exc:
            assert isinstance(exc, KeyboardInterrupt) and exc.signum == signal.SIGTERM
            assert lab.cancel.is_set()
            os.kill(os.getpid(), signal.SIGTERM)  # a second one while tearing down: dropped
            os.kill(os.getpid(), signal.SIGHUP)
            lab.down()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        print("done")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["a", "down", "done"]


def test_signal_during_a_normal_teardown_waits_for_it_then_goes_to_the_previous_handler():
    proc = _run("""
        lab = FakeLab("a").up()
        with interrupts.teardown(lab):
            os.kill(os.getpid(), signal.SIGTERM)
            print("teardown finished", flush=True)
        print("not reached")
    """)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert proc.stdout.split() == ["teardown", "finished"]


def test_ignored_signal_stays_ignored():
    proc = _run("""
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        lab = FakeLab("a").up()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)
        lab.down()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        print("done")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["a", "down", "done"]


def test_held_block_records_before_the_interrupt_unwinds():
    proc = _run("""
        lab = FakeLab("a").up()
        recorded = []
        try:
            with interrupts.held():
                os.kill(os.getpid(), signal.SIGINT)
                recorded.append("pid")
        except LabInterrupted as exc:
            assert exc.signum == signal.SIGINT and recorded == ["pid"]
            lab.down()
        print("done")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["a", "down", "done"]


def test_two_labs_both_cancelled_handlers_back_after_the_last():
    proc = _run("""
        a, b = FakeLab("a").up(), FakeLab("b").up()
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except LabInterrupted:
            assert a.cancel.is_set() and b.cancel.is_set()
            b.down()
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # a is still up
            a.down()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        print("done")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["b", "down", "a", "down", "done"]


def test_lab_left_up_by_an_interrupt_goes_down_at_exit():
    # the signal came before the caller's try/finally: nobody calls down(); the interpreter's exit does
    proc = _run("""
        lab = FakeLab("a").up()
        os.kill(os.getpid(), signal.SIGTERM)
        print("not reached")
    """)
    assert proc.returncode != 0
    assert "LabInterrupted" in proc.stderr
    assert proc.stdout.split() == ["a", "down"]


def test_a_lab_up_outside_the_main_thread_installs_nothing():
    proc = _run("""
        t = threading.Thread(target=lambda: FakeLab("a").up())
        t.start(); t.join()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        print("done")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["done"]


def test_check_raises_once_cancelled():
    import threading  # pylint: disable=import-outside-toplevel
    import pytest  # pylint: disable=import-outside-toplevel
    from tests.lab import interrupts  # pylint: disable=import-outside-toplevel
    ev = threading.Event()
    interrupts.check(ev, "x")
    interrupts.check(None, "x")
    ev.set()
    with pytest.raises(interrupts.Cancelled, match="x: the lab is going down"):
        interrupts.check(ev, "x")


def test_a_forked_child_does_not_tear_the_parents_lab_down():
    # an in-process ansible's worker is a fork: SIGTERM ends it as it would without a lab, the lab stays up
    proc = _run("""
        import time
        lab = FakeLab("a").up()
        pid = os.fork()
        if pid == 0:
            try:
                time.sleep(30)
            finally:
                os._exit(3)
        time.sleep(0.2)
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
        assert lab.downs == 0 and not lab.cancel.is_set()
        lab.down()
        print("done")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["a", "down", "done"]
