"""plugins/plugin_utils/speed/netns_fork.py without namespaces (those are in tests/integration/test_in_process_host.py):
the value comes back, fd-level output is captured, errors and a killed child are reported, and nothing the
function does reaches the caller's process."""
import os
import signal
import time

import pytest

from ansible_collections.liqo.fabric.plugins.plugin_utils.speed.netns_fork import ForkError, enter_netns, run_forked, run_forked_many


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


def test_many_jobs_at_most_parallel_children_each_result_or_error_by_key(tmp_path):
    """run_forked_many: every job's value (or its ForkError) under its key, output apart, and never more than
    `parallel` children alive at once (each child holds a lock file while it runs and counts the others')."""
    def job(i):
        def fn():
            mine = tmp_path / ("running-%d" % i)
            mine.write_text("")
            alive = len(list(tmp_path.glob("running-*")))
            os.write(1, b"out %d" % i)
            time.sleep(0.05)
            mine.unlink()
            if i == 3:
                raise ValueError("job 3")
            if i == 5:
                os.kill(os.getpid(), signal.SIGKILL)
            return {"i": i, "alive": alive, "pid": os.getpid()}
        return fn, None
    done = run_forked_many({"j%d" % i: job(i) for i in range(8)}, parallel=3)
    assert sorted(done) == ["j%d" % i for i in range(8)]
    assert isinstance(done["j3"], ForkError) and str(done["j3"]) == "ValueError: job 3"
    assert isinstance(done["j5"], ForkError) and "killed by signal 9" in str(done["j5"])
    values = {k: v for k, v in done.items() if not isinstance(v, ForkError)}
    assert all(v[0]["i"] == int(k[1:]) and v[1] == "out %s" % k[1:] for k, v in values.items())
    assert max(v[0]["alive"] for v in values.values()) <= 3
    assert len({v[0]["pid"] for v in values.values()} | {os.getpid()}) == len(values) + 1
    assert run_forked_many({}, parallel=2) == {}


def test_many_jobs_one_at_a_time_with_parallel_1():
    def fn():
        start = time.monotonic()
        time.sleep(0.02)
        return [start, time.monotonic()]
    done = run_forked_many({str(i): (fn, None) for i in range(4)}, parallel=1)
    spans = sorted(done[str(i)][0] for i in range(4))
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:]))  # no two children overlapped
