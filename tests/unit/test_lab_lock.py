"""The real-node labs' host lock (tests/lab/lab.py): one at a time, and a wait that ends with a clear error."""
import os
import types

import pytest

from tests.lab import names
from tests.lab.lab import Lab


def _holder(lab_id):
    return types.SimpleNamespace(lab_id=lab_id, _real_lock=None)


def test_second_real_node_lab_waits_then_fails_naming_the_timeout(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(names, "STATE_ROOT", str(tmp_path / "labs"))
    monkeypatch.setenv("LIQO_FABRIC_LAB_LOCK_TIMEOUT", "1.5")
    first, second = _holder("aaaa"), _holder("bbbb")
    Lab._lock_real_nodes(first)
    try:
        with pytest.raises(RuntimeError, match=r"lab bbbb: .*LIQO_FABRIC_LAB_LOCK_TIMEOUT=1.5 s"):
            Lab._lock_real_nodes(second)
        assert second._real_lock is None
        assert capsys.readouterr().err.count("lab bbbb: waiting for the real-node lab before it") == 1
    finally:
        os.close(first._real_lock)
    Lab._lock_real_nodes(second)   # the first went down: the lock is free
    os.close(second._real_lock)
