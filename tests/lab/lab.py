"""Lab: several LabClusters sharing one WAN, one state directory and one Ansible inventory."""
from __future__ import annotations

import concurrent.futures
import fcntl
import json
import os
import sys
import threading
import time


from tests.lab import cleanup, interrupts, names, owner
from tests.lab.cluster import LabCluster
from tests.lab.wan import LabWan


class Lab:
    """Lab([{"name": "a", "pod_cidr": "10.243.0.0/16"}, {"name": "b", ...}], nodes=3, pods_per_node=10)

    Keyword arguments after the cluster specs are defaults for every cluster. Each cluster gets its own
    underlay (172.30.<i>.0/24); all gateway nodes share the WAN 192.168.254.0/24 (wan_routed: through a router whose
    path MTU a test sets, LabWan.set_path)."""

    def __init__(self, clusters: list[dict], wan_cidr: str = "192.168.254.0/24", lab_id: str | None = None,
                 owner_pid: int | None = None, wan_routed: bool = False, **defaults):
        self.owner_pid = owner_pid  # who owns the lab (`make lab-clean` spares it while it runs): default this process
        self.lab_id = lab_id or names.new_lab_id()
        if not (len(self.lab_id) == 4 and all(c in "0123456789abcdef" for c in self.lab_id)):
            raise ValueError(f"lab_id: {self.lab_id!r} must be 4 lowercase hex digits")
        self.prefix = names.lab_prefix(self.lab_id)
        self.workdir = cleanup.state_dir(self.lab_id)
        self.wan = LabWan(self.prefix, wan_cidr, routed=wan_routed)  # routed: a router between the gateways
        # set when the lab is going down: the clusters still starting in threads stop at their next step
        self._cancel = threading.Event()
        self._state_lock = threading.Lock()  # the clusters record the processes they start from their threads
        self.clusters: dict[str, LabCluster] = {}
        for i, spec in enumerate(clusters):
            kw = {**defaults, **spec}
            kw.setdefault("underlay_cidr", f"172.30.{i}.0/24")
            self.clusters[kw["name"]] = LabCluster(wan=self.wan, lab_id=self.lab_id, workdir=self.workdir,
                                                   cancel=self._cancel, **kw)
            self.clusters[kw["name"]].on_change = self._changed
            self.clusters[kw["name"]].on_spawn = self._write_state
        self.inventory_path = os.path.join(self.workdir, "inventory.yml")
        self.timings: dict[str, float] = {}
        self.owner: dict | None = None
        self._real_lock: int | None = None

    def __getitem__(self, name: str) -> LabCluster:
        return self.clusters[name]

    def up(self) -> "Lab":
        self._cancel.clear()
        # from here SIGTERM, SIGINT and SIGHUP raise LabInterrupted (main thread): the teardown below runs
        interrupts.enter(self, self._cancel, self.down)
        try:
            if any(c.real for c in self.clusters.values()):
                self._lock_real_nodes()
            os.makedirs(self.workdir, mode=0o700, exist_ok=True)
            self.owner = owner.record(self.owner_pid)
            # first, before any process starts, so a crash during up() is still cleanable by `make lab-clean`;
            # each process is then recorded as it starts (LabCluster.on_spawn)
            self._write_state()
            t0 = time.monotonic()
            self._each_cluster("start_apiserver")
            self.timings["apiservers_start"] = time.monotonic() - t0
            self._write_state()
            t1 = time.monotonic()
            for c in self.clusters.values():
                c.build_dataplane()
            self._each_cluster("register")
            self.timings["up_without_apiservers"] = time.monotonic() - t1
            self._write_inventory()
            self._write_state()
        except BaseException:
            self._cancel.set()
            self.down()
            raise
        return self

    def _each_cluster(self, method: str) -> None:
        """`method` of every cluster, in parallel. On an error or an interrupt the others are told to stop
        (they check self._cancel between steps) and are waited for, so that down() never races a start that
        is still spawning processes."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(self.clusters)) as pool:
            futures = [pool.submit(getattr(c, method)) for c in self.clusters.values()]
            try:
                for fut in futures:
                    fut.result()
            except BaseException:
                self._cancel.set()
                raise

    def down(self) -> dict:
        with interrupts.teardown(self):  # signals wait until the lab is down
            self._cancel.set()
            t0 = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(max_workers=len(self.clusters)) as pool:
                for fut in [pool.submit(c.down) for c in self.clusters.values()]:
                    fut.result()
            self.wan.down()
            removed = cleanup.clean_prefix(self.prefix, self.workdir)
            self.timings["down"] = time.monotonic() - t0
            if self._real_lock is not None:
                os.close(self._real_lock)  # closing releases the lock (as does the death of this process)
                self._real_lock = None
            return removed

    def _lock_real_nodes(self) -> None:
        """Real-node labs come up one at a time per host, each waiting for the one before to go down (the suite's
        parallel workers, a bench beside a test run): they share containerd's shim socket directory, which their
        zero-residue checks compare, and each takes ~2 GiB and both CPUs for a minute to come up."""
        os.makedirs(names.STATE_ROOT, mode=0o700, exist_ok=True)
        fd = os.open(names.STATE_ROOT, os.O_RDONLY | os.O_DIRECTORY)  # the labs' state root itself: no file to remove
        timeout = float(os.environ.get("LIQO_FABRIC_LAB_LOCK_TIMEOUT", "3600"))
        deadline, said = time.monotonic() + timeout, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise RuntimeError(f"lab {self.lab_id}: the real-node lab before it did not go down within "
                                       f"LIQO_FABRIC_LAB_LOCK_TIMEOUT={timeout:g} s (lock on {names.STATE_ROOT}; "
                                       "`python -m tests.lab status` shows the labs up)") from None
                if not said:
                    print(f"lab {self.lab_id}: waiting for the real-node lab before it to go down (at most "
                          f"{timeout:g} s)", file=sys.stderr, flush=True)
                    said = True
                time.sleep(1)
        self._real_lock = fd

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    def _changed(self) -> None:
        self._write_inventory()
        self._write_state()

    def inventory(self) -> dict:
        children = {}
        for c in self.clusters.values():
            children.update(c.inventory())
        return {"all": {"children": children, "vars": {"lab_id": self.lab_id, "wan_netns": self.wan.netns}}}

    def _write_inventory(self) -> None:
        # JSON, which is YAML too: Ansible tries a file as JSON first and skips its slower YAML parse of every lab
        # host (docs/scale.md)
        with open(self.inventory_path, "w", encoding="utf-8") as f:
            json.dump(self.inventory(), f, indent=1)
        os.chmod(self.inventory_path, 0o600)

    def _write_state(self) -> None:
        with self._state_lock:
            self._write_state_locked()

    def _write_state_locked(self) -> None:
        # processes: what `make lab-clean` stops after a crash, each by PID while it has its recorded start time
        processes = [p for c in self.clusters.values() for p in c.processes()]
        state = {
            "lab_id": self.lab_id, "prefix": self.prefix, "workdir": self.workdir, "owner": self.owner,
            "pids": [p["pid"] for p in processes], "processes": processes,
            "clusters": {n: {"kubeconfig": c.kubeconfig, "cluster_id": c.cluster_id, "pod_cidr": c.pod_cidr,
                             "nodes": [{"name": nd.name, "netns": nd.netns, "ip": nd.underlay_ip,
                                        "gateway": nd.gateway, "wan_ip": nd.wan_ip,
                                        "pods": [{"name": p.name, "netns": p.netns, "ip": p.ip} for p in nd.pods]}
                                       for nd in c.nodes]}
                         for n, c in self.clusters.items()},
            "inventory": self.inventory_path,
        }
        path = os.path.join(self.workdir, "state.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1)
        os.chmod(path + ".tmp", 0o600)
        os.replace(path + ".tmp", path)
