"""A run whose plays matched no hosts is a failure (reason NoHostsMatched), never "applied": the in-cluster
controller without an inventory, or an inventory without the cluster's groups, would otherwise mark objects
Ready with no dataplane at all. Real ansible-playbook runs on localhost, no root needed."""
import pytest

from controller.runner import PlaybookRunner
from tests.conftest import ROOT

TWO_PLAYS = """\
- name: API side
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Nothing to do
      ansible.builtin.debug: {msg: ok}
- name: Gateways of the cluster
  hosts: "{{ gateway_group | default('cluster_local_gateway') }}"
  gather_facts: false
  tasks:
    - name: Would build the dataplane
      ansible.builtin.debug: {msg: built}
"""


@pytest.fixture
def runner(tmp_path):
    r = PlaybookRunner(str(tmp_path / "rt"), ROOT, warm=False)
    yield r
    r.close()


def test_a_play_that_matched_no_hosts_fails_the_run(tmp_path, runner):
    book = tmp_path / "pb.yml"
    book.write_text(TWO_PLAYS)
    res = runner.run(str(book), {}, 120, "nohosts")
    assert not res.ok and res.status == "failed" and res.reason == "NoHostsMatched"
    assert res.message == ("play 'Gateways of the cluster' (hosts: cluster_local_gateway) matched no hosts"
                           " (no inventory: only localhost exists)"), res.message


def test_the_same_playbook_succeeds_when_every_play_has_hosts(tmp_path, runner):
    book = tmp_path / "pb.yml"
    book.write_text(TWO_PLAYS)
    res = runner.run(str(book), {"gateway_group": "localhost"}, 120, "hosts")
    assert res.ok and res.reason == "", res.message


def test_an_inventory_without_the_group_is_named(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  children:\n    cluster_a_nodes:\n      hosts:\n        n1: {ansible_connection: local}\n")
    book = tmp_path / "pb.yml"
    book.write_text(TWO_PLAYS)
    r = PlaybookRunner(str(tmp_path / "rt2"), ROOT, inventory=str(inv), warm=False)
    try:
        res = r.run(str(book), {"gateway_group": "cluster_a_gateway"}, 120, "inv")
    finally:
        r.close()
    assert not res.ok and res.reason == "NoHostsMatched"
    assert "play 'Gateways of the cluster' (hosts: cluster_a_gateway) matched no hosts in inventory " + str(inv) \
        == res.message, res.message


@pytest.mark.parametrize("warm", [False, True])
def test_extra_vars_larger_than_one_command_line_argument_reach_the_play(tmp_path, warm):
    """A group key's fabric_objects (a cluster's Nodes and Pods) outgrows an argument's 128 KiB: the runner hands
    the extra vars over in a file, warm or cold, and removes it after the run."""
    book = tmp_path / "pb.yml"
    book.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.assert:\n        that:\n          - fabric_objects | length == 3000\n"
                    "          - (fabric_objects | last).name == 'pod-2999'\n")
    r = PlaybookRunner(str(tmp_path / "rt"), ROOT, warm=warm)
    try:
        if warm:
            r.zygote.wait_ready(60)
        refs = [{"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": f"pod-{i}", "uid": "u" * 36}
                for i in range(3000)]
        res = r.run(str(book), {"fabric_objects": refs}, 120, "bigvars")
        assert res.ok and res.warm == warm, res.message
        assert not list((tmp_path / "rt").glob("slot*/extravars-*")), "the extra vars file is left behind"
    finally:
        r.close()
