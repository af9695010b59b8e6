"""SIGTERM, SIGINT and SIGHUP while a lab is up (or coming up) tear it down, as an exception does.

Python's default SIGTERM and SIGHUP end the process on the spot: no `except`, `finally` or `with` runs, and the
lab's etcd, apiservers and webhooks (each started with setsid, so a terminal's signals miss them) outlive it.
While a lab of this process is up, these signals raise LabInterrupted in the main thread instead, once; the
lab's `except BaseException: self.down()`, `with` blocks and test fixtures then tear it down, and the threads
still starting parts of it stop at their next step (LabCluster.cancel, set here). Signals arriving during a
teardown, or while the main thread records a process it just started, wait for that to end. Once the last lab
is down the handlers in place before come back, and a signal held back meanwhile is delivered to them.

Handlers are installed only from the main thread (Python runs them there) and never over an ignored signal
(`nohup`, a background job's SIGINT).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class LabInterrupted(KeyboardInterrupt):
    """A signal stopped the process while a lab was up. A KeyboardInterrupt, as Ctrl-C: `except Exception` (the
    benchmark runner's) lets it through, and pytest ends the run, tearing its fixtures (and their labs) down."""

    def __init__(self, signum: int):
        super().__init__(f"{signal.Signals(signum).name} while a lab was up: the lab is torn down")
        self.signum = signum


class Cancelled(Exception):
    """Raised in a thread still starting part of a lab that is being torn down (nobody reads it)."""


def check(cancel: threading.Event | None, what: str) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"{what}: the lab is going down")


_lock = threading.RLock()
_active: dict[int, tuple] = {}       # id(lab) -> (cancel event, teardown callable) of the labs up in this process
_previous: dict[int, object] = {}    # signal -> handler before ours (only while ours is installed)
_holds = 0                           # main-thread teardowns and spawns in progress: signals wait for them
_pending: int | None = None          # a signal that arrived during a hold
_interrupted: int | None = None      # the signal that raised LabInterrupted: later ones are dropped


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _interrupt(signum: int):
    global _interrupted  # pylint: disable=global-statement
    _interrupted = signum
    for cancel, _down in list(_active.values()):
        cancel.set()
    raise LabInterrupted(signum)


def _handler(signum, _frame):
    global _pending  # pylint: disable=global-statement
    if _holds and _interrupted is None:
        _pending = signum
        return
    _deliver(signum)


def _install() -> None:
    for signum in SIGNALS:
        prev = signal.getsignal(signum)
        # an ignored signal stays ignored; None: a handler set outside Python, which could not be put back
        if prev in (signal.SIG_IGN, None):
            continue
        _previous[signum] = prev
        signal.signal(signum, _handler)


def _restore() -> None:
    global _interrupted  # pylint: disable=global-statement
    for signum, prev in list(_previous.items()):
        signal.signal(signum, prev)
    _previous.clear()
    _interrupted = None


def enter(lab, cancel: threading.Event, down) -> None:
    """`lab` is coming up: from now on a signal raises LabInterrupted (in the main thread) and sets `cancel`;
    `down` tears it down at exit if an interrupt left it up (the caller never reached its `down()`)."""
    with _lock:
        if not _active and not _previous and _main_thread():
            _install()
        _active[id(lab)] = (cancel, down)


def _leave(lab) -> None:
    with _lock:
        _active.pop(id(lab), None)
        if not _active and _previous and _main_thread():
            _restore()


@contextlib.contextmanager
def held():
    """Signals wait until the block ends (main thread only: elsewhere nothing to hold back): a process started
    here is recorded before an interrupt can unwind past it."""
    global _holds, _pending  # pylint: disable=global-statement
    if not _main_thread():
        yield
        return
    _holds += 1
    try:
        yield
    finally:
        _holds -= 1
        if not _holds and _pending is not None:
            signum, _pending = _pending, None
            _deliver(signum)


@contextlib.contextmanager
def teardown(lab):
    """Around a lab's down(): signals wait for it; then the lab leaves, and when it was the last the previous
    handlers come back and a signal held back meanwhile goes to them."""
    global _holds, _pending  # pylint: disable=global-statement
    main = _main_thread()
    if main:
        _holds += 1
    try:
        yield
    finally:
        if main:
            _holds -= 1
        _leave(lab)
        if main and not _holds and _pending is not None:
            signum, _pending = _pending, None
            _deliver(signum)


def _deliver(signum: int) -> None:
    """A signal, now or held back until now (main thread): an interrupt while labs are up; with none left (the
    last went down in another thread, which cannot put handlers back), the previous handler's, as before."""
    if _interrupted is not None:  # the teardown it would start is under way
        return
    if _active and _previous:
        _interrupt(signum)
    if _previous:
        _restore()
    signal.raise_signal(signum)


def _forget_in_child() -> None:
    """A forked child (an in-process ansible's worker) does not own the parent's labs: a signal to it must not
    tear them down. With no lab left, its handler puts the previous ones back and passes the signal on."""
    global _lock, _holds, _pending, _interrupted  # pylint: disable=global-statement
    _lock = threading.RLock()
    _active.clear()
    _holds, _pending, _interrupted = 0, None, None


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _down_interrupted_labs() -> None:
    """A lab left up by an interrupt whose caller never reached its down() (e.g. the signal came between
    `lab = Lab(...).up()` and the `try` meant to tear it down) goes down as the interpreter exits."""
    if _interrupted is None:
        return
    for _cancel, down in list(_active.values()):
        try:
            down()
        except Exception:  # pylint: disable=broad-except
            pass
