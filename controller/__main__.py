# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""liqo-fabric-controller: command line.

    liqo-fabric-controller --cluster a=/path/kubeconfig-a --cluster b=/path/kubeconfig-b --inventory inv.yml
    liqo-fabric-controller                       # in-cluster (service account), cluster name "local"
    liqo-fabric-controller --mode node --node-name $NODE_NAME   # the node agent (DaemonSet)
    liqo-fabric-controller --mode gateway --gateway-kind GatewayServer --namespace NS --name NAME   # a gateway pod
    liqo-fabric-controller --mode webhook --webhook-cert C --webhook-key K   # the CRD conversion webhook only

One image, one engine, three modes: `controller` (the API side; with --inventory also the agentless
dataplane), `node` (the overlay of its own node) and `gateway` (the gateway role applied to its own pod).
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import signal
import ssl
import sys
import tempfile
import threading
import time

import controller
from controller import logs, modes, watchmap
from controller.watchmap import MODES
from controller.engine import Engine
from controller.conversion import ConversionServer
from controller import webhook_sync as webhook_secret
from controller.metrics import HealthServer, Metrics

log = logging.getLogger("controller")
T_MAIN = time.monotonic()


def default_collection_root() -> str:
    """The collection this controller ships in: the parent of controller/ (repo checkout or installed)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="liqo-fabric-controller", description=__doc__.split("\n\n", maxsplit=1)[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", action="append", default=[], metavar="NAME=KUBECONFIG",
                   help="a cluster to serve (repeatable); none: in-cluster service account")
    p.add_argument("--in-cluster-name", default=os.environ.get("FABRIC_CLUSTER", "local"),
                   help="cluster name in in-cluster mode (default %(default)s)")
    p.add_argument("--inventory", help="Ansible inventory passed to every playbook run (-i)")
    p.add_argument("--watches", default=watchmap.DEFAULT_PATH, help="watch map (default: controller/watches.yaml)")
    p.add_argument("--playbook-dir", help="where the watch map's playbooks are (default: <collection>/playbooks)")
    p.add_argument("--collection-root", default=default_collection_root())
    p.add_argument("--runtime-dir", help="private data of ansible_runner (0700; default: $XDG_RUNTIME_DIR or a temp dir)")
    p.add_argument("--workers", type=int, default=int(os.environ.get("FABRIC_WORKERS", "2")),
                   help="concurrent playbook runs (default %(default)s)")
    p.add_argument("--debounce", type=float, default=0.1, help="seconds an event waits for more of the same key")
    p.add_argument("--drift-period", type=float, metavar="SECONDS",
                   help="seconds between drift checks of every entry with one (default: the watch map's `drift.period`)")
    p.add_argument("--no-drift-events", action="store_true",
                   help="drift checks on their period only, not also as the kernel reports a change (the watch map's "
                        "`drift.events`)")
    p.add_argument("--resync-period", type=float, metavar="SECONDS",
                   help="seconds between resyncs of every entry with one (default: the watch map's `resync`)")
    p.add_argument("--key-rotation-check", type=float, default=10.0, metavar="SECONDS",
                   help="seconds between checks of the gateways' key-rotation-period annotations (default %(default)s)")
    p.add_argument("--no-storage-migration", action="store_true",
                   help="controller mode: do not migrate the CRDs' stored objects to their storage version when taking "
                        "a cluster's Lease (default: migrate, then trim status.storedVersions; docs/upgrade.md)")
    p.add_argument("--no-leader-elect", action="store_true", help="act without holding the Lease")
    p.add_argument("--lease-duration", type=float, default=15.0)
    p.add_argument("--lease-namespace", default="liqo")
    p.add_argument("--identity", help="leader election identity (default hostname-pid)")
    p.add_argument("--mode", choices=MODES + ("webhook",), default=os.environ.get("FABRIC_MODE") or "controller",
                   help="controller (default), node (the node agent), gateway (a gateway pod) or webhook (the CRD "
                        "conversion webhook alone: no cluster, no watch, no playbook)")
    p.add_argument("--node-mode", action="store_true", help="same as --mode node")
    p.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""))
    p.add_argument("--namespaces", default=os.environ.get("FABRIC_NAMESPACES", ""), metavar="NS[,NS...]",
                   help="namespaces served: Secrets are watched there only (default: every namespace)")
    p.add_argument("--gateway-kind", choices=("GatewayServer", "GatewayClient"), help="gateway mode: the kind of its gateway")
    p.add_argument("--name", dest="gateway_name", help="gateway mode: the name of its GatewayServer/GatewayClient")
    p.add_argument("--namespace", dest="gateway_namespace", default=os.environ.get("POD_NAMESPACE"),
                   help="gateway mode: its namespace (default $POD_NAMESPACE)")
    p.add_argument("--metrics-address", default="0.0.0.0")
    p.add_argument("--metrics-port", type=int, default=8080, help="/metrics /healthz /readyz (0: any free port)")
    p.add_argument("--webhook-cert", default=os.environ.get("FABRIC_WEBHOOK_CERT", ""),
                   help="PEM certificate of the CRD conversion webhook (HTTPS POST /convert); none: no webhook")
    p.add_argument("--webhook-key", default=os.environ.get("FABRIC_WEBHOOK_KEY", ""), help="its PEM private key")
    p.add_argument("--webhook-address", default="0.0.0.0")
    p.add_argument("--webhook-port", type=int, default=9443, help="port of the conversion webhook (0: any free port)")
    p.add_argument("--webhook-secret", default=os.environ.get("FABRIC_WEBHOOK_SECRET", ""), metavar="NS/NAME",
                   help="keep --webhook-cert/--webhook-key equal to this Secret's tls.crt/tls.key (read every 30 s), "
                        "so a renewal reaches a running webhook (in-cluster)")
    p.add_argument("--watch-timeout", type=int, default=240, help="seconds per watch request before it is renewed")
    p.add_argument("--no-state", action="store_true", help="do not persist applied hashes in ConfigMap liqo/%s" % "liqo-fabric-controller-state")
    p.add_argument("--no-warm-runner", action="store_true",
                   help="spawn a cold ansible-playbook per run (default: fork runs from a zygote that imported Ansible once)")
    p.add_argument("--warm-idle-exit", type=float, default=0.0, metavar="SECONDS",
                   help="the warm runner's zygote exits after SECONDS without a run, freeing its memory, and starts "
                        "again at the next run (which waits for it); 0: never (default)")
    p.add_argument("--standby-warmup-delay", type=float, default=0.0, metavar="SECONDS",
                   help="gateway mode: a standby pod starts its warm runner and its runs only SECONDS after its start "
                        "(at once if it takes the Lease), leaving the CPU to the active pod's first run; 0: at once "
                        "(default)")
    p.add_argument("--no-repoint-in-process", action="store_true",
                   help="node mode: on a gateway pod's event, leave the overlay to the playbook run (default: apply it "
                        "in process first, then run the playbook)")
    p.add_argument("--log-level", default=os.environ.get("FABRIC_LOG_LEVEL", "info"))
    return p.parse_args(argv)


def clusters_from_args(args) -> dict:
    clusters = {}
    for spec in args.cluster:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--cluster: {spec!r} must be NAME=KUBECONFIG")
        if not name.replace("-", "").isalnum():
            raise SystemExit(f"--cluster: name {name!r} must be alphanumeric (dashes allowed)")
        if not os.path.isfile(path):
            raise SystemExit(f"--cluster {name}: kubeconfig {path!r} does not exist")
        if name in clusters:
            raise SystemExit(f"--cluster: {name!r} given twice")
        clusters[name] = os.path.abspath(path)
    if not clusters:
        clusters[args.in_cluster_name] = None
    return clusters


def override_periods(entries, drift_period=None, resync_period=None, drift_events=True) -> list:
    """The watch map's entries with --drift-period / --resync-period / --no-drift-events applied (entries that
    have one)."""
    for name, value in (("--drift-period", drift_period), ("--resync-period", resync_period)):
        if value is not None and value < 1:
            raise SystemExit(f"{name}: {value} is below the 1 s minimum")
    out = []
    for e in entries:
        if drift_period is not None and e.drift is not None:
            e = dataclasses.replace(e, drift=dataclasses.replace(e.drift, period=drift_period))
        if not drift_events and e.drift is not None:
            e = dataclasses.replace(e, drift=dataclasses.replace(e.drift, events=False))
        if resync_period is not None and e.resync > 0:
            e = dataclasses.replace(e, resync=resync_period)
        out.append(e)
    return out


def start_webhook(args):
    """The conversion webhook of --webhook-cert/--webhook-key (started), or None when neither is given."""
    if not (args.webhook_cert or args.webhook_key):
        return None
    if not (args.webhook_cert and args.webhook_key):
        raise SystemExit("--webhook-cert and --webhook-key go together")
    try:
        webhook = ConversionServer(args.webhook_address, args.webhook_port, args.webhook_cert, args.webhook_key)
    except (OSError, ssl.SSLError) as exc:
        raise SystemExit(f"--webhook-cert/--webhook-key/--webhook-port: {exc}")
    webhook.start()
    return webhook


def start_webhook_sync(args, clusters):
    """--webhook-secret: the thread keeping the webhook's files equal to the Secret (started), or None."""
    if not args.webhook_secret:
        return None
    if not (args.webhook_cert and args.webhook_key):
        raise SystemExit("--webhook-secret needs --webhook-cert and --webhook-key")
    try:
        return webhook_secret.start(clusters.get(args.in_cluster_name, next(iter(clusters.values()))),
                                    args.webhook_secret, args.webhook_cert, args.webhook_key)
    except ValueError as exc:
        raise SystemExit(str(exc))


def stop_event() -> threading.Event:
    """Set by SIGTERM/SIGINT (handlers installed now)."""
    done = threading.Event()

    def on_signal(signum, _frame):
        log.info("signal received, stopping", extra={"fields": {"signal": signum}})
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return done


def wait_for_signal(done: threading.Event) -> None:
    """Blocks the main thread until `done` is set. A wait with no timeout can miss the signal: the kernel may deliver
    it to another thread, which only flags it for the main thread, and the main thread runs Python's handler (which
    sets `done`) once its wait returns; a wait of 0.5 s at a time returns to it."""
    while not done.wait(0.5):
        pass


def webhook_only(args) -> int:
    """--mode webhook: the conversion webhook and nothing else (the lab's and an agentless install's webhook)."""
    if not (args.webhook_cert and args.webhook_key):
        raise SystemExit("--mode webhook needs --webhook-cert and --webhook-key")
    done = stop_event()
    webhook = start_webhook(args)
    log.info("conversion webhook started", extra={"fields": {"mode": "webhook", "webhook_port": webhook.port}})
    wait_for_signal(done)
    webhook.stop()
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    logs.setup(args.log_level)
    if args.mode == "webhook" and not args.node_mode:
        return webhook_only(args)
    clusters = clusters_from_args(args)
    mode = "node" if args.node_mode else args.mode
    if mode == "node" and not args.node_name:
        raise SystemExit("--mode node needs --node-name (or NODE_NAME)")
    gateway = None
    if mode == "gateway":
        missing = [f for f, v in (("--gateway-kind", args.gateway_kind), ("--name", args.gateway_name),
                                  ("--namespace", args.gateway_namespace)) if not v]
        if missing:
            raise SystemExit(f"--mode gateway needs {', '.join(missing)}")
        gateway = {"kind": args.gateway_kind, "namespace": args.gateway_namespace, "name": args.gateway_name}
    if args.warm_idle_exit < 0:
        raise SystemExit(f"--warm-idle-exit: {args.warm_idle_exit} is not a number of seconds >= 0")
    if args.standby_warmup_delay < 0:
        raise SystemExit(f"--standby-warmup-delay: {args.standby_warmup_delay} is not a number of seconds >= 0")
    namespaces = [n.strip() for n in args.namespaces.split(",") if n.strip()]
    if args.inventory and not os.path.isfile(args.inventory):
        raise SystemExit(f"--inventory: {args.inventory!r} does not exist")
    try:
        entries = watchmap.load(args.watches, args.playbook_dir or os.path.join(args.collection_root, "playbooks"))
    except (OSError, watchmap.WatchMapError) as exc:
        raise SystemExit(f"--watches {args.watches}: {exc}")
    entries = override_periods(entries, args.drift_period, args.resync_period, not args.no_drift_events)
    runtime = args.runtime_dir or os.path.join(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir(),
                                               f"liqo-fabric-controller-{os.getuid()}-{os.getpid()}")
    metrics = Metrics()
    engine_mode = modes.make(mode, node_name=args.node_name, gateway=gateway, namespaces=namespaces,
                             repoint_in_process=not args.no_repoint_in_process,
                             standby_warmup_delay=args.standby_warmup_delay, key_rotation_check=args.key_rotation_check,
                             storage_migration=not args.no_storage_migration)
    engine = Engine(entries, clusters, args.collection_root, runtime, inventory=args.inventory, workers=args.workers,
                    debounce=args.debounce, leader_elect=not args.no_leader_elect, lease_duration=args.lease_duration,
                    lease_namespace=args.lease_namespace, identity=args.identity, mode=engine_mode,
                    watch_map_path=args.watches, metrics=metrics, state_configmap=not args.no_state,
                    watch_timeout=args.watch_timeout, warm_runner=not args.no_warm_runner,
                    warm_idle_exit=args.warm_idle_exit)
    http = HealthServer(args.metrics_address, args.metrics_port, metrics, engine.healthy, engine.ready)
    http.start()
    webhook = start_webhook(args)
    webhook_sync = start_webhook_sync(args, clusters)
    done = stop_event()
    t_start = time.monotonic()
    engine.start()
    startup = logs.startup_timeline(controller.IMPORTED_AT, [("imports", T_MAIN), ("setup", t_start), ("start", time.monotonic())])
    log.info("controller started", extra={"fields": {
        "clusters": sorted(clusters), "mode": engine.mode, "identity": engine.identity, "metrics_port": http.port,
        "webhook_port": webhook.port if webhook else None,
        "workers": engine.workers_n, "entries": [e.kind for e in engine.entries if e.enabled and e.playbook],
        "role_version": engine.role_version[:12], "startup": startup}})
    wait_for_signal(done)
    engine.shutdown()
    http.stop()
    if webhook:
        webhook.stop()
    if webhook_sync:
        webhook_sync.stop()
    if not args.runtime_dir:  # ours alone (pid in the name): nothing of it is needed after exit
        shutil.rmtree(runtime, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
