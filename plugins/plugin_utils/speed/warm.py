# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm runner: a zygote that imported `ansible.cli.playbook` once and forks one child per playbook run.

`ansible-playbook` spends most of its start importing Ansible. The zygote is
started by PlaybookRunner with exactly the environment and cwd ansible_runner gives its runs, imports
Ansible, stays single-threaded and listens on a Unix socket in the runner's 0700 runtime dir. ansible_runner
spawns the client (`warm_client.py`, written into an executable launcher) as its `binary`; the client sends
argv, env, cwd and its stdin/stdout/stderr (SCM_RIGHTS), and the zygote forks a child that setsid()s, takes
those fds, chdirs, replaces os.environ and runs ansible's playbook CLI; the zygote reaps it and sends the wait
status back, and the client exits with it. The pty and the event stream ansible_runner parses are unchanged.

Ansible's config (`ansible.constants`) was evaluated in the zygote: a child is forked only when the
config-relevant environment (see `differences`) and the ini file ansible would find equal the zygote's, except
PER_RUN_ENV whose constants the child re-sets from its own environment. Otherwise the client execs the real
ansible-playbook (cold) and the runner logs the differing names once.

No orphans: the client forwards signals to the child's process group; when the client dies (even SIGKILL) or
the zygote dies, the child (a watcher thread) and the zygote stop every descendant of the child (SIGSTOP of the
whole tree, then SIGKILL: Ansible's workers setsid() themselves, so a process-group kill is not enough). The
zygote exits when the controller closes (or loses) its end of a lifeline pipe, killing its children and
removing its socket.

This file is also the zygote's program (`python warm.py --socket ... --lifeline-fd N --binary ...`): it
imports nothing of the collection or the controller, and no file beside it may share a name with a module of the
standard library (its directory is on sys.path until zygote_main removes it).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref
from typing import Dict, Iterable, List, Optional, Sequence

# Per-run values ansible_runner sets (the run's artifact dir); the child re-sets the constants they feed.
PER_RUN_ENV = ("ANSIBLE_CACHE_PLUGIN_CONNECTION", "AWX_ISOLATED_DATA_DIR")
# Config types whose constant is per process (ansible-local-<pid> temp dir): always re-evaluated in the child.
PER_PROCESS_TYPES = ("tmppath", "temppath", "tmp")
# Beside the names ansible's base config definitions read, these shape the interpreter or config paths.
ALWAYS_RELEVANT = ("ANSIBLE_CONFIG", "HOME", "LANG", "LANGUAGE", "TZ")
RELEVANT_PREFIXES = ("ANSIBLE_", "_ANSIBLE_", "PYTHON", "LC_")
_VAR_REF = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
# Imported in the zygote after ansible.cli.playbook: plain modules every run imports (no plugins: their
# module-level code may read the run's environment, e.g. ansible_runner's awx_display).
PREIMPORT = (
    "ansible.executor.process.worker", "ansible.executor.task_executor", "ansible.playbook.handler",
    "ansible.playbook.handler_task_include", "ansible.playbook.included_file", "ansible.playbook.role.include",
    "ansible.playbook.role_include", "ansible.playbook.task_include", "ansible.module_utils.connection",
    "ansible.utils.hashing", "ansible.utils.shlex", "multiprocessing.popen_fork", "multiprocessing.synchronize",
    "pty", "pprint", "tomllib", "xml.dom.minidom", "xml.etree.ElementTree",
    # liqo.fabric's host modules run in a fork of the worker (plugin_utils/speed/): imported once here, not in each run
    "pyroute2", "pyroute2.netns",
)
MAX_REQUEST = 16 << 20
SOCKET_NAME = "zygote.sock"
LAUNCHER_NAME = "ansible-playbook"


# ====================================================================== pure parts
def var_refs(text: str) -> set:
    """Names a value references as $NAME or ${NAME} (ansible expands them in path-type settings)."""
    return {a or b for a, b in _VAR_REF.findall(text or "")}


def relevant_names(envs: Sequence[Dict[str, str]], config_env_names: Iterable[str] = (),
                   texts: Iterable[str] = ()) -> set:
    """Every environment name that can change what `ansible.constants` (or the interpreter) evaluates to:
    the base config definitions' env names, ANSIBLE_*/PYTHON*/LC_* and a few others present in any of
    `envs`, and, transitively, names referenced by those values or by `texts` (the ini config file)."""
    names = set(config_env_names) | set(ALWAYS_RELEVANT)
    for env in envs:
        names |= {k for k in env if k.startswith(RELEVANT_PREFIXES)}
    for text in texts:
        names |= var_refs(text)
    todo = list(names)
    while todo:
        name = todo.pop()
        for env in envs:
            for ref in var_refs(env.get(name, "")):
                if ref not in names:
                    names.add(ref)
                    todo.append(ref)
    return names


def env_differences(base: Dict[str, str], run: Dict[str, str], config_env_names: Iterable[str] = (),
                    per_run: Iterable[str] = PER_RUN_ENV, texts: Iterable[str] = ()) -> List[str]:
    """Sorted names whose values differ between the zygote's environment and a run's, per-run names excepted."""
    names = relevant_names((base, run), config_env_names, texts) - set(per_run)
    return sorted(n for n in names if base.get(n) != run.get(n))


def differences(base_env: Dict[str, str], base_cwd: str, run_env: Dict[str, str], run_cwd: str,
                config_env_names: Iterable[str] = (), per_run: Iterable[str] = PER_RUN_ENV,
                texts: Iterable[str] = ()) -> List[str]:
    """What keeps a run from being forked warm: differing env names, and `cwd` (relative paths in the config
    and the ini file lookup depend on it)."""
    out = env_differences(base_env, run_env, config_env_names, per_run, texts)
    if os.path.normpath(base_cwd) != os.path.normpath(run_cwd):
        out.append("cwd")
    return out


def resettable_settings(base_defs: Dict[str, dict], per_run: Iterable[str] = PER_RUN_ENV) -> List[str]:
    """Config settings the child re-evaluates: those fed by a per-run env name, and per-process temp dirs."""
    per_run = set(per_run)
    out = []
    for name, d in base_defs.items():
        envs = {e.get("name") for e in (d.get("env") or []) if isinstance(e, dict)}
        if envs & per_run or str(d.get("type") or "").lower() in PER_PROCESS_TYPES:
            out.append(name)
    return sorted(out)


def config_file_identity(path: Optional[str]):
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return (path, None)
    return (os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)


def descendants(root: int, proc: str = "/proc") -> List[int]:
    """PIDs of every descendant of `root` (not root itself), from /proc/<pid>/stat."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "stat"), "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(root: int, include_root: bool = True) -> None:
    """SIGSTOP the whole tree under `root` until no new process appears (stopped processes cannot fork),
    then SIGKILL all of it: Ansible's workers call setsid(), so killing a process group misses them."""
    stopped: set = set()
    for dummy in range(50):
        found = set(descendants(root)) - stopped
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGSTOP)
            except OSError:
                pass
        stopped |= found
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if include_root:
        for fn in (os.killpg, os.kill):
            try:
                fn(root, signal.SIGKILL)
            except OSError:
                pass


def _log(level: str, msg: str, **fields) -> None:
    """One JSON line on stderr (the controller's), like controller.logs."""
    out = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()), "level": level,
           "logger": "controller.warm.zygote", "msg": msg}
    out.update(fields)
    try:
        sys.stderr.write(json.dumps(out, default=str) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class ZipShare:
    """Module payloads (AnsiballZ zips) built by earlier runs, reused by the next ones.

    Ansible caches a module's payload per process (DEFAULT_LOCAL_TMP/ansiballz_cache, keyed by the module's
    name only), so every warm child would build gateway_dataplane's again (AST walks and zipping of every
    module_utils it imports).
    A child links this collection's entries from a store in the zygote's runtime dir before the run and adds
    those it built at exit. The store is keyed by a fingerprint (path, size, mtime) of the collection's modules
    and module_utils, so an edited file never meets an old payload; other collections' entries and modules
    next to a playbook (ansible.legacy.*) are never shared (Ansible and pip-installed collections change only
    with a restart of the controller, which restarts the zygote)."""

    PREFIX = "ansible_collections.liqo.fabric."

    def __init__(self, root: str, collection_dir: Optional[str]):
        self.root = root
        self.sources = [os.path.join(collection_dir, "plugins", d) for d in ("modules", "module_utils")] \
            if collection_dir else []

    def fingerprint(self) -> str:
        import hashlib  # pylint: disable=import-outside-toplevel
        h = hashlib.sha256()
        for top in self.sources:
            for dirpath, dirnames, files in os.walk(top):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(f for f in files if f.endswith(".py")):
                    st = os.stat(os.path.join(dirpath, name))
                    h.update(("%s/%s %d %d\n" % (dirpath, name, st.st_size, st.st_mtime_ns)).encode())
        return h.hexdigest()[:16]

    def attach(self, local_tmp: str) -> None:
        """Links the store's payloads into this process's cache; at exit, adds the ones it built."""
        if not self.sources:
            return
        try:
            fp = self.fingerprint()
            store = os.path.join(self.root, fp)
            if not os.path.isdir(store):
                os.makedirs(store, mode=0o700, exist_ok=True)
                import shutil  # pylint: disable=import-outside-toplevel
                for old in os.listdir(self.root):   # payloads of edited sources: never used again
                    if old != fp:
                        shutil.rmtree(os.path.join(self.root, old), ignore_errors=True)
            cache = os.path.join(local_tmp, "ansiballz_cache")
            os.makedirs(cache, mode=0o700, exist_ok=True)
            for name in os.listdir(store):
                os.link(os.path.join(store, name), os.path.join(cache, name))
        except OSError:
            return
        import atexit  # pylint: disable=import-outside-toplevel
        atexit.register(self._harvest, cache, store)   # after ansible's cleanup_tmp_file: runs before it

    def _harvest(self, cache: str, store: str) -> None:
        try:
            names = os.listdir(cache)
        except OSError:
            return
        for name in names:
            if not name.startswith(self.PREFIX) or name.endswith(".lock") or os.path.exists(os.path.join(store, name)):
                continue
            tmp = os.path.join(store, ".%s.%d" % (name, os.getpid()))
            try:
                os.link(os.path.join(cache, name), tmp)
                os.rename(tmp, os.path.join(store, name))   # whole entries only
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def _memoize_collection_meta() -> None:
    """Every run parses ansible.builtin's routing (ansible_builtin_runtime.yml, a large YAML file) when the
    collection loader starts. Ansible lets tools replace the parser (`_meta_yml_to_dict`, whose `content_id`
    argument is there to allow caching): the zygote parses it once and its children find it by content."""
    import hashlib  # pylint: disable=import-outside-toplevel
    import ansible  # pylint: disable=import-outside-toplevel
    from ansible.utils.collection_loader import _collection_finder  # pylint: disable=import-outside-toplevel
    parse = _collection_finder._meta_yml_to_dict  # pylint: disable=protected-access
    if parse is None:
        return
    memo: Dict[tuple, object] = {}

    def memoized(data, content_id):
        raw = data if isinstance(data, bytes) else str(data).encode()
        key = (repr(content_id), hashlib.sha256(raw).digest())
        if key not in memo:
            memo[key] = parse(data, content_id)
        return memo[key]   # one collection is loaded once per run; a child's changes stay in that child

    _collection_finder._meta_yml_to_dict = memoized  # pylint: disable=protected-access
    try:
        with open(os.path.join(os.path.dirname(ansible.__file__), "config", "ansible_builtin_runtime.yml"), "rb") as f:
            memoized(f.read(), ("ansible.builtin", "runtime.yml"))
    except (OSError, ValueError):
        pass


class InventoryMemo:
    """Each run would parse the inventory file again, a large part of a run's start with hundreds of hosts
    (Ansible's YAML constructor is Python; the `auto` plugin reads the file once more to look for `plugin:`). The
    zygote parses an inventory file named on a run's command line before it forks (again only when the file's
    mtime, size or inode changed), and a child's DataLoader.load_from_file returns its own (forked) copy of that parse
    for the same file and arguments, once; Ansible would deep-copy it, most of the cost with 2.19's tagged data.
    Vaulted files are left to Ansible."""

    SUFFIXES = (".yml", ".yaml", ".json")

    def __init__(self):
        self.memo: Dict[tuple, object] = {}

    @staticmethod
    def inventories(argv: Sequence[str]) -> List[str]:
        out = []
        for i, arg in enumerate(argv):
            if arg in ("-i", "--inventory", "--inventory-file") and i + 1 < len(argv):
                out.append(argv[i + 1])
            elif arg.startswith("--inventory="):
                out.append(arg.split("=", 1)[1])
        return out

    @staticmethod
    def identity(path: str) -> Optional[tuple]:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (path, st.st_mtime_ns, st.st_size, st.st_ino) if os.path.isfile(path) else None

    def prime(self, argv: Sequence[str], cwd: str) -> None:
        from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
        for path in self.inventories(argv):
            path = os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))
            ident = self.identity(path)
            if ident is None or not path.endswith(self.SUFFIXES) or any(k[0] == ident for k in self.memo):
                continue
            try:
                with open(path, "rb") as f:
                    if b"$ANSIBLE_VAULT" in f.read():
                        continue
                for k in [k for k in self.memo if k[0][0] == path]:   # an older version of the file
                    del self.memo[k]
                for trusted in (False, True):   # the auto plugin's read, the yaml plugin's
                    self.memo[(ident, trusted)] = DataLoader().load_from_file(
                        path, cache="none", unsafe=True, trusted_as_template=trusted)
            except Exception as exc:  # pylint: disable=broad-except
                _log("warning", "inventory not pre-parsed", path=path, error=str(exc))

    def install(self) -> None:
        """In the zygote, before any fork: DataLoader.load_from_file answers from the memo."""
        from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
        original = DataLoader.load_from_file
        memo = self.memo

        def load_from_file(loader, file_name, cache="all", unsafe=False, json_only=False, trusted_as_template=False):
            if memo and not json_only:
                ident = InventoryMemo.identity(loader.path_dwim(file_name))
                if ident is not None and (ident, bool(trusted_as_template)) in memo:
                    # this forked child's own copy, handed out once: no deep copy of the tagged data; a second
                    # read of the file parses it again
                    return memo.pop((ident, bool(trusted_as_template)))
            return original(loader, file_name, cache=cache, unsafe=unsafe, json_only=json_only,
                            trusted_as_template=trusted_as_template)

        DataLoader.load_from_file = load_from_file


# ====================================================================== the zygote (its own process)
class _Server:
    def __init__(self, sock_path: str, lifeline_fd: int, binary: str, idle_exit: float = 0.0):
        self.sock_path = sock_path
        self.lifeline_fd = lifeline_fd
        self.binary = binary
        self.idle_exit = idle_exit     # seconds without a run after which the zygote exits (0: never)
        self.last_busy = time.monotonic()
        self.children: Dict[int, dict] = {}   # pid -> {conn, pidfd, client_gone}
        self.listener: Optional[socket.socket] = None
        self.refuse = ""

    # ------------------------------------------------------------ warm-up
    def warm_up(self) -> None:
        import importlib  # pylint: disable=import-outside-toplevel
        import tempfile  # pylint: disable=import-outside-toplevel
        self.tempdir = tempfile.tempdir
        import ansible.cli.playbook  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        import ctypes  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        for name in PREIMPORT:
            try:
                importlib.import_module(name)
            except Exception:  # pylint: disable=broad-except
                pass
        from ansible import constants as C  # pylint: disable=import-outside-toplevel
        from ansible.config.manager import find_ini_config_file  # pylint: disable=import-outside-toplevel
        self.C = C
        self.find_ini = find_ini_config_file
        _memoize_collection_meta()
        self.inventory_memo = InventoryMemo()
        self.inventory_memo.install()
        found = [os.path.join(p, "ansible_collections", "liqo", "fabric") for p in C.COLLECTIONS_PATHS]
        self.zipshare = ZipShare(os.path.join(os.path.dirname(self.sock_path), "ansiballz"),
                                 next((os.path.realpath(d) for d in found if os.path.isdir(d)), None))
        defs = C.config._base_defs  # pylint: disable=protected-access
        self.config_env_names = sorted({e["name"] for d in defs.values() for e in (d.get("env") or [])
                                        if isinstance(e, dict) and e.get("name")})
        self.resettable = resettable_settings(defs)
        self.base_env = dict(os.environ)
        self.base_cwd = os.getcwd()
        cfg = C.config._config_file  # pylint: disable=protected-access
        self.base_cfg = config_file_identity(cfg)
        self.texts = []
        if cfg:
            try:
                with open(cfg, encoding="utf-8", errors="replace") as f:
                    self.texts.append(f.read())
            except OSError:
                pass
        self.death_r, self.death_w = os.pipe()   # the children see EOF when the zygote is gone
        if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
            self.refuse = "zygote is not single-threaded after importing ansible"
            _log("warning", "warm runner disabled: " + self.refuse)

    # ------------------------------------------------------------ decisions
    def check(self, env: Dict[str, str], cwd: str) -> List[str]:
        diff = differences(self.base_env, self.base_cwd, env, cwd, self.config_env_names, PER_RUN_ENV, self.texts)
        if not diff:
            try:
                found = self.find_ini()
            except Exception:  # pylint: disable=broad-except
                found = "?"
            if config_file_identity(found) != self.base_cfg:
                diff.append("ansible.cfg")
        return diff

    # ------------------------------------------------------------ loop
    def serve(self) -> int:
        import selectors  # pylint: disable=import-outside-toplevel
        self.sel = selectors.DefaultSelector()
        try:
            os.unlink(self.sock_path)
        except FileNotFoundError:
            pass
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            self.listener.bind(self.sock_path)
        finally:
            os.umask(old)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.sel.register(self.lifeline_fd, selectors.EVENT_READ, ("lifeline", None))
        # idle from when it can serve: a slow warm-up (seconds of imports on a loaded node) is not idleness
        self.last_busy = time.monotonic()
        try:
            while True:
                deadlines = [c["kill_at"] for c in self.children.values() if c.get("kill_at")]
                if self.idle_exit and not self.children:
                    if time.monotonic() >= self.last_busy + self.idle_exit:
                        # idle: its memory back to the node; the controller starts a new one at the next run and
                        # waits for it (a client connecting at this very moment reads EOF and runs cold)
                        _log("info", "warm runner zygote idle, exiting", idle_seconds=self.idle_exit)
                        return 0
                    deadlines.append(self.last_busy + self.idle_exit)
                timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                for key, dummy in self.sel.select(timeout):
                    what, pid = key.data
                    if what == "lifeline":
                        if not os.read(self.lifeline_fd, 64):
                            return 0
                    elif what == "accept":
                        self.last_busy = time.monotonic()
                        self._accept()
                    elif what == "conn":
                        self._conn_event(pid)
                    elif what == "pidfd":
                        self._reap(pid)
                        self.last_busy = time.monotonic()
                now = time.monotonic()
                for pid, ch in list(self.children.items()):
                    if ch.get("kill_at") and now >= ch["kill_at"]:
                        ch["kill_at"] = None
                        kill_tree(pid)   # the child's watcher did not manage: kill its tree from here
        finally:
            self._shutdown()

    def _accept(self) -> None:
        try:
            conn, dummy = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        fds: List[int] = []
        try:
            conn.setblocking(True)
            conn.settimeout(10)
            pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid != os.getuid():
                raise PermissionError(f"peer uid {uid}")
            req = self._read_request(conn, fds)
            if len(fds) != 3:
                raise ValueError(f"expected 3 fds, got {len(fds)}")
            diff = [] if self.refuse else self.check(req["env"], req["cwd"])
            if self.refuse or diff:
                self._reply(conn, {"mode": "cold", "reason": self.refuse or "environment differs", "diff": diff})
                conn.close()
                return
            child = self._fork(conn, fds, req)
            conn.settimeout(None)
            self._reply(conn, {"mode": "warm", "pid": child})
        except Exception as exc:  # pylint: disable=broad-except
            _log("warning", "warm runner request failed", error=str(exc))
            try:
                self._reply(conn, {"mode": "cold", "reason": f"zygote error: {exc}"})
            except OSError:
                pass
            conn.close()
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass

    @staticmethod
    def _read_request(conn: socket.socket, fds: List[int]) -> dict:
        buf = b""
        need = None
        while need is None or len(buf) < need:
            data, got, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
            fds.extend(got)
            if not data:
                raise ConnectionError("client closed before its request was complete")
            buf += data
            if need is None and len(buf) >= 4:
                need = 4 + struct.unpack("!I", buf[:4])[0]
                if need > MAX_REQUEST:
                    raise ValueError("request too large")
        req = json.loads(buf[4:need])
        if not isinstance(req.get("argv"), list) or not isinstance(req.get("env"), dict) or not isinstance(req.get("cwd"), str):
            raise ValueError("malformed request")
        return req

    @staticmethod
    def _reply(conn: socket.socket, msg: dict) -> None:
        conn.sendall(json.dumps(msg).encode() + b"\n")

    def _fork(self, conn: socket.socket, fds: List[int], req: dict) -> int:
        import selectors  # pylint: disable=import-outside-toplevel
        self.inventory_memo.prime([str(a) for a in req.get("argv") or []], req.get("cwd") or "/")
        pid = os.fork()
        if pid == 0:  # the child never returns
            code = 1
            try:
                code = self._child(conn, fds, req)
            except SystemExit as exc:
                code = _exit_code(exc)
            except BaseException:  # pylint: disable=broad-except
                try:
                    import traceback  # pylint: disable=import-outside-toplevel
                    traceback.print_exc()
                except BaseException:  # pylint: disable=broad-except
                    pass
            finally:
                _run_atexit()   # as at a normal interpreter exit (the run's ansible-local-<pid> dir, logging)
                os._exit(code)  # pylint: disable=protected-access
        pidfd = os.pidfd_open(pid)
        self.children[pid] = {"conn": conn, "pidfd": pidfd, "client_gone": False}
        self.sel.register(conn, selectors.EVENT_READ, ("conn", pid))
        self.sel.register(pidfd, selectors.EVENT_READ, ("pidfd", pid))
        return pid

    def _conn_event(self, pid: int) -> None:
        ch = self.children.get(pid)
        if not ch:
            return
        try:
            data = ch["conn"].recv(4096, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            return  # the client sends nothing after its request: ignore
        ch["client_gone"] = True
        self.sel.unregister(ch["conn"])
        # the child's watcher sees the same EOF and kills its tree; one killer at a time (a killer killed
        # halfway would leave SIGSTOPped processes), so the zygote steps in only if the child is still there
        ch["kill_at"] = time.monotonic() + 3.0

    def _reap(self, pid: int) -> None:
        ch = self.children.pop(pid, None)
        if not ch:
            return
        self.sel.unregister(ch["pidfd"])
        try:
            dummy, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 255 << 8
        os.close(ch["pidfd"])
        if not ch["client_gone"]:
            self.sel.unregister(ch["conn"])
            try:
                ch["conn"].setblocking(True)
                ch["conn"].settimeout(5)
                self._reply(ch["conn"], {"status": status})
            except OSError:
                pass
        ch["conn"].close()

    def _shutdown(self) -> None:
        for pid in list(self.children):
            kill_tree(pid)
        for pid, ch in list(self.children.items()):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            ch["conn"].close()
            os.close(ch["pidfd"])
        self.children.clear()
        try:
            os.unlink(self.sock_path)
        except OSError:
            pass
        if self.listener:
            self.listener.close()

    # ------------------------------------------------------------ the forked child
    def _child(self, conn: socket.socket, fds: List[int], req: dict) -> int:
        os.setsid()
        # orphans of the run (a module's double fork, a worker killed first) stay in this tree until it ends
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        # what the zygote's loop holds is not ours
        try:
            self.sel.close()
        except Exception:  # pylint: disable=broad-except
            pass
        self.listener.close()
        for other in self.children.values():
            other["conn"].close()
            os.close(other["pidfd"])
        for fd in (self.lifeline_fd, self.death_w):
            os.close(fd)
        # signals as in a fresh interpreter, then what the client had ignored (pexpect: SIGHUP)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in req.get("ignored") or []:
            signal.signal(int(sig), signal.SIG_IGN)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = [self.binary] + [str(a) for a in req["argv"]]
        sys.orig_argv = [sys.executable, self.binary] + sys.argv[1:]
        import tempfile  # pylint: disable=import-outside-toplevel
        tempfile.tempdir = self.tempdir
        _start_watcher(conn, self.death_r)
        self._fix_ansible_state()
        self.zipshare.attach(self.C.DEFAULT_LOCAL_TMP)
        from ansible.cli.playbook import main  # pylint: disable=import-outside-toplevel
        try:
            rc = main()
        except SystemExit as exc:
            rc = _exit_code(exc)
        return rc

    def _fix_ansible_state(self) -> None:
        """Redo, for this process and its fds, what importing Ansible did for the zygote."""
        import atexit  # pylint: disable=import-outside-toplevel
        from ansible import cli  # pylint: disable=import-outside-toplevel
        from ansible.utils import display as display_mod  # pylint: disable=import-outside-toplevel
        from ansible.utils.path import cleanup_tmp_file  # pylint: disable=import-outside-toplevel
        # stdio: fds 0-2 are the client's (a pty under ansible_runner): buffering as Python picks it at start
        # (Python 3.11, the image's and the suite's, has no sys.flags.unbuffered: it crashed every warm run in a pod)
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED")) or bool(getattr(sys.flags, "unbuffered", 0))
        for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
            try:
                stream.reconfigure(line_buffering=not unbuffered and (fd == 2 or os.isatty(fd)))
            except Exception:  # pylint: disable=broad-except
                pass
        cli.check_blocking_io()
        cli.initialize_locale()
        display = display_mod.Display()
        display._set_column_width()  # pylint: disable=protected-access
        try:  # the fork-safety lock Display wrapped stdout/stderr with is disabled after a fork: wrap again
            display_mod._synchronize_textiowrapper(sys.stdout, display._lock)  # pylint: disable=protected-access
            display_mod._synchronize_textiowrapper(sys.stderr, display._lock)  # pylint: disable=protected-access
        except Exception:  # pylint: disable=broad-except
            pass
        # per-run and per-process constants: DEFAULT_LOCAL_TMP (ansible-local-<pid>, removed at exit by the
        # process that made it: not the zygote's), CACHE_PLUGIN_CONNECTION (the run's artifact dir)
        atexit.unregister(cleanup_tmp_file)
        C = self.C
        for name in self.resettable:
            C.set_constant(name, C.config.get_config_value(name, variables=vars(C)))


PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        import ctypes  # pylint: disable=import-outside-toplevel
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:  # pylint: disable=broad-except
        pass
    return 1


def _run_atexit() -> None:
    import atexit  # pylint: disable=import-outside-toplevel
    try:
        atexit._run_exitfuncs()  # pylint: disable=protected-access
    except Exception:  # pylint: disable=broad-except
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # pylint: disable=broad-except
            pass


def _start_watcher(conn: socket.socket, death_r: int) -> None:
    """In the child: when the client goes away (its end of the socket closes) or the zygote dies, stop and
    kill every descendant, then the child's own process group."""
    import select  # pylint: disable=import-outside-toplevel
    fd = conn.fileno()

    def watch():
        p = select.poll()
        p.register(fd, select.POLLIN | select.POLLRDHUP)
        p.register(death_r, select.POLLIN)
        while True:
            for got, ev in p.poll():
                if got == fd and not ev & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                    try:
                        if conn.recv(4096, socket.MSG_DONTWAIT):
                            continue
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        pass
                kill_tree(os.getpid(), include_root=False)
                os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="warm-watcher", daemon=True).start()


def zygote_main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse  # pylint: disable=import-outside-toplevel
    p = argparse.ArgumentParser(prog="warm-zygote")
    p.add_argument("--socket", required=True)
    p.add_argument("--lifeline-fd", type=int, required=True)
    p.add_argument("--binary", required=True)
    p.add_argument("--idle-exit", type=float, default=0.0)
    args = p.parse_args(argv)
    # sys.path as the real ansible-playbook script has it (its own dir first), not this file's dir
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [x for x in sys.path if os.path.abspath(x or ".") != here]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.binary)))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = _Server(args.socket, args.lifeline_fd, args.binary, args.idle_exit)
    try:
        server.warm_up()
    except BaseException as exc:  # pylint: disable=broad-except
        _log("error", "warm runner zygote could not import ansible", error=repr(exc))
        return 1
    return server.serve()


# ====================================================================== controller side
def _shebang_python(binary: str) -> Optional[str]:
    try:
        with open(binary, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode(errors="replace").split()
    if parts and os.path.basename(parts[0]).startswith("python") and os.access(parts[0], os.X_OK):
        return parts[0]
    return None


class Zygote:
    """The controller's handle on a zygote process: start, restart if it died, close."""

    RESTART_INTERVAL = 10.0
    STARTUP_WAIT = 20.0   # how long after its start a run waits for the zygote rather than going cold

    def __init__(self, runtime_dir: str, env: Dict[str, str], cwd: str, binary: str, idle_exit: float = 0.0):
        self.idle_exit = idle_exit   # the zygote exits after this many seconds without a run (0: never)
        self.dir = os.path.join(runtime_dir, "warm")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        os.chmod(self.dir, 0o700)
        self.sock_path = os.path.join(self.dir, SOCKET_NAME)
        self._own_sock_dir = None
        if len(self.sock_path.encode()) > 100:   # sun_path is 108 bytes
            import tempfile  # pylint: disable=import-outside-toplevel
            self._own_sock_dir = tempfile.mkdtemp(prefix="lfw-")   # 0700
            self.sock_path = os.path.join(self._own_sock_dir, SOCKET_NAME)
        self.env = dict(env)
        self.cwd = cwd
        self.binary = binary
        # the interpreter the real ansible-playbook runs with (its sys.executable, sys.path and site-packages)
        self.python = _shebang_python(binary)
        if not self.python:
            raise RuntimeError(f"{binary} is not a Python script with a '#!python' line")
        self.launcher = os.path.join(self.dir, LAUNCHER_NAME)
        self._write_launcher()
        self.proc: Optional[subprocess.Popen] = None
        self._lifeline: Optional[int] = None
        self._lock = threading.Lock()
        self._started_at = 0.0
        self.closed = False
        self._finalizer = weakref.finalize(self, _close_fd_box, [None])

    def _write_launcher(self) -> None:
        src_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_client.py")
        with open(src_path, encoding="utf-8") as f:
            src = f.read()
        src = src.replace('\nif __name__ == "__main__":', '\nif False:  # launcher')
        text = (f"#!{self.python} -IS\n" + src +
                f"\nsys.exit(main({self.sock_path!r}, {self.binary!r}))\n")
        tmp = self.launcher + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o700)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, self.launcher)

    def start(self) -> None:
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> None:
        if self.closed or (self.proc and self.proc.poll() is None):
            return
        self._started_at = time.monotonic()
        r, w = os.pipe()
        try:
            self.proc = subprocess.Popen(   # pylint: disable=consider-using-with
                [self.python, os.path.abspath(__file__), "--socket", self.sock_path, "--lifeline-fd", str(r),
                 "--binary", self.binary] + (["--idle-exit", str(self.idle_exit)] if self.idle_exit else []),
                env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                pass_fds=(r,), start_new_session=True, close_fds=True)
        except OSError:
            os.close(w)
            raise
        finally:
            os.close(r)
        self._lifeline = w
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close_fd_box, [w])

    def ensure(self) -> None:
        """Restart a zygote that died (at most every RESTART_INTERVAL s) or exited idle (at once); runs meanwhile
        go cold, or wait for it while it starts (wait_starting)."""
        if self.closed or (self.proc and self.proc.poll() is None):
            return
        with self._lock:
            idled = self.idle_exit and self.proc is not None and self.proc.returncode == 0
            if idled or time.monotonic() - self._started_at >= self.RESTART_INTERVAL:
                self._start_locked()

    def wait_starting(self) -> bool:
        """A zygote started less than STARTUP_WAIT s ago and still importing Ansible: wait for it (True when it is
        ready). A cold run meanwhile would import Ansible a second time beside it, on the same CPUs; a pod that
        just started is where this happens (its first run), and a node agent's run after an idle exit."""
        left = self.STARTUP_WAIT - (time.monotonic() - self._started_at)
        if self.closed or left <= 0 or os.path.exists(self.sock_path) or not self.proc or self.proc.poll() is not None:
            return False
        return self.wait_ready(left)

    def wait_ready(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.sock_path):
                return True
            if self.proc is None or self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            self.closed = True
            if self._lifeline is not None:
                self._finalizer.detach()
                os.close(self._lifeline)
                self._lifeline = None
            if self.proc is not None:
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    kill_tree(self.proc.pid, include_root=False)
                    self.proc.kill()
                    self.proc.wait()
            for path in (self.sock_path, self.launcher):
                try:
                    os.unlink(path)
                except OSError:
                    pass
            if self._own_sock_dir:
                try:
                    os.rmdir(self._own_sock_dir)
                except OSError:
                    pass


def _close_fd_box(box: list) -> None:
    if box and box[0] is not None:
        try:
            os.close(box[0])
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(zygote_main())
