"""Pure parts of the warm runner (plugins/plugin_utils/speed/warm.py): which environment differences force a cold run,
which constants a forked child re-sets, and the process-tree walk used to kill a run."""
import os

import pytest
from hypothesis import given, strategies as st

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import warm
from tests.ansible_run import needs_speed_paths

BASE = {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": "/rt/tmp", "PATH": "/usr/bin", "HOME": "/root",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": "/rt/slot0/artifacts/a/fact_cache",
        "AWX_ISOLATED_DATA_DIR": "/rt/slot0/artifacts/a", "PYTHONUNBUFFERED": "1", "JOB": "x"}


def run_env(**changes):
    env = dict(BASE)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


@pytest.mark.parametrize("changes,expected", [
    ({}, []),
    # per-run values ansible_runner sets for each run: allowed, the child re-sets their constants
    ({"ANSIBLE_CACHE_PLUGIN_CONNECTION": "/rt/slot1/artifacts/b/fact_cache", "AWX_ISOLATED_DATA_DIR": "/rt/slot1/artifacts/b"}, []),
    # not config-relevant: the child's os.environ is replaced anyway
    ({"PATH": "/bin", "JOB": "y", "KUBECONFIG": "/k"}, []),
    ({"ANSIBLE_NOCOLOR": "0"}, ["ANSIBLE_NOCOLOR"]),
    ({"ANSIBLE_FORKS": "7"}, ["ANSIBLE_FORKS"]),                    # added
    ({"ANSIBLE_LOCAL_TEMP": None}, ["ANSIBLE_LOCAL_TEMP"]),         # removed
    ({"HOME": "/home/x"}, ["HOME"]),                                 # ~ in config paths
    ({"PYTHONUNBUFFERED": None, "LC_ALL": "C"}, ["LC_ALL", "PYTHONUNBUFFERED"]),
    ({"PAGER": "more"}, ["PAGER"]),                                  # a config env name without ANSIBLE_
    ({"ANSIBLE_CONFIG": "/etc/other.cfg"}, ["ANSIBLE_CONFIG"]),
])
def test_env_differences(changes, expected):
    assert warm.env_differences(BASE, run_env(**changes), config_env_names=["PAGER", "ANSIBLE_NOCOLOR"]) == expected


def test_referenced_variables_become_relevant_transitively():
    base = dict(BASE, ANSIBLE_ROLES_PATH="$ROLES_ROOT/roles", ROLES_ROOT="${TOP}/r", TOP="/a")
    assert warm.env_differences(base, dict(base, TOP="/b")) == ["TOP"]
    assert warm.env_differences(base, dict(base, ROLES_ROOT="/x")) == ["ROLES_ROOT"]
    # names the ini config file references
    assert warm.env_differences(BASE, dict(BASE, MYDIR="/b"), texts=["[defaults]\nroles_path = $MYDIR/roles\n"]) == ["MYDIR"]
    assert warm.env_differences(BASE, dict(BASE, MYDIR="/b")) == []


def test_per_run_names_are_explicit():
    assert warm.PER_RUN_ENV == ("ANSIBLE_CACHE_PLUGIN_CONNECTION", "AWX_ISOLATED_DATA_DIR")
    other = run_env(ANSIBLE_CACHE_PLUGIN_CONNECTION="/elsewhere")
    assert warm.env_differences(BASE, other, per_run=()) == ["ANSIBLE_CACHE_PLUGIN_CONNECTION"]


def test_cwd_is_part_of_the_fingerprint():
    assert warm.differences(BASE, "/rt/project", BASE, "/rt/project/") == []
    assert warm.differences(BASE, "/rt/project", run_env(ANSIBLE_FORKS="2"), "/rt/slot1") == ["ANSIBLE_FORKS", "cwd"]


@given(st.dictionaries(st.sampled_from(["ANSIBLE_A", "ANSIBLE_B", "LC_X", "PATH", "FOO", "PYTHONY"]),
                       st.sampled_from(["1", "2", "$FOO", "x"]), max_size=6))
def test_differences_are_symmetric_and_empty_on_self(env):
    assert warm.env_differences(env, env) == []
    other = dict(env, ANSIBLE_A="changed")
    assert warm.env_differences(env, other) == warm.env_differences(other, env)
    assert "ANSIBLE_A" in warm.env_differences(env, other) or env.get("ANSIBLE_A") == "changed"


def test_var_refs():
    assert warm.var_refs("$A/${B}/c$D_1 $$ ${}") == {"A", "B", "D_1"}
    assert warm.var_refs("") == set()


def test_resettable_settings():
    defs = {
        "CACHE_PLUGIN_CONNECTION": {"env": [{"name": "ANSIBLE_CACHE_PLUGIN_CONNECTION"}], "type": "path"},
        "DEFAULT_LOCAL_TMP": {"env": [{"name": "ANSIBLE_LOCAL_TEMP"}], "type": "tmppath"},
        "DEFAULT_FORKS": {"env": [{"name": "ANSIBLE_FORKS"}], "type": "integer"},
        "NO_ENV": {"type": "string"},
    }
    assert warm.resettable_settings(defs) == ["CACHE_PLUGIN_CONNECTION", "DEFAULT_LOCAL_TMP"]


def test_resettable_settings_of_the_installed_ansible():
    from ansible.config.manager import ConfigManager  # pylint: disable=import-outside-toplevel
    defs = ConfigManager()._base_defs  # pylint: disable=protected-access
    assert set(warm.resettable_settings(defs)) >= {"CACHE_PLUGIN_CONNECTION", "DEFAULT_LOCAL_TMP"}


def test_descendants_walks_a_proc_tree(tmp_path):
    # 1 -> 10 -> (11 -> 13, 12); 20 is unrelated; names with spaces and parens are parsed from the last ')'
    tree = {10: 1, 11: 10, 12: 10, 13: 11, 20: 1}
    for pid, ppid in tree.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a (b) c) S {ppid} {pid} {pid} 0\n")
    (tmp_path / "self").mkdir()
    assert sorted(warm.descendants(10, proc=str(tmp_path))) == [11, 12, 13]
    assert warm.descendants(13, proc=str(tmp_path)) == []


def test_descendants_of_this_process_include_a_child():
    import subprocess  # pylint: disable=import-outside-toplevel
    p = subprocess.Popen(["sleep", "30"])
    try:
        assert p.pid in warm.descendants(os.getpid())
    finally:
        p.kill()
        p.wait()


def test_zipshare_reuses_the_collections_payloads_until_a_source_changes(tmp_path, monkeypatch):
    import atexit
    from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.warm import ZipShare
    coll = tmp_path / "coll"
    (coll / "plugins" / "modules").mkdir(parents=True)
    (coll / "plugins" / "module_utils").mkdir(parents=True)
    util = coll / "plugins" / "module_utils" / "x.py"
    util.write_text("A = 1\n")
    share = ZipShare(str(tmp_path / "store"), str(coll))
    exits = []
    monkeypatch.setattr(atexit, "register", lambda fn, *a: exits.append((fn, a)))

    run1 = tmp_path / "run1"
    share.attach(str(run1))
    cache1 = run1 / "ansiballz_cache"
    ours = "ansible_collections.liqo.fabric.plugins.modules.m-ZIP_DEFLATED-none"
    for name in (ours, ours + ".lock", "ansible.legacy.m-ZIP_DEFLATED-none",
                 "ansible_collections.other.c.plugins.modules.m-ZIP_DEFLATED-none"):
        (cache1 / name).write_text("payload")
    fn, args = exits.pop()
    fn(*args)  # the run ends: only this collection's payload is kept
    fp1 = share.fingerprint()
    assert sorted(os.listdir(tmp_path / "store" / fp1)) == [ours]

    run2 = tmp_path / "run2"
    share.attach(str(run2))
    assert (run2 / "ansiballz_cache" / ours).read_text() == "payload"
    exits.clear()

    util.write_text("A = 2  # edited\n")
    run3 = tmp_path / "run3"
    share.attach(str(run3))
    assert share.fingerprint() != fp1
    assert os.listdir(run3 / "ansiballz_cache") == []          # never the payload of the old source
    assert os.listdir(tmp_path / "store") == [share.fingerprint()]


def test_zipshare_without_the_collection_does_nothing(tmp_path):
    from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.warm import ZipShare
    ZipShare(str(tmp_path / "store"), None).attach(str(tmp_path / "run"))
    assert not (tmp_path / "store").exists() and not (tmp_path / "run").exists()


@needs_speed_paths
def test_inventory_memo_serves_a_forked_child_the_parse_once_and_follows_changes(tmp_path, monkeypatch):
    """The zygote parses the run's inventory before forking; a child's InventoryManager gets the same hosts and vars
    from it (trusted for templating as Ansible's own read); an edited file is parsed again; a vaulted one never."""
    from ansible.inventory.manager import InventoryManager  # pylint: disable=import-outside-toplevel
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(DataLoader, "load_from_file", DataLoader.load_from_file)   # undone after the test
    inv = tmp_path / "inventory.yml"
    inv.write_text("all:\n  children:\n    nodes:\n      vars: {kubeconfig: '{{ playbook_dir }}/kc'}\n"
                   "      hosts:\n        n1: {node_name: a}\n        n2: {node_name: b}\n")
    plain = InventoryManager(DataLoader(), sources=[str(inv)])
    memo = warm.InventoryMemo()
    memo.install()
    assert warm.InventoryMemo.inventories(["p.yml", "-i", "x", "--inventory=y", "-e", "@f"]) == ["x", "y"]
    memo.prime(["p.yml", "-i", "inventory.yml"], str(tmp_path))
    assert len(memo.memo) == 2                         # the auto plugin's read and the yaml plugin's
    served = InventoryManager(DataLoader(), sources=[str(inv)])
    assert not memo.memo                               # each handed out once (in a child: its own copy)
    assert sorted(served.hosts) == sorted(plain.hosts) == ["n1", "n2"]
    assert served.get_host("n2").get_vars() == plain.get_host("n2").get_vars()
    from ansible._internal._datatag._tags import TrustedAsTemplate  # pylint: disable=import-outside-toplevel
    assert TrustedAsTemplate.is_tagged_on(served.groups["nodes"].get_vars()["kubeconfig"])
    memo.prime(["-i", str(inv)], "/")
    inv.write_text("all:\n  hosts:\n    n3: {}\n")
    memo.prime(["-i", str(inv)], "/")                  # the edited file replaces the old parse
    assert sorted(InventoryManager(DataLoader(), sources=[str(inv)]).hosts) == ["n3"]
    vaulted = tmp_path / "vaulted.yml"
    vaulted.write_text("all:\n  vars:\n    x: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n      3132\n")
    memo.prime(["-i", str(vaulted)], "/")
    assert not memo.memo
