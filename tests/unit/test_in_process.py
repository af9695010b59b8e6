"""Pure parts of plugins/plugin_utils/speed/in_process.py and module_action.py: when a module may run in the Ansible
worker, and which module an action plugin stands for. The behaviour itself is tested through ansible-playbook in
tests/e2e/test_in_process.py."""
import gc
import multiprocessing

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import worker_gc_freeze
from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.in_process import in_process_refusal, module_fqcn
from tests.ansible_run import needs_speed_paths

SAFE = dict(transport="local", load_name="ansible.builtin.local", become=False, async_val=0, environment={},
            enabled=True)


@needs_speed_paths
@pytest.mark.parametrize("load_name", ["local", "ansible.builtin.local", "ansible.legacy.local"])
@pytest.mark.parametrize("enabled", [True, None, "true", "yes", 1, "True"])
def test_local_tasks_run_in_process(load_name, enabled):
    args = dict(SAFE)
    args.update(load_name=load_name, enabled=enabled)
    assert in_process_refusal(**args) is None


@needs_speed_paths
@pytest.mark.parametrize("change,reason", [
    (dict(enabled=False), "liqo_fabric_in_process is false"),
    (dict(enabled="false"), "liqo_fabric_in_process is false"),
    (dict(enabled="no"), "liqo_fabric_in_process is false"),
    (dict(enabled=0), "liqo_fabric_in_process is false"),
    (dict(transport="ssh", load_name="ansible.builtin.ssh"), "connection ansible.builtin.ssh is not local"),
    (dict(transport="liqo.fabric.netns", load_name="liqo.fabric.netns"), "connection liqo.fabric.netns is not local"),
    # a third-party connection that subclasses local without its own transport name
    (dict(load_name="someone.else.chroot"), "connection someone.else.chroot is not local"),
    (dict(become=True), "become is set"),
    (dict(async_val=30), "async is set"),
    (dict(environment={"HTTPS_PROXY": "http://proxy"}), "the task sets an environment"),
])
def test_anything_else_runs_the_real_module(change, reason):
    args = dict(SAFE)
    args.update(change)
    assert in_process_refusal(**args) == reason


def test_action_plugin_names_its_module():
    assert module_fqcn("ansible_collections.liqo.fabric.plugins.action.ipam") == (
        "liqo.fabric.ipam", "ansible_collections.liqo.fabric.plugins.modules.ipam")
    with pytest.raises(ValueError):
        module_fqcn("ansible.plugins.action.normal")


@needs_speed_paths
@pytest.mark.parametrize("transport,load_name,host_module,reason", [
    ("liqo.fabric.netns", "ansible_collections.liqo.fabric.plugins.connection.netns", True, None),
    ("local", "ansible.builtin.local", True, None),
    ("liqo.fabric.netns", "ansible_collections.liqo.fabric.plugins.connection.netns", False,
     "connection ansible_collections.liqo.fabric.plugins.connection.netns is not local"),
    ("ssh", "ansible.builtin.ssh", True, "connection ansible.builtin.ssh is not local or liqo.fabric.netns"),
])
def test_host_modules_also_run_in_process_on_the_netns_connection(transport, load_name, host_module, reason):
    args = dict(SAFE)
    args.update(transport=transport, load_name=load_name, host_module=host_module)
    assert in_process_refusal(**args) == reason


@needs_speed_paths
def test_host_modules_still_fall_back_for_become():
    args = dict(SAFE)
    args.update(transport="liqo.fabric.netns", load_name="liqo.fabric.netns", host_module=True, become=True)
    assert in_process_refusal(**args) == "become is set"


@needs_speed_paths
def test_preload_imports_the_plugins_module_once_where_the_plugin_loads(monkeypatch):
    """The per-node module is imported by the process that loads the action plugin (the strategy, in
    ansible-playbook itself), so each worker forked from it does not import it again; off with the speed paths."""
    import sys
    from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.preload import preload
    name = "ansible_collections.liqo.fabric.plugins.modules.overlay_dataplane"
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setenv("LIQO_FABRIC_SPEED_PATHS", "off")
    preload("ansible_collections.liqo.fabric.plugins.action.overlay_dataplane")
    assert name not in sys.modules
    monkeypatch.delenv("LIQO_FABRIC_SPEED_PATHS")
    preload("ansible_collections.liqo.fabric.plugins.action.overlay_dataplane")
    assert name in sys.modules
    preload("ansible_collections.liqo.fabric.plugins.action.no_such_module")  # left to the run


def test_the_overlay_action_plugin_preloads_its_module():
    import sys
    from ansible_collections.liqo.fabric.plugins.plugin_utils import speed
    if speed.off_reason():
        pytest.skip("speed paths off: %s" % speed.off_reason())
    import ansible_collections.liqo.fabric.plugins.action.overlay_dataplane  # noqa: F401  pylint: disable=unused-import
    assert "ansible_collections.liqo.fabric.plugins.modules.overlay_dataplane" in sys.modules


@needs_speed_paths
@pytest.mark.parametrize("plugin, loaded", [("tunnel_probe", True), ("gateway_plan", False)])
def test_a_host_module_plugin_also_preloads_pyroute2_and_an_api_one_does_not(plugin, loaded):
    """tunnel_probe imports pyroute2 only when it reads a link: its plugin imports it once where it loads, so the
    child forked per task does not; the API modules never need it."""
    import subprocess
    import sys
    from tests.conftest import ROOT
    code = ("import sys; import ansible_collections.liqo.fabric.plugins.action.%s; "
            "print('pyroute2' in sys.modules)" % plugin)
    env = {"PYTHONPATH": ROOT + "/build/collections", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(loaded)


def _frozen_in_a_worker(queue):
    inherited = [object() for dummy in range(1000)]
    worker_gc_freeze()
    queue.put((gc.get_freeze_count(), gc.isenabled()))
    del inherited


def test_a_worker_freezes_what_it_inherited_and_ansible_playbook_does_not():
    """The worker's objects leave the collector's reach (a collection would walk and copy the inherited heap); the
    collector stays on for what the task makes, and the main process is left alone."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_frozen_in_a_worker, args=(queue,))
    proc.start()
    frozen, enabled = queue.get(timeout=30)
    proc.join(30)
    assert frozen > 1000 and enabled
    before = gc.get_freeze_count()
    worker_gc_freeze()
    assert gc.get_freeze_count() == before
