"""module_utils/host/atomic_file.py: a file written whole with its mode from the start; a failure leaves the old file
and no .tmp behind."""
import os
import stat

import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.host import atomic_file
from ansible_collections.liqo.fabric.plugins.module_utils.host.atomic_file import write_atomic


def test_a_new_file_is_0600_and_a_replaced_one_keeps_no_tmp(tmp_path):
    path = str(tmp_path / "x.pid")
    write_atomic(path, "123\n")
    assert open(path, encoding="utf-8").read() == "123\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    write_atomic(path, "456\n")
    assert open(path, encoding="utf-8").read() == "456\n"
    assert sorted(os.listdir(tmp_path)) == ["x.pid"]


def test_a_stale_tmp_with_another_mode_is_made_private_first_and_a_chosen_mode_is_kept(tmp_path):
    path = str(tmp_path / "hold")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("left by a run that died")
    os.chmod(path + ".tmp", 0o666)
    write_atomic(path, "{}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    record = str(tmp_path / "sysctl.conf")
    write_atomic(record, "a=1\n", mode=0o644)
    assert stat.S_IMODE(os.stat(record).st_mode) == 0o644


def test_a_failed_write_keeps_the_old_file_and_removes_the_tmp(tmp_path, monkeypatch):
    path = str(tmp_path / "x.pid")
    write_atomic(path, "old\n")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_file.os, "replace", refuse)
    with pytest.raises(OSError):
        write_atomic(path, "new\n")
    assert open(path, encoding="utf-8").read() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["x.pid"]
