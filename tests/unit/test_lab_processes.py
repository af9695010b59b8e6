"""How a lab finds the processes it started (tests.lab.cleanup, tests.lab.apiserver): recorded with their start time
as they start, marked in their environment, and signalled by PID only while they are still those processes."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.lab import cleanup, owner
from tests.lab.apiserver import ApiServer


@pytest.fixture
def sleeper():
    """Starts sleeping processes (env= for each); every one of them is killed and reaped afterwards."""
    started = []

    def start(env=None):
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env))
        return started[-1]
    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_kill_spares_a_pid_that_is_no_longer_the_recorded_process(sleeper):
    proc = sleeper()
    started = owner.start_time(proc.pid)
    # a recorded start time that differs: the PID was recycled, it is someone else's process now
    assert cleanup._kill([proc.pid], {proc.pid: started - 1}) == []  # pylint: disable=protected-access
    assert proc.poll() is None
    assert cleanup._kill([proc.pid], {proc.pid: started}) == []  # pylint: disable=protected-access
    # gone: reaped by _kill (a child of this process), or a zombie this wait reaps
    assert proc.wait(timeout=5) in (0, -signal.SIGTERM)


def test_recorded_pids_trusts_the_start_time(tmp_path, sleeper):
    proc = sleeper()
    started = owner.start_time(proc.pid)
    (tmp_path / "state.json").write_text(json.dumps({"pids": [proc.pid], "processes": [
        {"role": "a/etcd", "pid": proc.pid, "start_time": started},
        {"role": "a/kube-apiserver", "pid": os.getpid(), "start_time": owner.start_time(os.getpid()) - 1}]}))
    assert cleanup.recorded_pids(str(tmp_path)) == {proc.pid: started}


def test_recorded_pids_of_an_old_state_file_check_the_command_line(tmp_path, sleeper):
    proc = sleeper()
    (tmp_path / "state.json").write_text(json.dumps({"pids": [proc.pid]}))
    assert not cleanup.recorded_pids(str(tmp_path))  # its command line does not name the directory


def test_marked_processes_are_found_by_their_lab_directory(tmp_path, sleeper):
    lab_dir = str(tmp_path / "lfab1234")
    proc = sleeper(env={**os.environ, cleanup.MARK: lab_dir})
    other = sleeper(env={**os.environ, cleanup.MARK: lab_dir + "0"})
    assert cleanup.marked_pids(lab_dir) == {proc.pid: owner.start_time(proc.pid)}
    assert cleanup.marked_processes()[other.pid][0] == lab_dir + "0"


def test_spawn_records_the_process_and_marks_it_before_returning(tmp_path):
    srv = ApiServer("x", str(tmp_path))
    srv.lab_dir = str(tmp_path)
    seen = []
    srv.on_spawn = lambda: seen.append(srv.processes())
    proc = srv._spawn("etcd", ["sleep", "60"])  # pylint: disable=protected-access
    try:
        started = owner.start_time(proc.pid)
        assert seen == [[{"role": "etcd", "pid": proc.pid, "start_time": started}]]
        # Popen may return (vfork) before the kernel has set the new program's environment up for /proc/PID/environ
        deadline = time.monotonic() + 5
        while cleanup.marked_pids(str(tmp_path)) != {proc.pid: started} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cleanup.marked_pids(str(tmp_path)) == {proc.pid: started}
    finally:
        srv.stop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert owner.start_time(proc.pid) is None and not srv.pids and not srv.start_times


def test_spawn_refuses_once_the_lab_is_going_down(tmp_path):
    import threading  # pylint: disable=import-outside-toplevel
    import pytest  # pylint: disable=import-outside-toplevel
    from tests.lab.interrupts import Cancelled  # pylint: disable=import-outside-toplevel
    srv = ApiServer("x", str(tmp_path))
    srv.cancel = threading.Event()
    srv.cancel.set()
    with pytest.raises(Cancelled):
        srv._spawn("sleeper", ["sleep", "60"])  # pylint: disable=protected-access
    assert not srv.pids
