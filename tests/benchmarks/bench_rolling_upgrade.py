"""A rolling upgrade of the fabric in the cluster and its rollback, measured on a real-node lab of its own.

tests/e2e/rolling_upgrade.py does it as tests/e2e/test_rolling_upgrade.py does: the previous release N (a commit of
main, its own image) installed and connected, rolled to this tree's image (N+1) with `kubectl apply -k` of an
overlay that sets the tag, then back to N, each under 5 pings/s from a pod of a to a pod of b and a long-lived TCP
flow. Printed per roll: the time from the apply to every fabric pod on the new image, the longest time without a
reply (target <= 3 s) and the longest time a Connection was Error; and whether the TCP flow survived.
"""
import os
import shutil
import time

import pytest

from tests.benchmarks.report import figure
from tests.e2e import in_cluster_lab as icl
from tests.e2e import rolling_upgrade as ru
from tests.lab.images import fabric_image

GAP_TARGET = 3   # s without a reply


def run():
    if os.geteuid() != 0:
        print("  skipped: needs root (network namespaces, kubelets)")
        return
    if not shutil.which("nsenter"):
        print("  skipped: nsenter is not installed")
        return
    try:
        previous = ru.previous_image()
    except pytest.skip.Exception as exc:   # a clone without the commit (shallow)
        print(f"  skipped: {exc}")
        return
    t0 = time.monotonic()
    with icl.real_node_lab() as lab:
        print(f"  (lab up in {time.monotonic() - t0:.0f} s)", flush=True)
        ru.install_previous(lab, previous)
        for label, image in ((f"N -> N+1 ({ru.tag_of(previous['name'])} -> {ru.tag_of(fabric_image())})", fabric_image()),
                             ("N+1 -> N (image rollback)", previous["name"])):
            figures: dict = {}
            result = ru.roll(lab, icl.DEPLOY, image, figures, recreate_step=image == previous["name"])
            for name, value in figures.items():
                figure(f"{label}: {name.rsplit(' (', 1)[0]}", float(value), "s",
                       GAP_TARGET if "without a reply" in name else None)
            flow = result["flow"]
            print(f"  {label}: TCP flow {'survived' if not flow['error'] and flow['received'] == flow['sent'] else 'BROKEN'}"
                  f" ({flow['received']} of {flow['sent']} bytes); Connection states seen: {result['states seen']}",
                  flush=True)
            for name, order in result["order"].items():
                agents, gateways = order["last agent ready"], order["first gateway pod created"]
                after = (gateways - agents).total_seconds() if agents and gateways else None
                print(f"  {label}: {name}: first gateway pod of the new image created {after} s after its last node"
                      " agent was ready", flush=True)
