"""Host modules run in a child forked from the Ansible worker (plugins/plugin_utils/module_action.py's
HostInProcessAction, speed/in_process.py and speed/netns_fork.py), inside the host's network namespace for the liqo.fabric.netns
connection: the module sees that namespace's links, /sys and /proc/self/ns/net exactly as the real module run
through `ip netns exec` does; results and failures match the real module; the host's own /sys is untouched;
a daemon the module starts stays in the namespace; a task timeout kills the child; a missing namespace makes
the host unreachable both ways. A throwaway collection (tmp dir) holds a module that reports where it ran."""
import json
import os
import re
import subprocess
import tempfile
import time

import pytest

from tests.ansible_run import VENV_BIN, ansible_env
from tests.conftest import COLLECTIONS

MARKER = re.compile(r"liqo\.fabric in-process: (yes|no)\b([^\n]*)")
REAL = {"liqo_fabric_in_process": False}

WHERE_MODULE = '''#!/usr/bin/python
from __future__ import annotations
import os
import signal
import subprocess
import time
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(mode=dict(type="str", default="where"),
                                              path=dict(type="str")), supports_check_mode=True)
    mode, path = module.params["mode"], module.params["path"]
    if mode == "raise":
        raise RuntimeError("where: raised inside main()")
    if mode == "hang":
        with open(path, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    if mode == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "daemon":  # like wireguard-go: its own session, outlives the module, holds no pipe of ours
        proc = subprocess.Popen(["sleep", "30"], start_new_session=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        module.exit_json(changed=True, daemon=proc.pid)
    module.exit_json(changed=False, links=sorted(os.listdir("/sys/class/net")),
                     netns=os.stat("/proc/self/ns/net").st_ino, pid=os.getpid(), ppid=os.getppid(),
                     grandparent=grandparent())


def grandparent():
    with open("/proc/%d/stat" % os.getppid()) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


if __name__ == "__main__":
    main()
'''
HOST_ACTION = '''from __future__ import annotations
from ansible_collections.liqo.fabric.plugins.plugin_utils.module_action import HostInProcessAction


class ActionModule(HostInProcessAction):
    pass
'''


@pytest.fixture(scope="module")
def where_collection():
    with tempfile.TemporaryDirectory(prefix="lfab-inproc-host-") as tmp:
        base = os.path.join(tmp, "ansible_collections", "lfabtest", "host", "plugins")
        for sub, text in (("modules", WHERE_MODULE), ("action", HOST_ACTION)):
            os.makedirs(os.path.join(base, sub))
            with open(os.path.join(base, sub, "where.py"), "w", encoding="utf-8") as f:
                f.write(text)
        yield tmp


def play(ns, tasks, where_collection, connection="liqo.fabric.netns"):
    """ansible-playbook -vvv on one host `ns` of the given connection, json callback; (rc, results, markers,
    ansible-playbook's pid, text)."""
    with tempfile.TemporaryDirectory(prefix="lfab-inproc-host-") as tmp:
        path = os.path.join(tmp, "play.yml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}], f)
        argv = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", ns + ",", "-c", connection, "-vvv", path,
                "-e", json.dumps({"ansible_python_interpreter": os.path.join(VENV_BIN, "python")})]
        env = ansible_env({"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
                           "ANSIBLE_COLLECTIONS_PATH": where_collection + os.pathsep + COLLECTIONS})
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        out, err = proc.communicate(timeout=240)
    data = json.loads(out[out.find("{\n"):])
    results = [t["hosts"][ns] for t in data["plays"][0]["tasks"]] if data["plays"] else []
    return proc.returncode, results, [m.group(1) for m in MARKER.finditer(out)], proc.pid, out + err


def test_module_sees_the_namespace_like_the_real_module_and_the_host_is_untouched(veth_pair, where_collection):
    ns = veth_pair[0]
    host_links = sorted(os.listdir("/sys/class/net"))
    tasks = [{"name": "where", "lfabtest.host.where": {}}]
    rc, (real, inproc), markers, pid, text = play(ns, [{"block": tasks, "vars": REAL}, {"block": tasks}],
                                                  where_collection)
    assert rc == 0, text[-3000:]
    assert markers == ["no", "yes"]
    assert f"ran in a child of the worker process in netns {ns}" in text
    assert inproc["links"] == real["links"] == ["eth0", "lo"]           # the namespace's /sys, not the host's
    assert inproc["netns"] == real["netns"] == os.stat(f"/run/netns/{ns}").st_ino
    assert inproc["netns"] != os.stat("/proc/self/ns/net").st_ino
    # in-process: a child of the worker, whose parent is ansible-playbook; real: a child of the module's
    # shell, itself a child of the worker
    assert inproc["grandparent"] == pid and real["grandparent"] != pid
    for res in (real, inproc):
        for key in ("pid", "ppid", "grandparent"):
            res.pop(key)
    assert inproc == real
    assert sorted(os.listdir("/sys/class/net")) == host_links  # the child's /sys mount never reached us


def test_failures_match_the_real_module_and_a_dead_child_is_reported(veth_pair, where_collection):
    ns = veth_pair[0]
    tasks = [
        {"name": "raise", "lfabtest.host.where": {"mode": "raise"}, "ignore_errors": True},
        {"name": "probe", "ignore_errors": True, "liqo.fabric.tunnel_probe": {
            "interface": "nosuch0", "peer_public_key": "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=",
            "address": "10.0.0.1", "mtu": 1400, "wait": 0.1}},
        {"name": "bad arg", "ignore_errors": True, "liqo.fabric.tunnel_probe": {
            "interface": "nosuch0", "peer_public_key": "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=",
            "address": "10.0.0.1", "mtu": "big"}},
    ]
    rc, results, markers, dummy, text = play(ns, [{"block": tasks, "vars": REAL}, {"block": tasks},
                                                  {"name": "die", "lfabtest.host.where": {"mode": "die"},
                                                   "ignore_errors": True}], where_collection)
    assert rc == 0, text[-3000:]
    assert markers == ["no"] * 3 + ["yes"] * 4
    real, inproc, died = results[:3], results[3:6], results[6]
    assert inproc[0]["failed"] and "where: raised inside main()" in inproc[0]["msg"]
    assert inproc[1]["reason"] == "NoInterface" and not inproc[1].get("failed")
    assert inproc[2]["failed"] and "mtu" in inproc[2]["msg"]
    for a, b in zip(real, inproc):
        assert b == a
    assert died["failed"] and died["msg"] == ("lfabtest.host.where: the child process ended without a result "
                                              "(killed by signal 9)")


def test_a_daemon_stays_in_the_namespace_and_a_timeout_kills_the_child(veth_pair, where_collection, tmp_path):
    ns = veth_pair[0]
    pidfile = str(tmp_path / "hang.pid")
    t0 = time.monotonic()
    rc, (daemon, hung), markers, dummy, text = play(ns, [
        {"name": "daemon", "lfabtest.host.where": {"mode": "daemon"}},
        {"name": "hang", "lfabtest.host.where": {"mode": "hang", "path": pidfile}, "timeout": 5,
         "ignore_errors": True},
    ], where_collection)
    elapsed = time.monotonic() - t0
    assert rc == 0, text[-3000:]
    assert markers == ["yes", "yes"]
    try:
        assert os.stat(f"/proc/{daemon['daemon']}/ns/net").st_ino == os.stat(f"/run/netns/{ns}").st_ino
    finally:
        os.kill(daemon["daemon"], 9)  # ours, by PID
    assert hung["failed"] and "timed out" in hung["msg"].lower()
    with open(pidfile, encoding="utf-8") as f:
        child = int(f.read())
    assert not os.path.exists(f"/proc/{child}"), "the timed-out child is still running"
    assert elapsed < 45  # the daemon did not hold the play (a 30 s sleep) nor did the hang (60 s)


def test_local_connection_forks_without_a_namespace_and_a_missing_namespace_is_unreachable(where_collection):
    rc, (res,), markers, dummy, text = play("localhost", [{"lfabtest.host.where": {}}], where_collection,
                                            connection="local")
    assert rc == 0 and markers == ["yes"], text[-3000:]
    assert "ran in a child of the worker process (no AnsiballZ)" in text
    assert res["netns"] == os.stat("/proc/self/ns/net").st_ino
    for flag in (False, True):
        tasks = [{"lfabtest.host.where": {}, "vars": {"liqo_fabric_in_process": flag}}]
        rc, dummy, dummy2, dummy3, text = play("lfab-no-such-netns", tasks, where_collection)
        assert rc == 4, text[-3000:]  # unreachable
        assert "network namespace 'lfab-no-such-netns' does not exist" in text
