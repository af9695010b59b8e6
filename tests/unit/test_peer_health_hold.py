"""The key rotation's hold on the probes' session restarts (module_utils/health/hold.py, apply_hold) and the
gateway_interface filter that names the held interfaces: deadlines, expiry, damaged files, input checks, check
mode, probes that do not run."""
import json
import os
import stat
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.liqo.fabric.plugins.filter.gateway_interface import gateway_interface  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import plan as gw  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import daemon as phd  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health import hold  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health.host import apply_hold  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.health.prober import HealthError  # noqa: E402
from controller.peer_health import target_of  # noqa: E402


def fake_probe(state_dir, interface):
    """A pid file naming this test process: read_pidfile takes it for a running probe."""
    os.makedirs(state_dir, exist_ok=True)
    pid = os.getpid()
    with open(phd.paths(state_dir, interface)[0], "w", encoding="utf-8") as f:
        json.dump({"pid": pid, "start": phd._start_time(pid), "config": "x"}, f)  # pylint: disable=protected-access


def test_a_hold_lasts_until_its_deadline(tmp_path):
    d = str(tmp_path)
    assert hold.remaining(d, "lwg1") == 0
    until = hold.write(d, "lwg1", 30, now=1000.0)
    assert until == 1030.0
    assert hold.remaining(d, "lwg1", now=1010.0) == 20.0
    assert hold.remaining(d, "lwg1", now=1030.0) == 0 and hold.remaining(d, "lwg1", now=2000.0) == 0
    assert stat.S_IMODE(os.stat(hold.hold_path(d, "lwg1")).st_mode) == 0o600
    assert hold.release(d, "lwg1") and not hold.release(d, "lwg1")
    assert os.listdir(d) == []


@pytest.mark.parametrize("content", ["", "not json", "[]", '{"until": "soon"}', '{"other": 1}'])
def test_a_damaged_hold_never_blocks_a_restart(tmp_path, content):
    (tmp_path / "lwg1.hold").write_text(content)
    assert hold.remaining(str(tmp_path), "lwg1") == 0


@pytest.mark.parametrize("seconds", [-1, 3601, 1.5, True, "10", None])
def test_seconds_outside_0_to_3600_are_named(seconds):
    with pytest.raises(hold.HoldError, match="seconds: "):
        hold.check_seconds(seconds)


def test_apply_holds_running_probes_only_and_releases(tmp_path):
    d = str(tmp_path / "health")
    fake_probe(d, "lwgrun")
    out = apply_hold(["lwgrun", "lwgidle"], 60, d)
    assert out["changed"] and out["held"] == ["lwgrun"] and out["not_running"] == ["lwgidle"], out
    assert 0 < hold.remaining(d, "lwgrun") <= 60 and not os.path.exists(hold.hold_path(d, "lwgidle"))
    # the hold is a probe file: a leftover one is found by running() (the exclusive stop removes it)
    assert "lwgrun" in phd.running(d)
    dry = apply_hold(["lwgrun"], 0, d, check_mode=True)
    assert dry["changed"] and dry["released"] == ["lwgrun"] and hold.remaining(d, "lwgrun") > 0
    out = apply_hold(["lwgrun", "lwgidle"], 0, d)
    assert out == {"changed": True, "held": [], "released": ["lwgrun"], "not_running": [], "until": None}
    assert not apply_hold(["lwgrun"], 0, d)["changed"]
    dry = apply_hold(["lwgrun"], 60, d, check_mode=True)
    assert dry["held"] == ["lwgrun"] and dry["until"] is None and hold.remaining(d, "lwgrun") == 0


def test_stop_removes_the_hold_but_a_restart_keeps_it(tmp_path):
    d = str(tmp_path / "health")
    os.makedirs(d)
    hold.write(d, "lwg1", 60)
    phd.stop(d, "lwg1", keep_hold=True)
    assert hold.remaining(d, "lwg1") > 0
    assert phd.stop(d, "lwg1") and not os.path.exists(d)


@pytest.mark.parametrize("args, field", [
    ((["lwg1"], 5, "relative/dir"), "state_dir"), ((["bad/name"], 5, "/run/x"), "interfaces[0]"),
    ((["lwg1", ""], 5, "/run/x"), "interfaces[1]"), ((["lwg1"], 4000, "/run/x"), "seconds: 4000")])
def test_bad_input_is_named_and_writes_nothing(tmp_path, args, field):
    with pytest.raises(HealthError, match=field.replace("[", r"\[").replace("]", r"\]")):
        apply_hold(*args)


def test_gateway_interface_is_the_planned_and_probed_interface():
    name = gateway_interface("cluster-a-id", "liqo-tenant-b", "GatewayClient", "b")
    assert name == gw.interface_name(gw.gateway_id("cluster-a-id", "liqo-tenant-b", "b", "GatewayClient"))
    assert name.startswith("lwg") and len(name) == 11
    obj = {"kind": "GatewayClient", "metadata": {"namespace": "liqo-tenant-b", "name": "b"}}
    assert target_of(obj, "cluster-a-id")["interface"] == name
    assert gateway_interface("cluster-a-id", "liqo-tenant-b", "GatewayServer", "b") != name
    with pytest.raises(AnsibleFilterError, match="kind 'Gateway' is not one of GatewayClient, GatewayServer"):
        gateway_interface("cluster-a-id", "liqo-tenant-b", "Gateway", "b")
    with pytest.raises(AnsibleFilterError, match="namespace ''"):
        gateway_interface("cluster-a-id", "", "GatewayClient", "b")
