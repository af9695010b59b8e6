# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs one playbook with ansible_runner, in-process, and boils its events down to a RunResult.

- one private_data_dir per worker slot (0700, under the runtime dir), artifacts rotated;
- the event handler keeps what the controller needs (first failed task: name, msg and result; changed
  count; `set_stats` data) and returns False so no event is written to disk; no stdout file either;
- extra vars carry no secrets (paths and names only);
- warm runner (default; a speed path, plugin_utils/speed/warm.py): ansible_runner spawns its client instead of
  ansible-playbook, and a zygote that imported Ansible once forks the run (same pty, events and environment; cold
  fallback);
- the client starts on its pty without a fork of this process (controller/run_pty.py).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shlex
import shutil
import sys
import threading
import time
from typing import Callable, Optional

import ansible_runner
from ansible_runner.config.runner import RunnerConfig

from controller import run_pty
from controller.library import speed, speed_warm as warm_mod, speed_warm_client

WARM_MARKER = speed_warm_client.MARKER

log = logging.getLogger("controller.runner")
CANCEL_POLL = 0.25   # seconds between looks at a run's cancel callback
FAILED_EVENTS = ("runner_on_failed", "runner_on_unreachable", "runner_item_on_failed")


@dataclasses.dataclass
class RunResult:
    ok: bool
    status: str                      # successful | failed | timeout | canceled | error
    rc: Optional[int]
    duration: float
    spawn_seconds: Optional[float]   # run() called -> first event from the playbook
    changed: int = 0
    failed_task: str = ""
    failed_host: str = ""
    failed_msg: str = ""
    failed_result: dict = dataclasses.field(default_factory=dict)
    stats: dict = dataclasses.field(default_factory=dict)   # set_stats data (aggregate)
    warm: bool = False               # forked from the warm runner's zygote (False: a cold ansible-playbook)
    reason: str = ""                 # CamelCase reason of a failure the runner itself found (NoHostsMatched)
    slowest: tuple = ()              # (seconds, task name) of the run's longest task: where a slow run went
    timeline: tuple = ()             # ((seconds since the start, task name), ...) at each task's start, then "stats"

    @property
    def message(self) -> str:
        if self.ok:
            return f"applied ({self.changed} changed task(s))"
        if self.failed_task:
            where = f" on {self.failed_host}" if self.failed_host and self.failed_host != "localhost" else ""
            return f"task '{self.failed_task}'{where} failed: {self.failed_msg}".strip()
        if self.failed_msg:
            return self.failed_msg
        return f"playbook {self.status} (rc={self.rc})"


def collection_env(collection_root: str) -> dict:
    """ANSIBLE_COLLECTIONS_PATH for a run from the repository (build/collections links the tree)."""
    env = {}
    built = os.path.join(collection_root, "build", "collections")
    if os.path.isdir(os.path.join(built, "ansible_collections", "liqo", "fabric")):
        paths = [built] + [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(":") if p]
        env["ANSIBLE_COLLECTIONS_PATH"] = ":".join(dict.fromkeys(paths))
    else:
        # installed: <root> is .../ansible_collections/liqo/fabric
        parent = os.path.dirname(os.path.dirname(os.path.dirname(collection_root)))
        if os.path.basename(os.path.dirname(os.path.dirname(collection_root))) == "ansible_collections":
            env["ANSIBLE_COLLECTIONS_PATH"] = parent
    return env


class PlaybookRunner:
    def __init__(self, runtime_dir: str, collection_root: str, inventory: Optional[str] = None,
                 rotate: int = 3, extra_env: Optional[dict] = None, warm: bool = True, warm_idle_exit: float = 0.0,
                 zygote_at_start: bool = True):
        run_pty.install()
        self.runtime_dir = runtime_dir
        self.inventory = os.path.abspath(inventory) if inventory else None
        self.rotate = rotate
        os.makedirs(runtime_dir, mode=0o700, exist_ok=True)
        os.chmod(runtime_dir, 0o700)
        self.env = {
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_PIPELINING": "1", "ANSIBLE_HOST_KEY_CHECKING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
            "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_DEPRECATION_WARNINGS": "0",
            "ANSIBLE_LOCAL_TEMP": os.path.join(runtime_dir, "tmp"),
            # a module's AnsiballZ payload dir too: a run killed (timeout, cancel) leaves it behind, here
            # rather than in the host's /tmp, and close() removes it
            "TMPDIR": os.path.join(runtime_dir, "tmp"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        os.makedirs(self.env["ANSIBLE_LOCAL_TEMP"], mode=0o700, exist_ok=True)
        self.env.update(collection_env(collection_root))
        self.env.update(extra_env or {})
        venv_bin = os.path.dirname(sys.executable)
        self.binary = os.path.join(venv_bin, "ansible-playbook")
        if not os.path.exists(self.binary):
            self.binary = shutil.which("ansible-playbook") or "ansible-playbook"
        self.env["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")
        self._slots = threading.local()
        self._slot_lock = threading.Lock()
        self._next_slot = 0
        self._runs = 0
        # one cwd for every run (ansible_runner's cwd is project_dir when it exists): the zygote's config
        # (ini file lookup, relative paths) was evaluated there
        self.project_dir = os.path.join(runtime_dir, "project")
        os.makedirs(self.project_dir, mode=0o700, exist_ok=True)
        self.zygote: Optional[warm_mod.Zygote] = None
        self.warm_idle_exit = warm_idle_exit
        self._cold_logged: set = set()
        verdict = speed.enabled("warm_runner", warm)
        if verdict.on:
            self._start_zygote(zygote_at_start)
        elif warm:  # off by LIQO_FABRIC_SPEED_PATHS=off (the user's choice: info) or an untested ansible-core (warning)
            (log.warning if verdict.warn else log.info)(
                "warm runner off", extra={"fields": {"reason": speed.warning(verdict.reason)}})

    def _common_kwargs(self) -> dict:
        """The ansible_runner arguments that shape a run's environment (shared by runs and the zygote probe)."""
        # suppress_env_files: otherwise the first run of a slot writes env/envvars and env/extravars, and every
        # later run of the slot merges those stale files in (envvars from the file win; old extra vars leak)
        return dict(envvars=self.env, project_dir=self.project_dir, quiet=True, suppress_output_file=True,
                    suppress_env_files=True)

    def _start_zygote(self, now: bool = True) -> None:
        """The zygote gets the environment ansible_runner prepares for a run in one of our slots. Not `now`: made
        and not started; the first run (or prestart) starts it."""
        try:
            slot = os.path.join(self.runtime_dir, "slot0")
            os.makedirs(slot, mode=0o700, exist_ok=True)
            rc = RunnerConfig(private_data_dir=slot, playbook="probe.yml", ident="warm-probe", **self._common_kwargs())
            rc.prepare()
            shutil.rmtree(rc.artifact_dir, ignore_errors=True)
            self.zygote = warm_mod.Zygote(self.runtime_dir, rc.env, rc.cwd, self.binary, idle_exit=self.warm_idle_exit)
            if now:
                self.zygote.start()
        except Exception as exc:  # pylint: disable=broad-except
            log.warning("warm runner disabled: zygote did not start", extra={"fields": {"error": str(exc)}})
            self.zygote = None

    def prestart(self) -> None:
        """Starts the zygote now if it is not running (made without starting it, or exited idle): a run soon to come
        finds it ready or starting."""
        if self.zygote is not None and not self.zygote.closed:
            self.zygote.ensure()

    def close(self) -> None:
        """Stops the zygote (its runs are killed), removes its socket and what killed modules left in the
        runner's temp dir."""
        if self.zygote is not None:
            self.zygote.close()
        tmp = self.env["ANSIBLE_LOCAL_TEMP"]
        for entry in os.listdir(tmp) if os.path.isdir(tmp) else []:
            if entry.startswith("ansible_") and "_payload_" in entry:
                shutil.rmtree(os.path.join(tmp, entry), ignore_errors=True)

    def _slot_dir(self) -> str:
        slot = getattr(self._slots, "dir", None)
        if slot is None:
            with self._slot_lock:
                n = self._next_slot
                self._next_slot += 1
            slot = os.path.join(self.runtime_dir, f"slot{n}")
            os.makedirs(os.path.join(slot, "env"), mode=0o700, exist_ok=True)
            os.chmod(slot, 0o700)
            # ansible_runner looks at the cancel callback (and the timeout) each time its wait on the child times
            # out: 5 s by default, which a cancelled standby run (a failover) would wait out. Only this file sets it.
            with open(os.path.join(slot, "env", "settings"), "w", encoding="utf-8") as f:
                f.write(f"pexpect_timeout: {CANCEL_POLL}\n")
            self._slots.dir = slot
        return slot

    def run(self, playbook: str, extravars: dict, timeout: float, ident: str,
            cancel: Optional[Callable[[], bool]] = None, limit: Optional[str] = None) -> RunResult:
        events = _RunEvents(time.monotonic())
        with self._slot_lock:
            self._runs += 1
            # unique: ansible_runner's rotation can delete a reused ident's own (older) directory
            ident = f"{ident}-{os.getpid()}-{self._runs}"
        playbook = os.path.abspath(playbook)
        slot = self._slot_dir()
        vars_file = _write_extravars(slot, ident, extravars)
        kwargs = self._launch_kwargs(playbook, vars_file)
        warm = False
        try:
            r = ansible_runner.run(
                private_data_dir=slot, playbook=playbook, inventory=self.inventory,
                ident=ident, rotate_artifacts=self.rotate, event_handler=events.on_event, timeout=int(max(1, timeout)),
                cancel_callback=cancel or (lambda: False), limit=limit, **kwargs)
            status, rc = r.status, r.rc
            if "binary" in kwargs:
                warm = self._warm_outcome(r.config.artifact_dir)
        except Exception as exc:  # pylint: disable=broad-except
            log.exception("ansible_runner failed", extra={"fields": {"playbook": playbook, "error": str(exc)}})
            status, rc = "error", None
            events.failed = events.failed or ("", "", f"ansible_runner error: {exc}", {})
        finally:
            try:
                os.unlink(vars_file)
            except OSError:
                pass
        return events.result(status, rc, timeout, warm, self.inventory)

    def _launch_kwargs(self, playbook: str, vars_file: str) -> dict:
        """ansible_runner's arguments that say what to start: the warm runner's launcher when its zygote lives, else
        ansible-playbook."""
        kwargs = self._common_kwargs()
        cmdline = f"-e @{shlex.quote(vars_file)}"
        zygote = self.zygote
        if zygote is not None and not zygote.closed:
            zygote.ensure()
            zygote.wait_starting()
            # binary= is run as is (ansible_runner's RAW mode): the playbook goes on the command line
            kwargs.update(binary=zygote.launcher, cmdline=f"{shlex.quote(playbook)} {cmdline}")
        else:
            kwargs.update(cmdline=cmdline)
        return kwargs

    def _warm_outcome(self, artifact_dir: str) -> bool:
        try:
            with open(os.path.join(artifact_dir, WARM_MARKER), encoding="utf-8") as f:
                marker = json.load(f)
        except (OSError, ValueError):
            return False
        if marker.get("warm"):
            return True
        diff = tuple(marker.get("diff") or ())
        if diff and diff not in self._cold_logged:   # once per set of differing names
            self._cold_logged.add(diff)
            log.warning("warm runner: environment differs from the zygote's, run cold",
                        extra={"fields": {"differs": list(diff), "reason": marker.get("reason", "")}})
        return False


def _write_extravars(slot: str, ident: str, extravars: dict) -> str:
    """The extra vars go in a file (-e @FILE, 0600 in the 0700 slot): a group key's fabric_objects (a cluster's
    Nodes and Pods: thousands of refs) exceeds what one command-line argument may hold (128 KiB)."""
    path = os.path.join(slot, f"extravars-{ident}.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(extravars or {}, f, separators=(",", ":"))
    return path


@dataclasses.dataclass
class _RunEvents:
    """What the controller keeps of one run's events: ansible_runner calls on_event for each, in order."""
    t0: float                        # time.monotonic() when the run was asked for
    first: Optional[float] = None    # time.monotonic() of the first event
    changed: int = 0
    failed: Optional[tuple] = None   # (task, host, msg, result) of the first failure not ignored
    stats: dict = dataclasses.field(default_factory=dict)       # set_stats data
    no_hosts: list = dataclasses.field(default_factory=list)    # (play, pattern) of each play that matched no host
    slowest: tuple = ()
    timeline: list = dataclasses.field(default_factory=list)

    def on_event(self, ev: dict) -> bool:
        if self.first is None:
            self.first = time.monotonic()
        name = ev.get("event")
        data = ev.get("event_data") or {}
        if name in ("playbook_on_task_start", "playbook_on_stats") and len(self.timeline) < 40:
            self.timeline.append((round(time.monotonic() - self.t0, 3), data.get("task") or name.rsplit("_", 1)[-1]))
        if isinstance(data.get("duration"), (int, float)) and name.startswith("runner_on_") and (
                not self.slowest or data["duration"] > self.slowest[0]):
            self.slowest = (round(data["duration"], 3), data.get("task") or "")
        if name == "runner_on_ok" and (data.get("res") or {}).get("changed"):
            self.changed += 1
        elif name in FAILED_EVENTS and not data.get("ignore_errors") and self.failed is None:
            res = data.get("res") or {}
            self.failed = (data.get("task") or "", data.get("host") or "", _failure_msg(res), res)
        elif name == "playbook_on_no_hosts_matched":
            self.no_hosts.append((data.get("play") or "", data.get("play_pattern") or ""))
        elif name == "playbook_on_stats":
            self.stats = data.get("artifact_data") or {}
        return False  # nothing written to the artifact dir

    def result(self, status: str, rc: Optional[int], timeout: float, warm: bool, inventory: Optional[str]) -> RunResult:
        res = RunResult(ok=status == "successful" and rc == 0, status=status, rc=rc, duration=time.monotonic() - self.t0,
                        spawn_seconds=(self.first - self.t0) if self.first is not None else None,
                        changed=self.changed, stats=self.stats, warm=warm, slowest=self.slowest,
                        timeline=tuple(self.timeline))
        if not res.ok:
            if self.failed:
                res.failed_task, res.failed_host, res.failed_msg, res.failed_result = self.failed
            elif status == "timeout":
                res.failed_msg = f"timed out after {int(timeout)} s"
        elif self.no_hosts:
            # a play that matched no hosts did nothing: with no inventory (or a wrong group) the dataplane
            # would silently be missing, so the run is a failure, never "applied"
            res.ok, res.status, res.reason = False, "failed", "NoHostsMatched"
            res.failed_msg = "; ".join(f"play '{play}' (hosts: {pattern}) matched no hosts" for play, pattern in self.no_hosts) + (
                f" in inventory {inventory}" if inventory else " (no inventory: only localhost exists)")
        return res


def _failure_msg(res: dict) -> str:
    msg = res.get("msg") or res.get("message") or res.get("reason") or ""
    if not msg and res.get("stderr"):
        msg = str(res["stderr"]).strip().splitlines()[-1:]
        msg = msg[0] if msg else ""
    if not isinstance(msg, str):
        msg = str(msg)
    return msg[:2000]
