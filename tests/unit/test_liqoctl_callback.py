"""The liqoctl stdout callback: the progress lines of a task, and the one line of its failure."""
from types import SimpleNamespace

from ansible_collections.liqo.fabric.plugins.callback.liqoctl import CallbackModule


class Task(SimpleNamespace):
    def get_name(self):
        return self.name


class Display:
    def __init__(self):
        self.lines = []
        self.verbosity = 0

    def display(self, msg, stderr=False):
        self.lines.append((msg, stderr))


def callback():
    cb = CallbackModule()
    cb._display = Display()
    return cb


def test_a_name_of_several_info_parts_prints_a_line_per_part():
    task = Task(name="INFO (local) Connection is established | INFO (remote) Connection is established",
                action="ansible.builtin.assert", _uuid="t1")
    assert CallbackModule._progress(task) == (
        "INFO   (local) Connection is established\nINFO   (remote) Connection is established")
    assert CallbackModule._progress(Task(name="Plan the overlay", action="x", _uuid="t2")) is None


def test_the_failure_of_a_multi_part_task_names_each_part_once_without_prefixes():
    cb = callback()
    task = Task(name="INFO (local) Connection is established | INFO (remote) Connection is established",
                action="ansible.builtin.assert", _uuid="t1")
    result = SimpleNamespace(_task=task, _result={"msg": "(remote) Connection is Error: NoHandshake"},
                             _host=SimpleNamespace(get_name=lambda: "localhost"))
    cb.v2_runner_on_failed(result)
    assert cb._display.lines == [(
        "ERROR  (local) Connection is established / (remote) Connection is established [localhost]: "
        "(remote) Connection is Error: NoHandshake", True)]


def test_a_failure_is_not_printed_when_ignored():
    cb = callback()
    task = Task(name="INFO (local) Gateway client correctly set up", action="x", _uuid="t3")
    cb.v2_runner_on_failed(SimpleNamespace(_task=task, _result={"msg": "m"},
                                           _host=SimpleNamespace(get_name=lambda: "h")), ignore_errors=True)
    assert not cb._display.lines
