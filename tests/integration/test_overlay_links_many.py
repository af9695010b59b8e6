"""Many overlay links in one sync_overlay_links call (a gateway host has one per node): every link is made and
removed on a real kernel, and the namespace's links are dumped once per call, not once per changed link (100
dumps of 100 links took seconds of netlink parsing on a gateway host of 100 nodes)."""
import pytest

from ansible_collections.liqo.fabric.plugins.module_utils.overlay import link as overlay_link
from tests.lab import netns

pytestmark = pytest.mark.root

COUNT = 30


def _links(n):
    return [{"name": "lfov%d" % i, "type": "vxlan", "vni": 5000 + i, "remotes": ["192.168.77.%d" % (10 + i)],
             "local": "192.168.77.1", "dev": "eth0", "mtu": 1340} for i in range(n)]


def _counting_iproute(monkeypatch):
    dumps = []
    real = overlay_link.IPRoute

    def counting(*args, **kwargs):
        ipr = real(*args, **kwargs)
        dump = ipr.get_links

        def get_links(*a, **kw):
            dumps.append(1)
            return dump(*a, **kw)

        ipr.get_links = get_links
        return ipr

    monkeypatch.setattr(overlay_link, "IPRoute", counting)
    return dumps


def test_thirty_links_made_and_removed_with_one_link_dump_each_way(veth_pair, monkeypatch):
    ns = veth_pair[0]
    dumps = _counting_iproute(monkeypatch)
    made = overlay_link.sync_overlay_links(_links(COUNT), ["lfov"], netns=ns)
    shown = netns.run(["ip", "-n", ns, "-o", "link", "show", "type", "vxlan"]).stdout
    assert sorted(made["created"]) == sorted("lfov%d" % i for i in range(COUNT))
    assert all(" lfov%d:" % i in shown for i in range(COUNT))
    assert len(dumps) == 1
    again = overlay_link.sync_overlay_links(_links(COUNT), ["lfov"], netns=ns)
    assert not again["changed"] and len(dumps) == 2
    gone = overlay_link.sync_overlay_links([], ["lfov"], netns=ns)
    assert len(gone["deleted"]) == COUNT and len(dumps) == 3
    assert "lfov" not in netns.run(["ip", "-n", ns, "-o", "link", "show"]).stdout
