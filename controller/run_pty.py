# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How this process starts a run's client on a pty (ansible_runner -> pexpect -> ptyprocess), adjusted twice:

- spawned by posix_spawn, not fork: ptyprocess forks and runs Python code in the child (window size, echo, closing
  descriptors, pexpect's SIGHUP wrapper) before exec. The controller has many threads; a lock one of them held at
  the fork stays held forever in the child, whose code may need it (an at-fork hook, a finalizer run by the garbage
  collector): the run then never starts and its key waits for the run's timeout. posix_spawn runs no Python in
  the child. It has no working-directory action in Python 3.11 and cannot ignore a signal, so the child execs
  coreutils' `env --chdir DIR --ignore-signal=HUP`, which then execs the client: the same session (setsid), the
  pty as controlling terminal and stdio, the same cwd and environment, SIGHUP ignored as pexpect asks.
- no close delay: ptyprocess sleeps 0.1 s in close() ("give kernel time to update process status") before checking
  whether the child still lives. ansible_runner closes the pty only after its loop saw the child exit, so that
  sleep is dead time added to every run.
Any other use of ptyprocess in this process (pass_fds, a caller's own preexec_fn) keeps its fork.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import signal
import struct
import termios

import ptyprocess

ENV = shutil.which("env") or "/usr/bin/env"
_PATCHED = "_liqo_fabric_run_pty"


def install() -> None:
    """Patches ptyprocess.PtyProcess for this process (idempotent)."""
    cls = ptyprocess.PtyProcess
    if getattr(cls, _PATCHED, False):
        return
    init, fork_spawn = cls.__init__, cls.spawn

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.delayafterclose = 0.0

    def spawn(klass, argv, cwd=None, env=None, echo=True, preexec_fn=None, dimensions=(24, 80), pass_fds=()):
        ignore_hup = _ignores_sighup_only(preexec_fn)
        argv = [os.fsdecode(a) for a in argv]    # pexpect hands them over encoded
        command = shutil.which(argv[0], path=(env or os.environ).get("PATH")) if argv else None
        if ignore_hup is None or pass_fds or not command or "=" in command:
            return fork_spawn(argv, cwd=cwd, env=env, echo=echo, preexec_fn=preexec_fn, dimensions=dimensions,
                              pass_fds=pass_fds)
        return _posix_spawn(klass, [command] + argv[1:], cwd and os.fsdecode(cwd), env, echo, ignore_hup, dimensions)

    cls.__init__ = __init__
    cls.spawn = classmethod(spawn)
    setattr(cls, _PATCHED, True)


def _ignores_sighup_only(preexec_fn):
    """False for no preexec_fn, True for pexpect's ignore_sighup wrapper around none, None for anything else."""
    if preexec_fn is None:
        return False
    code = getattr(preexec_fn, "__code__", None)
    cells = dict(zip(code.co_freevars, preexec_fn.__closure__ or ())) if code else {}
    if getattr(preexec_fn, "__name__", "") == "preexec_wrapper" and set(cells) == {"preexec_fn"} \
            and cells["preexec_fn"].cell_contents is None:
        return True
    return None


def _posix_spawn(cls, argv, cwd, env, echo, ignore_hup, dimensions):
    master, slave = os.openpty()     # both close-on-exec: the child keeps only what its file actions give it
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", dimensions[0], dimensions[1], 0, 0))
        if not echo:
            attrs = termios.tcgetattr(slave)
            attrs[3] &= ~termios.ECHO
            termios.tcsetattr(slave, termios.TCSANOW, attrs)
        wrapper = [ENV, "--chdir", cwd or os.getcwd()] + (["--ignore-signal=HUP"] if ignore_hup else []) + ["--"]
        # setsid happens before the file actions: opening the pty then makes it the controlling terminal
        pid = os.posix_spawn(ENV, wrapper + argv, os.environ if env is None else env, setsid=True, setsigmask=(),
                             setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                             file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.ttyname(slave), os.O_RDWR, 0),
                                           (os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2)])
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    inst = cls(pid, master)
    inst.argv = argv
    if env is not None:
        inst.env = env
    if cwd is not None:
        inst.launch_dir = cwd
    return inst
