"""The speed paths on private ansible-core internals switch themselves off outside the tested ansible-core range
(one warning) or with LIQO_FABRIC_SPEED_PATHS=off (no warning: the user chose), and modules then run as ordinary
AnsiballZ modules. The version is faked in a real ansible-playbook through a sitecustomize."""
import importlib
import os
import re
import subprocess

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed import in_process, switch
from tests.ansible_run import VENV_BIN, ansible_env, needs_speed_paths
from tests.e2e import real_nodes


def test_the_gate_is_the_pinned_minor_release_inside_requires_ansible():
    """The speed paths are on only for the ansible-core minor release the suite pins (the one their tests run on),
    which requires_ansible admits; the other versions of the matrix run the plain path."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "meta", "runtime.yml"), encoding="utf-8") as f:
        spec = SpecifierSet(yaml.safe_load(f)["requires_ansible"])
    with open(os.path.join(root, "requirements-dev.txt"), encoding="utf-8") as f:
        pinned = re.search(r"^ansible-core==(\S+)$", f.read(), re.M).group(1)
    assert switch.TESTED_RANGE == ">=2.19,<2.20"
    assert switch.parse(pinned) == switch.TESTED_MIN and switch.unsupported_core(pinned) is None
    assert pinned in spec and "%d.%d.0" % switch.TESTED_MIN in spec
    assert switch.unsupported_core("2.16.19") == "ansible-core 2.16.19 is outside the tested range >=2.19,<2.20"


@pytest.mark.parametrize("version,off", [("2.19.0", False), ("2.19.14", False), ("2.19.0rc1", False),
                                         ("2.18.7", True), ("2.20.0", True), ("3.0.1", True), ("devel", True)])
def test_version_gate(version, off):
    reason = switch.off_reason(version, environ={})
    assert (reason is not None) == off
    if off:
        assert reason == "ansible-core %s is outside the tested range >=2.19,<2.20" % version


@pytest.mark.parametrize("value", ["off", "0", "false", "NO"])
def test_environment_switch(value):
    assert switch.off_reason("2.19.14", environ={switch.ENV: value}) == "LIQO_FABRIC_SPEED_PATHS=%s" % value
    assert switch.unsupported_core("2.19.14") is None  # the switch is no version problem: no warning


TESTED, UNTESTED = "2.19.14", "2.21.3"
OUTSIDE = "ansible-core 2.21.3 is outside the tested range >=2.19,<2.20"


@pytest.mark.parametrize("kind, setting, environ, version, expected", [
    # the path's own switch, as the caller found it
    ("in_process", "no", {}, TESTED, (False, "liqo_fabric_in_process is false", False)),
    ("netns_fork", False, {}, TESTED, (False, "liqo_fabric_in_process is false", False)),
    pytest.param("in_process", None, {}, TESTED, (True, None, False), marks=needs_speed_paths),  # internals present
    ("warm_runner", False, {}, TESTED, (False, "--no-warm-runner", False)),
    # every path: the user's switch, no warning
    *[(kind, True, {switch.ENV: "off"}, TESTED, (False, "LIQO_FABRIC_SPEED_PATHS=off", False)) for kind in switch.KINDS],
    # the ansible-core version: a warning; the payload cache does not depend on ansible-core
    *[(kind, True, {}, UNTESTED, (False, OUTSIDE, True))
      for kind in ("in_process", "netns_fork", "preload", "warm_runner")],
    ("ansiballz_hook", True, {}, UNTESTED, (True, None, False)),
    ("ansiballz_cache", True, {}, UNTESTED, (True, None, False)),
    # the cache's own switch leaves the import hook on
    ("ansiballz_cache", True, {switch.CACHE_ENV: "off"}, TESTED, (False, "LIQO_FABRIC_ANSIBALLZ_CACHE=off", False)),
    ("ansiballz_hook", True, {switch.CACHE_ENV: "off"}, TESTED, (True, None, False)),
    ("ansiballz_cache", True, {switch.CACHE_ENV: "/some/dir"}, TESTED, (True, None, False)),
])
def test_one_switch_for_every_path(kind, setting, environ, version, expected):
    verdict = switch.enabled(kind, setting, environ=environ, version=version)
    assert tuple(verdict) == expected and (verdict.on, verdict.reason, verdict.warn) == expected


def test_an_unknown_path_is_an_error():
    with pytest.raises(ValueError):
        switch.enabled("in-process")


# what only the speed package may name: private ansible-core (and zipimport) internals
PRIVATE = ("ansible.module_utils._internal", "import _internal", "_ANSIBLE_ARGS", "_ANSIBLE_PROFILE", "_global_warnings",
           "_get_module_metadata", "_collection_finder", "_meta_yml_to_dict", "_synchronize_textiowrapper",
           "zipimporter", "import zipimport")


def test_only_the_speed_package_touches_private_ansible_core_internals():
    """The edge the package's docstring states: no code of the collection or the controller outside
    plugins/plugin_utils/speed names them."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    speed_dir = os.path.realpath(os.path.join(root, "plugins", "plugin_utils", "speed"))
    found = []
    for top in ("plugins", "controller", "roles", "playbooks"):
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"
                           and os.path.realpath(os.path.join(dirpath, d)) != speed_dir]
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                        text = f.read()
                    found += ["%s: %s" % (os.path.relpath(os.path.join(dirpath, name), root), p)
                              for p in PRIVATE if p in text]
    assert not found


@needs_speed_paths
def test_in_process_refuses_on_an_untested_core(monkeypatch):
    args = dict(transport="local", load_name="ansible.builtin.local", become=False, async_val=0, environment={},
                enabled=True)
    monkeypatch.delenv(switch.ENV, raising=False)
    assert in_process.in_process_refusal(**args) is None
    monkeypatch.setattr(switch, "core_version", lambda: "2.21.3")
    assert in_process.in_process_refusal(**args) == "ansible-core 2.21.3 is outside the tested range >=2.19,<2.20"


def _run(tmp_path, fake_version=None, extra_env=None):
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    if fake_version:
        (site / "sitecustomize.py").write_text("import ansible.release\nansible.release.__version__ = %r\n" % fake_version)
    book = tmp_path / "play.yml"
    book.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "first", "liqo.fabric.cluster_info": {"kubeconfig": str(tmp_path / "missing")}, "ignore_errors": True},
        {"name": "second", "liqo.fabric.cluster_info": {"kubeconfig": str(tmp_path / "missing")}, "ignore_errors": True},
    ]}]))
    env = ansible_env(dict({"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default", "ANSIBLE_LOCALHOST_WARNING": "false",
                            "PYTHONPATH": "%s:%s" % (site, os.environ.get("PYTHONPATH", ""))}, **(extra_env or {})))
    if not extra_env:
        env.pop(switch.ENV, None)
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "-vvv", "-i", "localhost,", "-c", "local",
                           str(book)], capture_output=True, text=True, env=env, cwd=tmp_path, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    # the module ran either way (its own message about the missing kubeconfig), twice
    assert out.count("kubeconfig '%s': no such file" % (tmp_path / "missing")) >= 2, out
    return out


def test_an_untested_core_runs_modules_normally_with_one_warning(tmp_path):
    out = " ".join(_run(tmp_path, fake_version="2.99.0").split())  # older ansible-core wraps warnings
    reason = "ansible-core 2.99.0 is outside the tested range >=2.19,<2.20"
    assert out.count("liqo.fabric: speed paths off (in-process modules, netns fork, warm runner, payload cache): "
                     + reason) == 1, out
    assert out.count("liqo.fabric in-process: no, running the module (%s)" % reason) == 2
    assert "in-process: yes" not in out


@needs_speed_paths
def test_tested_core_runs_in_process_and_the_switch_turns_it_off_quietly(tmp_path):
    out = _run(tmp_path)
    assert out.count("liqo.fabric in-process: yes") == 2 and "speed paths off" not in out
    out = _run(tmp_path, extra_env={switch.ENV: "off"})
    assert out.count("liqo.fabric in-process: no, running the module (LIQO_FABRIC_SPEED_PATHS=off)") == 2
    assert "speed paths off" not in out


@pytest.mark.parametrize("why, level", [("untested ansible-core", "WARNING"), ("the user's switch", "INFO")])
def test_controller_runs_cold_warning_only_on_an_untested_core(why, level, tmp_path, monkeypatch, caplog):
    """An ansible-core outside the tested range: a warning; LIQO_FABRIC_SPEED_PATHS=off is the user's choice: the
    controller says so at info level, no warning."""
    from controller.runner import PlaybookRunner  # pylint: disable=import-outside-toplevel
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if why == "untested ansible-core":
        monkeypatch.delenv(switch.ENV, raising=False)
        monkeypatch.setattr(switch, "core_version", lambda: "2.22.0")
    else:
        monkeypatch.setenv(switch.ENV, "off")
    caplog.set_level("INFO")
    runner = PlaybookRunner(str(tmp_path / "runtime"), root, warm=True)
    try:
        assert runner.zygote is None
        assert [r.levelname for r in caplog.records if r.getMessage() == "warm runner off"] == [level]
    finally:
        runner.close()


def _table_rows(text, header):
    """first-column cells of the markdown table whose header row starts with `header`"""
    lines = text[text.index(header):].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_readme_says_what_each_speed_path_saves_and_costs():
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "docs", "speed-paths.md"), encoding="utf-8") as f:
        documented = [row[0] for row in _table_rows(f.read(), "| path | where |")]
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    rows = _table_rows(readme, "| path | saves")
    assert [row[0] for row in rows] == documented and len(documented) == 5
    for row in rows:
        assert len(row) == 3 and row[1] and row[2], row
    # what each saves is said in words; the measured figures are one bench run's, on docs/benchmarks.md
    assert "docs/speed-paths.md" in readme and "make plain" in readme and "docs/benchmarks.md" in readme


def test_make_plain_runs_the_contract_whose_every_module_switches_the_speed_paths_off():
    """tests/e2e/plain: `make plain` runs it; each module says why it is in the contract (its docstring, listed in
    docs/speed-paths.md) and runs with LIQO_FABRIC_SPEED_PATHS=off for its whole life (the package's autouse
    module fixture), restored after it."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    proc = subprocess.run(["make", "-n", "-C", root, "plain"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "hack/run-tests.sh plain" in proc.stdout
    plain_dir = os.path.join(root, "tests", "e2e", "plain")
    modules = sorted(n[:-3] for n in os.listdir(plain_dir) if n.startswith("test_") and n.endswith(".py"))
    assert len(modules) >= 5, modules
    with open(os.path.join(root, "docs", "speed-paths.md"), encoding="utf-8") as f:
        documented = f.read()
    for name in modules:
        mod = importlib.import_module(f"tests.e2e.plain.{name}")
        assert (mod.__doc__ or "").strip(), f"tests/e2e/plain/{name}.py says why it is in the contract"
        assert f"`{name}`" in documented, f"docs/speed-paths.md lists {name}"
        assert any(n.startswith("test_") for n in vars(mod)), f"{name} runs no test"
    from tests.e2e.plain import conftest  # pylint: disable=import-outside-toplevel
    before = os.environ.pop(switch.ENV, None)
    try:
        with conftest.switched_off():
            assert switch.switched_off() == f"{switch.ENV}=off"
        assert switch.ENV not in os.environ
        os.environ[switch.ENV] = "on"
        with conftest.switched_off():
            assert switch.off_reason() == f"{switch.ENV}=off"
        assert os.environ[switch.ENV] == "on"
    finally:
        os.environ.pop(switch.ENV, None)
        if before is not None:
            os.environ[switch.ENV] = before


def _e2e_pytest(*args, **env):
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    base = {k: v for k, v in os.environ.items() if k != switch.ENV}
    return subprocess.run([os.path.join(VENV_BIN, "python"), "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=root, capture_output=True, text=True, check=False, env={**base, **env}, timeout=120)


def test_e2e_kubelet_lab_modules_go_first_and_skip_with_the_speed_paths_off():
    """tests/e2e/conftest.py: the kubelet-lab modules (test_in_cluster first, test_real_lab last) lead the collection,
    back to back (they share one real-node lab; the parallel workers take modules in that order); with
    LIQO_FABRIC_SPEED_PATHS=off they skip, saying why (their pods run the image's own ansible-core)."""
    proc = _e2e_pytest("--collect-only", "tests/e2e")
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    modules = list(dict.fromkeys(i.split("::")[0] for i in ids))
    lab_modules = [f"tests/e2e/{m}" for m in real_nodes.MODULES]
    assert lab_modules[0] == "tests/e2e/test_in_cluster.py" and lab_modules[-1] == "tests/e2e/test_real_lab.py"
    assert modules[:len(lab_modules)] == lab_modules, modules
    assert len(modules) > 10
    proc = _e2e_pytest("-rs", "tests/e2e/test_real_lab.py", **{switch.ENV: "off"})
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "LIQO_FABRIC_SPEED_PATHS=off: a kubelet-lab module" in proc.stdout
    assert " passed" not in proc.stdout and " skipped" in proc.stdout, proc.stdout[-2000:]


def test_e2e_kubelet_lab_modules_are_one_unit_of_work_for_the_workers(pytestconfig):
    """tests/e2e/conftest.py's scheduler: --dist loadfile, except that the modules sharing the real-node lab are one
    unit, so one worker runs them back to back on that lab."""
    from tests.e2e import conftest as e2e  # pylint: disable=import-outside-toplevel

    class LoadFile:  # the run's configuration, as under `-n 2 --dist loadfile`
        def __getattr__(self, name):
            return getattr(pytestconfig, name)

        def getoption(self, name, *default):
            return "loadfile" if name == "dist" else pytestconfig.getoption(name, *default)

        def getvalue(self, name):
            return ["2*popen"] if name == "tx" else pytestconfig.getvalue(name)

    scope = e2e.pytest_xdist_make_scheduler(LoadFile(), None)._split_scope  # pylint: disable=protected-access
    assert scope("tests/e2e/test_in_cluster.py::test_a") == scope("tests/e2e/test_real_lab.py::test_b")
    assert scope("tests/e2e/test_gateway.py::test_a") == "tests/e2e/test_gateway.py"
    assert scope("tests/e2e/test_gateway.py::test_a") != scope("tests/e2e/test_in_cluster.py::test_a")
