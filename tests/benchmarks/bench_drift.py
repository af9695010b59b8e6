"""Drift repaired by the controller: two lab clusters connected by `connect`, the controller run as its README says
(default watches.yaml, shipped playbooks, the default 30 s drift period; LIQO_BENCH_DRIFT_PERIOD overrides it), and
each fault, one at a time, under a 5 pings/s flow between pods, nobody running a playbook.

Prints, per fault: what found it (a kernel notification, the periodic check) and when, the repair (from the
detection to the end of the forced reconcile), traffic back, and the outage the pods saw (the longest run of
lost pings) with its target (5 s). Baselines of the same run: the same five faults found by the periodic check alone
(a controller started with --no-drift-events), and a reconcile by hand of the playbook the controller runs. A wrong
peer endpoint can be put right by WireGuard itself (the peer roams back to the address authenticated packets come
from) before any check sees it: the table says so.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time

from tests.benchmarks.report import figure, ratio
from tests.e2e import fabric
from tests.e2e.test_controller import ControllerProc, wait_for
from tests.e2e.test_controller_drift import FAULTS, GROUPS, inject_and_measure, manifests, traffic
from tests.lab import Lab

OUTAGE_TARGET = 5.0
REPAIR_TARGET = 5.0
# the five faults the periodic baseline repeats
BASELINE = ("flush the gateway's nft table", "delete a node's routes of table 18952", "delete a node's policy rules",
            "kill -9 the gateway's wireguard-go", "delete a node's overlay link")


def _by_hand(lab, book: str, **extra) -> float:
    t0 = time.monotonic()
    fabric.playbook(book, lab.inventory_path, **extra)
    return time.monotonic() - t0


def _faults(lab, workdir: str, name: str, period: float, faults, *flags) -> list:
    """Rows of `faults` injected under a controller started with `flags`."""
    ctl = ControllerProc(workdir, {"a": lab["a"].kubeconfig, "b": lab["b"].kubeconfig}, "--drift-period", str(period),
                         *flags, inventory=lab.inventory_path, name=name)
    ctl.start()
    rows = []
    try:
        wait_for(lambda: len(manifests(lab["a"])) >= 2 and len(manifests(lab["b"])) >= 2, 180,
                 "the controller's first runs", interval=1)
        wait_for(lambda: ctl.metric("liqo_fabric_leader") == 2, 60, "the controller acting", interval=0.5)
        wait_for(lambda: traffic(lab), 30, "traffic")
        for fault in faults:
            try:
                rows.append(inject_and_measure(lab, ctl, fault, timeout=period * 2 + 15))
            except AssertionError as exc:   # reported in the table; the next faults still run
                rows.append({"fault": fault, "key": "", "error": str(exc).split(" (last", maxsplit=1)[0][:90],
                             "traffic_ok": traffic(lab)})
    finally:
        ctl.stop()
        ctl.reap_orphans()
    return rows


def _table(title: str, rows: list) -> None:
    print(f"  {title}")
    print(f"  {'fault':<44} {'found by':<30} {'detected':>9} {'repaired':>9} {'traffic':>8} {'outage':>7} {'lost':>5}")
    for r in rows:
        if "error" in r:
            print(f"  {r['fault']:<44} NOT MEASURED: {r['error']} (traffic {'fine' if r['traffic_ok'] else 'broken'})")
            continue
        by = r["trigger"] if r["trigger"] in ("-", "period", "resync") else r["trigger"].split(": ", 1)[-1]
        print(f"  {r['fault']:<44} {by[:30]:<30} {r['detected']:>7.2f} s {r['repaired']:>7.2f} s "
              f"{r['traffic']:>6.2f} s {r['outage']:>5.1f} s {r['lost']:>5}")


def run() -> None:
    if os.geteuid() != 0 or not shutil.which("kubectl"):
        print("  skipped: needs root and kubectl (lab clusters)")
        return
    period = float(os.environ.get("LIQO_BENCH_DRIFT_PERIOD", "30"))
    workdir = tempfile.mkdtemp(prefix="bench-drift-")
    with Lab([{"name": "a"}, {"name": "b"}], pod_cidr="10.243.0.0/16", nodes=2, pods_per_node=1) as lab:
        fabric.install(lab["a"])
        fabric.install(lab["b"])
        fabric.playbook("connect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                        remote_kubeconfig=lab["b"].kubeconfig, wait=True, wait_timeout=30, **GROUPS)
        try:
            # baseline: a person's reconcile by hand of each playbook the controller would run (no controller yet)
            hand_gw = _by_hand(lab, "reconcile_gateway", kubeconfig=lab["a"].kubeconfig,
                               gateway_group="cluster_a_gateway", nodes_group="cluster_a_nodes",
                               gateway_kinds=["GatewayClient"])
            hand_ov = _by_hand(lab, "reconcile_overlay", kubeconfig=lab["a"].kubeconfig, nodes_group="cluster_a_nodes")
            rows = _faults(lab, workdir, "bench-drift", period, FAULTS)
            periodic = _faults(lab, workdir, "bench-drift-periodic", period, BASELINE, "--no-drift-events")
        finally:
            fabric.playbook("disconnect", lab.inventory_path, kubeconfig=lab["a"].kubeconfig,
                            remote_kubeconfig=lab["b"].kubeconfig, check=False, **GROUPS)
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"  drift period {period:.0f} s; reconcile by hand: reconcile_gateway {hand_gw:.2f} s, "
          f"reconcile_overlay {hand_ov:.2f} s; outage: the longest run of lost pings at 5 a second")
    _table("kernel notifications and the periodic check (the default)", rows)
    _table("baseline: the periodic check alone (--no-drift-events)", periodic)
    done = [r for r in rows if "error" not in r]
    base = {r["fault"]: r for r in periodic if "error" not in r}
    if not done:
        return
    figure("worst outage after a fault", max(r["outage"] for r in done), "s", target=OUTAGE_TARGET)
    figure("worst detection after the fault", max(r["detected"] for r in done), "s")
    figure("worst repair after detection", max(r["repaired"] for r in done), "s", target=REPAIR_TARGET)
    for r in done:
        if r["fault"] in base:
            ratio(f"outage of '{r['fault']}' / the periodic check alone", max(r["outage"], 0.2),
                  max(base[r["fault"]]["outage"], 0.2))
    for r in done:
        if r["key"] == "-":
            continue   # WireGuard undid the fault itself (a roamed endpoint): no run repaired it
        hand = hand_gw if "/Gateway" in r["key"] else hand_ov
        ratio(f"repair of '{r['fault']}' / reconcile by hand", r["repaired"], hand)
