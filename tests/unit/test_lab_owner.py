"""tests.lab.owner: a lab's owner counts as alive only while its PID, start time and boot id all match."""
import os
import subprocess
import sys

from tests.lab import owner


def test_this_process_is_alive():
    rec = owner.record()
    assert rec["pid"] == os.getpid() and isinstance(rec["start_time"], int)
    assert owner.status(rec) == owner.ALIVE


def test_exited_process_is_gone():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    rec = owner.record(proc.pid)
    assert owner.status(rec) == owner.ALIVE
    proc.kill()
    proc.wait()
    assert owner.status(rec) == owner.GONE


def test_recycled_pid_is_gone():
    # a live process holding the recorded PID but started at another time is not the owner
    rec = owner.record()
    assert owner.status({**rec, "start_time": rec["start_time"] - 1}) == owner.GONE


def test_other_boot_is_gone():
    assert owner.status({**owner.record(), "boot_id": "00000000-0000-0000-0000-000000000000"}) == owner.GONE


def test_missing_or_malformed_record_is_unknown(tmp_path):
    assert owner.status(None) == owner.UNKNOWN
    assert owner.status({"pid": "1"}) == owner.UNKNOWN
    assert owner.lab_status(str(tmp_path)) == (owner.UNKNOWN, None)
    (tmp_path / "state.json").write_text('{"lab_id": "abcd", "pids": []}')
    assert owner.lab_status(str(tmp_path)) == (owner.UNKNOWN, None)


def test_claim_writes_a_readable_owner(tmp_path):
    owner.claim(str(tmp_path), "abcd", "lfababcd")
    assert owner.lab_status(str(tmp_path))[0] == owner.ALIVE
    assert (tmp_path / "state.json").stat().st_mode & 0o777 == 0o600


def test_start_time_survives_a_command_name_with_parentheses_and_spaces(tmp_path):
    exe = tmp_path / "a) b ("
    exe.symlink_to(sys.executable)
    proc = subprocess.Popen([str(exe), "-c", "import time; time.sleep(30)"])
    try:
        started = owner.start_time(proc.pid)
        assert started is not None and owner.start_time(proc.pid) == started
        assert owner.status(owner.record(proc.pid)) == owner.ALIVE
    finally:
        proc.kill()
        proc.wait()


def test_invoking_pid_skips_wrappers():
    # timeout forks: the CLI's parent is `timeout`, its owner the process that ran timeout
    out = subprocess.run(["timeout", "60", sys.executable, "-c", "from tests.lab import owner; print(owner.invoking_pid())"],
                         capture_output=True, text=True, check=True, cwd=os.path.dirname(os.path.dirname(
                             os.path.dirname(os.path.abspath(__file__))))).stdout
    assert int(out) == os.getpid()
