"""plugins/plugin_utils/netns_fork.py without namespaces (those are in tests/integration/test_in_process_host.py):
the value comes back, fd-level output is captured, errors and a killed child are reported, and nothing the
function does reaches the caller's process."""
import os
import signal

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils.netns_fork import ForkError, enter_netns, run_forked


def test_value_and_fd_output_come_back():
    def fn():
        os.write(1, b"to fd 1;")
        os.write(2, b"to fd 2")
        return {"answer": 42, "pid": os.getpid()}
    value, written = run_forked(fn)
    assert value["answer"] == 42 and value["pid"] != os.getpid()
    assert written == "to fd 1;to fd 2"


def test_the_child_changes_nothing_of_the_caller():
    os.environ.pop("LFAB_FORK_TEST", None)
    cwd = os.getcwd()

    def fn():
        os.environ["LFAB_FORK_TEST"] = "1"
        os.chdir("/")
        return True
    assert run_forked(fn) == (True, "")
    assert "LFAB_FORK_TEST" not in os.environ and os.getcwd() == cwd


def test_an_exception_and_a_killed_child_are_errors():
    def boom():
        raise ValueError("bad value")
    with pytest.raises(ForkError, match="^ValueError: bad value$"):
        run_forked(boom)
    with pytest.raises(ForkError, match=r"ended without a result \(killed by signal 9\)"):
        run_forked(lambda: os.kill(os.getpid(), signal.SIGKILL))


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_invalid_namespace_names_are_refused(name):
    with pytest.raises(ForkError, match="invalid network namespace name"):
        enter_netns(name)
    with pytest.raises(ForkError, match="invalid network namespace name"):
        run_forked(lambda: 1, netns=name or "/")
