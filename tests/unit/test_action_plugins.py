"""plugins/action: two shared action plugins, one symlink per module to them, and overlay_dataplane_batch's own
plugin. Each symlink loads as a plugin named after its module, so it runs and preloads that module
(plugins/action/in_process.py says why symlinks)."""
import importlib
import os

import pytest
import yaml

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.in_process import module_fqcn
from tests.conftest import ROOT

ACTION = os.path.join(ROOT, "plugins", "action")
SHARED = {"in_process.py": False, "netns_fork.py": True}  # shared plugin -> its modules are host modules
OWN = {"overlay_dataplane_batch.py"}  # a plugin with logic of its own (one task, many hosts)
PLUGINS = sorted(n for n in os.listdir(ACTION) if n.endswith(".py"))
LINKS = {n: os.readlink(os.path.join(ACTION, n)) for n in PLUGINS if os.path.islink(os.path.join(ACTION, n))}


def test_every_other_plugin_is_a_symlink_to_a_shared_one_beside_it():
    assert set(PLUGINS) - set(LINKS) == set(SHARED) | OWN
    assert LINKS and set(LINKS.values()) <= set(SHARED), LINKS
    assert all(not os.path.islink(os.path.join(ACTION, n)) for n in SHARED)


@pytest.mark.parametrize("name", sorted(LINKS) + sorted(OWN))
def test_each_plugin_has_its_module(name):
    assert os.path.isfile(os.path.join(ROOT, "plugins", "modules", name))


def test_the_api_modules_are_the_in_process_ones_that_reach_a_cluster():
    """in_process.py runs main() in the worker: only for modules that talk to an API, never change the host."""
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as f:
        kube = set(yaml.safe_load(f)["action_groups"]["kube"])
    api = {n[:-3] for n, target in LINKS.items() if target == "in_process.py"}
    host = {n[:-3] for n, target in LINKS.items() if target == "netns_fork.py"}
    assert api and host
    assert api <= kube, sorted(api - kube)
    assert not host & kube, sorted(host & kube)


@pytest.mark.parametrize("name", sorted(LINKS))
def test_a_symlink_loads_as_the_plugin_of_its_module(name):
    plugin = importlib.import_module("ansible_collections.liqo.fabric.plugins.action." + name[:-3]).ActionModule
    assert module_fqcn(plugin.__module__)[0] == "liqo.fabric." + name[:-3]
    assert plugin.host_module is SHARED[LINKS[name]]
