"""dataplane_manifest.where() in a child that joined a named namespace (netns_fork): the name comes back right,
from the hint the join leaves, without a stat of every name under /run/netns (a lab has one per node and pod);
a wrong hint costs only the scan."""
import os

from ansible_collections.liqo.fabric.plugins.module_utils.host import manifest as dm
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.netns_fork import NETNS_NAME_ENV, run_forked


def _where_counting_stats(hint=None):
    if hint is not None:
        os.environ[NETNS_NAME_ENV] = hint
    calls = []
    real = os.stat

    def counting(path, *args, **kwargs):
        calls.append(str(path))
        return real(path, *args, **kwargs)

    os.stat = counting
    try:
        return dm.where(), [c for c in calls if c.startswith(dm.NETNS_DIR)]
    finally:
        os.stat = real


def test_a_joined_namespace_is_named_from_the_hint_and_a_wrong_hint_still_finds_it(netns_factory):
    other, mine = netns_factory("w1", "w2")  # the other sorts first: a scan would stat it before mine
    (where, stats), dummy = run_forked(_where_counting_stats, mine)
    assert where["netns"] == mine and "netns_inode" not in where
    assert stats == [os.path.join(dm.NETNS_DIR, mine)]  # the hint only
    (where, stats), dummy = run_forked(lambda: _where_counting_stats(hint=other), mine)
    assert where["netns"] == mine
    assert len(stats) >= 2 and stats[0].endswith(other)  # the hint, then the scan until the right one
