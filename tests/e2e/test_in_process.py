"""The API-only modules run inside the Ansible worker (plugins/plugin_utils/speed/in_process.py) and give what
the real AnsiballZ module gives (`liqo_fabric_in_process: false`), against a real lab apiserver: same results
for a read and a writing module, same failures, check mode, diff, no_log; -vvv says which path ran;
become / environment / the variable fall back to the real module; an exception in main() is a clean
failed result. A throwaway collection (tmp dir) adds a module whose main() raises, warns or forgets to
exit, with the same in-process action plugin, and reports its parent pid: in the worker that is the
ansible-playbook process itself."""
import base64
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils import speed
from tests.ansible_run import VENV_BIN, ansible_env
from tests.conftest import COLLECTIONS

pytestmark = [pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl is not installed"),
              pytest.mark.skipif(speed.switched_off() is not None,
                                 reason="LIQO_FABRIC_SPEED_PATHS=off: these tests are about the in-process speed path")]

MARKER = re.compile(r"liqo\.fabric in-process: (yes|no)\b([^\n]*)")
REAL = {"liqo_fabric_in_process": False}
# values the apiserver gives each object (the two paths write different objects)
VOLATILE = {"uid", "resourceVersion", "creationTimestamp", "time", "generation"}


@pytest.fixture(scope="module")
def lab(lab1):
    return lab1


@pytest.fixture(scope="module")
def kc(lab):
    return lab["a"].kubeconfig


class Run:
    def __init__(self, proc, pid):
        self.proc, self.pid = proc, pid
        self.text = proc.stdout + proc.stderr
        start = proc.stdout.find("{\n")  # the json callback's document follows any -vvv lines
        try:
            data = json.loads(proc.stdout[start:])
        except ValueError:
            raise AssertionError("not JSON (rc %d): %s\n%s" % (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
        self.results = [t["hosts"]["localhost"] for t in data["plays"][0]["tasks"]]
        self.markers = [m.group(1) for m in MARKER.finditer(proc.stdout)]
        self.reasons = [m.group(2).strip() for m in MARKER.finditer(proc.stdout)]


def play(tasks, *, check=False, diff=False, verbose=True, extra_vars=None, collections_path=None, env=None):
    """ansible-playbook on localhost (connection local) with the json callback; -vvv by default."""
    with tempfile.TemporaryDirectory(prefix="lfab-inproc-") as tmp:
        path = os.path.join(tmp, "play.yml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], f)
        argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", path]
        argv += ["--check"] if check else []
        argv += ["--diff"] if diff else []
        argv += ["-vvv"] if verbose else []
        argv += ["-e", json.dumps(extra_vars)] if extra_vars else []
        env = dict(env or {}, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
        if collections_path:
            env["ANSIBLE_COLLECTIONS_PATH"] = collections_path + os.pathsep + COLLECTIONS
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ansible_env(env))
        out, err = proc.communicate(timeout=240)
    return Run(subprocess.CompletedProcess(argv, proc.returncode, out, err), proc.pid)


def both(tasks):
    """The tasks as the real module (block with liqo_fabric_in_process: false), then in-process."""
    return [{"block": tasks, "vars": REAL}, {"block": tasks}]


def normalized(value, ns_map=None):
    """The result without what legitimately differs between two runs (objects' identity, namespaces)."""
    ns_map = ns_map or {}
    if isinstance(value, dict):
        return {k: ("<volatile>" if k in VOLATILE else normalized(v, ns_map)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v, ns_map) for v in value]
    if isinstance(value, str):
        for old, new in ns_map.items():
            value = value.replace(old, new)
    return value


def get_json(kc, *args):
    proc = subprocess.run(["kubectl", "--kubeconfig", kc, "get", *args, "-o", "json"], capture_output=True, text=True,
                          check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None


# ----------------------------------------------------------------------------------------------- tests
def test_read_module_gives_the_same_result_and_vvv_says_which_path_ran(kc):
    run = play(both([{"name": "info", "liqo.fabric.cluster_info": {"kubeconfig": kc}}]))
    assert run.proc.returncode == 0, run.text[-3000:]
    real, inproc = run.results
    assert run.markers == ["no", "yes"], run.reasons
    assert "liqo_fabric_in_process is false" in run.reasons[0]
    assert inproc["cluster_id"] and inproc["network"]["podCIDR"]
    assert inproc == real
    # the real path is AnsiballZ (the module file and the interpreter), the in-process path is not
    assert run.proc.stdout.count("Using module file") == 1


def test_writing_module_same_results_check_mode_writes_nothing_and_diff_is_returned(kc):
    nss = {"real": "inproc-r-" + os.urandom(3).hex(), "inproc": "inproc-i-" + os.urandom(3).hex()}

    def steps(ns):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": ns},
              "data": {"mode": "fast"}}
        slow = dict(cm, data={"mode": "slow"})
        other = dict(cm, metadata={"name": "other", "namespace": ns})
        bad = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
               "metadata": {"name": "server", "namespace": ns},
               "spec": {"endpoint": {"port": 51820, "serviceType": "NodePort"}, "mtu": 100}}
        apply = "liqo.fabric.k8s_apply"
        return [
            {"name": "create", apply: {"kubeconfig": kc, "definitions": [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, cm]}, "diff": True},
            {"name": "rerun", apply: {"kubeconfig": kc, "definitions": [cm]}},
            {"name": "check change", apply: {"kubeconfig": kc, "definitions": [slow]}, "check_mode": True, "diff": True},
            {"name": "check create", apply: {"kubeconfig": kc, "definitions": [other]}, "check_mode": True},
            {"name": "bad field", apply: {"kubeconfig": kc, "definitions": [bad]}, "ignore_errors": True},
            {"name": "diff change", apply: {"kubeconfig": kc, "definitions": [slow]}, "diff": True},
            {"name": "delete", apply: {"kubeconfig": kc, "definitions": [slow], "state": "absent", "wait": True}},
        ]

    tasks = [{"block": steps(nss["real"]), "vars": REAL}, {"block": steps(nss["inproc"])}]
    run = play(tasks)
    assert run.proc.returncode == 0, run.text[-3000:]
    assert run.markers == ["no"] * 7 + ["yes"] * 7
    real = [normalized(r, {nss["real"]: "NS"}) for r in run.results[:7]]
    inproc = [normalized(r, {nss["inproc"]: "NS"}) for r in run.results[7:]]
    for a, b in zip(real, inproc):
        assert b == a
    by_name = dict(zip(["create", "rerun", "check", "check_create", "bad", "diff", "delete"], inproc))
    assert by_name["create"]["changed"] and by_name["create"]["diff"]
    assert by_name["rerun"]["changed"] is False
    assert by_name["check"]["changed"] is True
    (entry,) = by_name["check"]["diff"]
    assert entry["before"]["data"] == {"mode": "fast"} and entry["after"]["data"] == {"mode": "slow"}
    assert by_name["bad"]["failed"] and "spec.mtu" in by_name["bad"]["msg"] and "422" in by_name["bad"]["msg"]
    assert by_name["diff"]["changed"] and by_name["diff"]["diff"][0]["after"]["data"] == {"mode": "slow"}
    assert by_name["delete"]["deleted"] == ["ConfigMap NS/settings"]
    # check mode wrote nothing: "other" was never created; the delete of the run really happened
    for ns in nss.values():
        assert get_json(kc, "namespace", ns) is not None
        assert get_json(kc, "configmap", "other", "-n", ns) is None
        assert get_json(kc, "configmap", "settings", "-n", ns) is None


def test_check_mode_run_in_process_creates_nothing(kc):
    ns = "inproc-c-" + os.urandom(3).hex()
    run = play([{"name": "create", "liqo.fabric.k8s_apply": {"kubeconfig": kc, "definitions": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": ns}, "data": {"a": "b"}}]}}],
        check=True, diff=True)
    assert run.proc.returncode == 0 and run.markers == ["yes"], run.text[-3000:]
    (res,) = run.results
    assert res["changed"] is True and len(res["diff"]) == 2
    assert get_json(kc, "namespace", ns) is None


def test_secret_values_and_no_log_never_reach_vvv_output(kc):
    ns = "inproc-s-" + os.urandom(3).hex()
    value = "s3cr3t-" + os.urandom(8).hex()
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys", "namespace": ns},
              "stringData": {"privateKey": value}}
    nsdef = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    changed = dict(secret, stringData={"privateKey": value + "x"})
    run = play([
        {"name": "create", "liqo.fabric.k8s_apply": {"kubeconfig": kc, "definitions": [nsdef, secret]}},
        {"name": "no_log", "liqo.fabric.k8s_apply": {"kubeconfig": kc, "definitions": [changed]}, "no_log": True},
        {"name": "real", "liqo.fabric.k8s_apply": {"kubeconfig": kc, "definitions": [secret]}, "vars": REAL},
    ], diff=True)
    assert run.proc.returncode == 0, run.text[-3000:]
    assert run.markers == ["yes", "yes", "no"]
    created, hidden, real = run.results
    assert created["resources"][1]["data"] == {"privateKey": "VALUE_REDACTED"}
    assert hidden["censored"] and "resources" not in hidden
    assert real["changed"] and real["resources"][0]["data"] == {"privateKey": "VALUE_REDACTED"}
    stored = get_json(kc, "secret", "keys", "-n", ns)
    assert base64.b64decode(stored["data"]["privateKey"]).decode() == value  # the last task wrote it back
    for v in (value, value + "x"):
        assert v not in run.text and base64.b64encode(v.encode()).decode() not in run.text


def test_become_environment_and_the_variable_fall_back_to_the_real_module(kc):
    info = {"kubeconfig": kc}
    run = play([
        {"name": "env", "liqo.fabric.cluster_info": info, "environment": {"LFAB_INPROC": "1"}},
        {"name": "become", "liqo.fabric.cluster_info": info, "become": True, "become_method": "su"},
        {"name": "plain", "liqo.fabric.cluster_info": info},
    ])
    assert run.proc.returncode == 0, run.text[-3000:]
    assert run.markers == ["no", "no", "yes"], run.reasons
    assert "environment" in run.reasons[0] and "become" in run.reasons[1]
    assert run.results[0] == run.results[1] == run.results[2]
    assert run.proc.stdout.count("Using module file") == 2

    run = play([{"name": "plain", "liqo.fabric.cluster_info": info}], extra_vars={"liqo_fabric_in_process": "false"})
    assert run.proc.returncode == 0 and run.markers == ["no"], run.text[-3000:]


def test_failures_give_the_same_message_both_ways(kc, tmp_path):
    listed = tmp_path / "list.kubeconfig"
    listed.write_text("- not\n- a mapping\n")
    bad_field = {"apiVersion": "networking.liqo.io/v1beta1", "kind": "GatewayServer",
                 "metadata": {"name": "server", "namespace": "liqo"},
                 "spec": {"endpoint": {"port": 51820, "serviceType": "NodePort"}, "mtu": 100}}
    tasks = [
        {"name": "missing kubeconfig", "liqo.fabric.cluster_info": {"kubeconfig": str(tmp_path / "nope")},
         "ignore_errors": True},
        {"name": "bad field", "liqo.fabric.k8s_apply": {"kubeconfig": kc, "definitions": [bad_field]},
         "ignore_errors": True},
        {"name": "bad option", "liqo.fabric.cluster_info": {"kubeconfig": kc, "colour": "red"}, "ignore_errors": True},
        # valid YAML, not a mapping
        {"name": "not a kubeconfig", "liqo.fabric.cluster_info": {"kubeconfig": str(listed)}, "ignore_errors": True},
        {"name": "next", "liqo.fabric.cluster_info": {"kubeconfig": kc}},
    ]
    run = play(both(tasks))
    assert run.proc.returncode == 0, run.text[-3000:]
    assert run.markers == ["no"] * 5 + ["yes"] * 5
    real, inproc = run.results[:5], run.results[5:]
    for a, b in zip(real, inproc):
        assert b == a
    missing, field, option, exc, nxt = inproc
    assert missing["failed"] and "kubeconfig '%s': no such file" % (tmp_path / "nope") in missing["msg"]
    assert field["failed"] and "spec.mtu" in field["msg"]
    assert option["failed"] and "colour" in option["msg"]
    assert exc["failed"] and "kubeconfig '%s': not a kubeconfig (a YAML list" % listed in exc["msg"]
    assert nxt["cluster_id"] and not nxt.get("failed")


# ------------------------------------------------------------------- a module made to misbehave (tmp collection)
BOOM_MODULE = '''#!/usr/bin/python
from __future__ import annotations
import os
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(mode=dict(type="str", default="ok")), supports_check_mode=True)
    mode = module.params["mode"]
    if mode == "raise":
        raise RuntimeError("boom: raised inside main()")
    if mode == "noexit":
        return
    if mode == "warn":
        module.warn("boom: a warning")
    module.exit_json(changed=False, ppid=os.getppid(), pid=os.getpid())


if __name__ == "__main__":
    main()
'''
BOOM_ACTION = '''from __future__ import annotations
from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import InProcessAction


class ActionModule(InProcessAction):
    pass
'''


@pytest.fixture
def boom_collection(tmp_path):
    root = tmp_path / "collections"
    base = root / "ansible_collections" / "lfabtest" / "inproc" / "plugins"
    for sub, text in (("modules", BOOM_MODULE), ("action", BOOM_ACTION)):
        (base / sub).mkdir(parents=True)
        (base / sub / "boom.py").write_text(text)
    # a module whose import fails (a missing library imported without a guard)
    (base / "modules" / "broken.py").write_text("#!/usr/bin/python\nfrom ansible.module_utils.basic import AnsibleModule\n"
                                                "import lfab_no_such_library  # noqa\n")
    (base / "action" / "broken.py").write_text(BOOM_ACTION)
    return str(root)


def test_exception_warning_and_missing_exit_in_main_match_the_real_module(kc, boom_collection):
    tasks = [
        {"name": "ok", "lfabtest.inproc.boom": {}},
        {"name": "raise", "lfabtest.inproc.boom": {"mode": "raise"}, "ignore_errors": True},
        {"name": "noexit", "lfabtest.inproc.boom": {"mode": "noexit"}, "ignore_errors": True},
        {"name": "warn", "lfabtest.inproc.boom": {"mode": "warn"}},
        {"name": "next", "liqo.fabric.cluster_info": {"kubeconfig": kc}},
        {"name": "import error", "lfabtest.inproc.broken": {}, "ignore_errors": True},
    ]
    run = play(both(tasks), collections_path=boom_collection)
    assert run.proc.returncode == 0, run.text[-3000:]
    assert run.markers == ["no"] * 6 + ["yes"] * 6
    real, inproc = run.results[:6], run.results[6:]
    # where it ran: in the worker, whose parent is ansible-playbook; AnsiballZ is a process of the worker
    assert inproc[0]["ppid"] == run.pid and inproc[0]["pid"] != run.pid
    assert real[0]["ppid"] != run.pid
    for key in ("pid", "ppid"):
        real[0].pop(key), inproc[0].pop(key)
        real[3].pop(key), inproc[3].pop(key)
    for a, b in zip(real, inproc):
        assert b == a
    assert inproc[1]["failed"] and "boom: raised inside main()" in inproc[1]["msg"]
    assert inproc[2]["failed"] and "did not handle its own exit" in inproc[2]["msg"]
    assert inproc[3]["warnings"] == ["boom: a warning"] and not inproc[3].get("failed")
    assert inproc[4]["cluster_id"] and not inproc[4].get("failed")
    assert inproc[5]["failed"] and "No module named 'lfab_no_such_library'" in inproc[5]["msg"]


def test_traceback_follows_the_controller_setting_like_the_real_module(boom_collection):
    tasks = [{"name": "raise", "lfabtest.inproc.boom": {"mode": "raise"}, "ignore_errors": True}]
    for setting, want in (("never", False), ("error", True)):  # never: "(traceback unavailable)"
        run = play(both(tasks), collections_path=boom_collection, verbose=False,
                   env={"ANSIBLE_DISPLAY_TRACEBACK": setting})
        real, inproc = run.results
        for res in (real, inproc):
            assert ("Traceback (most recent call last)" in res["exception"]) is want, (setting, res)
        if want:  # the frames differ (zip payload and runpy vs. the worker), the error does not
            for res in (real, inproc):
                assert "RuntimeError: boom: raised inside main()" in res["exception"]
            assert 'boom.py", line 11, in main' in inproc.pop("exception") and real.pop("exception")
        assert inproc == real
