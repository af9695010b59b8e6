"""Key rotation: the schedule of periodic rotation (period annotation, last rotation) and the
endpoint a replaced WireGuard peer keeps."""
import base64
import datetime
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "build", "collections"))
from ansible_collections.liqo.fabric.plugins.module_utils.gateway import key_rotation as kr  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.diff import (  # noqa: E402
    apply_change_to_state, compute_change)
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.model import DeviceState, PeerState  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.uapi import render_uapi_set  # noqa: E402
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard.validation import validate_interface  # noqa: E402

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 25, 3, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize("value,seconds", [
    ("24h", 86400), ("7d", 604800), ("1h30m", 5400), ("90s", 90), ("3600", 3600), ("2d12h", 216000),
    (" 30M ", 1800), (None, None), ("", None), ("0", None), ("off", None)])
def test_periods(value, seconds):
    assert kr.parse_period(value) == seconds


@pytest.mark.parametrize("value,expect", [
    ("soon", "is not a period"), ("24x", "is not a period"), ("-5m", "is not a period"), ("h", "is not a period"),
    ("10s", "shorter than the minimum of 30 s"), ("29", "shorter than the minimum")])
def test_bad_periods_name_the_annotation_and_value(value, expect):
    with pytest.raises(kr.RotationError) as exc:
        kr.parse_period(value)
    assert kr.PERIOD_ANNOTATION in str(exc.value) and repr(value) in str(exc.value) and expect in str(exc.value)


def gateway(period=None):
    ann = {kr.PERIOD_ANNOTATION: period} if period is not None else {}
    return {"kind": "GatewayClient", "metadata": {"name": "b", "namespace": "liqo-tenant-b", "annotations": ann}}


def secret(created="2026-11-25T01:00:00Z", rotated=None):
    meta = {"name": "wg-client-b", "creationTimestamp": created}
    if rotated:
        meta["annotations"] = {kr.ROTATED_AT_ANNOTATION: rotated}
    return {"metadata": meta}


def test_no_annotation_never_rotates():
    s = kr.schedule(gateway(), secret(), NOW)
    assert s == {"period": None, "due": False, "due_at": None, "wait": None, "error": None}


def test_due_from_the_secrets_creation_when_never_rotated():
    s = kr.schedule(gateway("1h"), secret(created="2026-11-25T01:00:00Z"), NOW)
    assert s["due"] and s["wait"] == 0 and s["due_at"] == datetime.datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
    s = kr.schedule(gateway("3h"), secret(created="2026-11-25T01:00:00Z"), NOW)
    assert not s["due"] and s["wait"] == 3600


def test_the_last_rotation_restarts_the_period():
    s = kr.schedule(gateway("1h"), secret(created="2026-11-20T00:00:00Z", rotated="2026-11-25T02:30:00Z"), NOW)
    assert not s["due"] and s["wait"] == 1800
    s = kr.schedule(gateway("30m"), secret(created="2026-11-20T00:00:00Z", rotated="2026-11-25T02:30:00Z"), NOW)
    assert s["due"] and s["wait"] == 0


def test_offsets_and_a_bad_stamp():
    s = kr.schedule(gateway("1h"), secret(rotated="2026-11-25T03:30:00+01:00"), NOW)  # 02:30 UTC
    assert s["wait"] == 1800
    # an unreadable stamp falls back to the creation time
    s = kr.schedule(gateway("1h"), secret(created="2026-11-25T02:45:00Z", rotated="yesterday"), NOW)
    assert s["wait"] == 2700


def test_a_bad_period_is_reported_and_never_due():
    s = kr.schedule(gateway("every day"), secret(), NOW)
    assert not s["due"] and kr.PERIOD_ANNOTATION in s["error"] and "'every day'" in s["error"]


def test_a_gateway_without_keys_is_not_due():
    assert not kr.schedule(gateway("1h"), None, NOW)["due"]


def key(i):
    return base64.b64encode(bytes([i]) * 32).decode()


def spec(peer_key, endpoint=None, exclusive=True):
    return validate_interface({"name": "lwgtest", "private_key": key(9), "exclusive": exclusive,
                               "peers": [{"public_key": peer_key, "endpoint": endpoint, "allowed_ips": ["0.0.0.0/0"]}]})


def state(*peers):
    return DeviceState(bytes([9]) * 32, 51820, 0, {k: PeerState(k, ep, ["0.0.0.0/0"]) for k, ep in peers})


def test_a_replaced_peer_keeps_the_learned_endpoint():
    change = compute_change(spec(key(2)), state((key(1), "192.168.77.1:40000")))
    new = [p for p in change.peers if p.new]
    assert [p.public_key for p in change.peers if p.remove] == [key(1)]
    assert len(new) == 1 and new[0].endpoint == "192.168.77.1:40000"
    assert "endpoint=192.168.77.1:40000" in render_uapi_set(change)
    after = apply_change_to_state(spec(key(2)), state((key(1), "192.168.77.1:40000")))
    assert after.peers[key(2)].endpoint == "192.168.77.1:40000"


@pytest.mark.parametrize("desired,current", [
    (spec(key(2), "192.168.77.9:51820"), state((key(1), "192.168.77.1:40000"))),   # configured endpoint wins
    (spec(key(2), exclusive=False), state((key(1), "192.168.77.1:40000"))),        # not a replacement
    (spec(key(2)), state((key(1), "192.168.77.1:40000"), (key(3), "192.168.77.3:1"))),  # which one?
    (spec(key(2)), state()),                                                       # a new interface
])
def test_no_endpoint_is_inherited_otherwise(desired, current):
    change = compute_change(desired, current)
    new = [p for p in change.peers if p.new]
    assert new[0].endpoint == desired.peers[0].endpoint
