"""Pure parts of module_utils/rx_steering.py: the kernel's cpu list and cpumask formats, and which mask is
wanted. The sysfs side is tested on a real wireguard-go interface in tests/integration/test_gateway_dataplane.py."""
import pytest

from ansible_collections.liqo.fabric.plugins.module_utils import rx_steering as rs


@pytest.mark.parametrize("text,mask", [("0", 0b1), ("0-1", 0b11), ("0-3,8,10-11\n", 0b110100001111), ("", 0),
                                       ("2,4", 0b10100)])
def test_cpu_list(text, mask):
    assert rs.parse_cpu_list(text) == mask


@pytest.mark.parametrize("mask,text", [(0, "0"), (3, "3"), (0xFFFFFFFF, "ffffffff"), (1 << 32, "1,00000000"),
                                       ((1 << 40) - 1, "ff,ffffffff"), (1 << 64 | 5, "1,00000000,00000005")])
def test_mask_format_round_trips(mask, text):
    assert rs.format_mask(mask) == text
    assert rs.parse_mask(text + "\n") == mask


@pytest.mark.parametrize("enabled,online,want", [(True, 0b11, 0b11), (True, 0b1111, 0b1111), (True, 0b1, 0),
                                                 (True, 0b100, 0), (False, 0b11, 0)])
def test_desired_mask_steers_only_with_more_than_one_cpu(enabled, online, want):
    assert rs.desired_mask(enabled, online) == want


def test_a_missing_interface_is_an_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(rs, "SYS_NET", str(tmp_path))
    with pytest.raises(rs.SteeringError, match="interface lwgnone: no receive queues"):
        rs.sync_rps("lwgnone", True, online=0b11)


def test_sync_writes_only_what_differs(tmp_path, monkeypatch):
    monkeypatch.setattr(rs, "SYS_NET", str(tmp_path))
    for q, value in (("rx-0", "0\n"), ("rx-1", "3\n")):
        (tmp_path / "lwg1" / "queues" / q).mkdir(parents=True)
        (tmp_path / "lwg1" / "queues" / q / "rps_cpus").write_text(value)
    check = rs.sync_rps("lwg1", True, check=True, online=0b11)
    assert check == {"changed": True, "before": ["0", "3"], "after": ["3", "3"], "writes": 0}
    assert (tmp_path / "lwg1" / "queues" / "rx-0" / "rps_cpus").read_text() == "0\n"
    assert rs.sync_rps("lwg1", True, online=0b11)["writes"] == 1
    assert (tmp_path / "lwg1" / "queues" / "rx-0" / "rps_cpus").read_text() == "3"
    assert not rs.sync_rps("lwg1", True, online=0b11)["changed"]
