"""python -m tests.lab up|down|status|clean|demo — poke at a lab by hand.

  up      bring up clusters (default: a and b, both 10.243.0.0/16) and leave them running
  down    remove one lab by id (or --all)
  status  list running labs: clusters, kubeconfigs, inventory, processes alive
  clean   remove the labs whose owner process is gone (what `make lab-clean` runs); --all: every lab
  demo    what `make demo` runs
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from tests.lab import cleanup, names, netns, owner


def cmd_up(args) -> int:
    from tests.lab.lab import Lab  # pylint: disable=import-outside-toplevel
    specs = [{"name": n} for n in args.clusters.split(",")]
    lab = Lab(specs, pod_cidr=args.pod_cidr, nodes=args.nodes, pods_per_node=args.pods_per_node,
              gateways=args.gateways, lab_id=args.id, real_nodes=args.real_nodes,
              owner_pid=args.owner_pid if args.owner_pid is not None else owner.invoking_pid()).up()
    print(f"lab {lab.lab_id} is up (apiservers {lab.timings['apiservers_start']:.1f} s, "
          f"rest {lab.timings['up_without_apiservers']:.1f} s)")
    for name, c in lab.clusters.items():
        print(f"  cluster {name}: kubeconfig {c.kubeconfig}  id {c.cluster_id}")
    print(f"  inventory {lab.inventory_path}")
    print(f"  owner pid {lab.owner['pid']} ({lab.owner['cmdline'][:60]}): `make lab-clean` spares the lab while it runs")
    print(f"remove it with: python -m tests.lab down {lab.lab_id}")
    return 0


def _states() -> list[dict]:
    out = []
    if os.path.isdir(names.STATE_ROOT):
        for d in sorted(os.listdir(names.STATE_ROOT)):
            try:
                with open(os.path.join(names.STATE_ROOT, d, "state.json"), encoding="utf-8") as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                out.append({"lab_id": d.removeprefix(names.PREFIX), "prefix": d, "broken": True})
    return out


def cmd_status(_args) -> int:
    states = _states()
    if not states:
        print("no lab is running")
    all_ns = netns.list_netns()
    for st in states:
        prefix = st["prefix"]
        if "processes" in st:  # alive: the recorded process, not whatever holds its PID now
            alive = [p for p in st["processes"]
                     if p.get("start_time") is not None and owner.start_time(p.get("pid", 0)) == p["start_time"]]
        else:
            alive = [p for p in st.get("pids", []) if os.path.exists(f"/proc/{p}")]
        spaces = [n for n in all_ns if n.startswith(prefix)]
        print(f"lab {st['lab_id']}: {len(spaces)} netns, {len(alive)}/{len(st.get('pids', []))} processes alive, "
              f"owner {(st.get('owner') or {}).get('pid', '?')} {owner.status(st.get('owner'))}")
        for name, c in st.get("clusters", {}).items():
            print(f"  cluster {name}: pod CIDR {c['pod_cidr']}, {len(c['nodes'])} nodes, "
                  f"{sum(len(n['pods']) for n in c['nodes'])} pods, kubeconfig {c['kubeconfig']}")
        if st.get("inventory"):
            print(f"  inventory {st['inventory']}")
    orphans = [n for n in all_ns if names.is_lab_name(n) and not any(n.startswith(s["prefix"]) for s in states)]
    if orphans:
        print(f"orphan lab netns (make lab-clean removes them): {' '.join(orphans)}")
    dirs = {os.path.normpath(s.get("workdir") or os.path.join(names.STATE_ROOT, s["prefix"])) for s in states}
    stray = sorted(pid for pid, (d, _st) in cleanup.marked_processes().items() if os.path.normpath(d) not in dirs)
    if stray:
        print(f"orphan lab processes (make lab-clean removes them): {' '.join(map(str, stray))}")
    return 0


def cmd_down(args) -> int:
    ids = [s["lab_id"] for s in _states()] if args.all else [args.lab_id]
    if not ids or ids == [None]:
        print("nothing to remove (give a lab id or --all)")
        return 1
    for lab_id in ids:
        removed = cleanup.clean_prefix(names.lab_prefix(lab_id), cleanup.state_dir(lab_id))
        print(f"lab {lab_id}: removed {len(removed['netns'])} netns, {len(removed['processes'])} processes, "
              f"{len(removed['sockets'])} sockets")
        if removed["survivors"]:  # its state dir stays, so that the next lab-clean finds them
            print(f"lab {lab_id}: still running after SIGKILL: {' '.join(map(str, removed['survivors']))}")
    return 0


def cmd_clean(args) -> int:
    plan = cleanup.plan_clean(args.all)
    for lab, why in plan["kept"]:
        print(f"lab-clean: kept {lab}: {why}")
    if args.dry_run:
        for d in plan["dead"]:
            print(f"lab-clean: would remove {os.path.basename(d)}" + ("" if args.all else " (owner gone)"))
        for i in plan["orphans"]:
            print(f"lab-clean: would remove {names.lab_prefix(i)} (objects without a state dir)")
        return 0
    results = cleanup.clean_all(args.all)
    n = sum(len(r["netns"]) for r in results)
    p = sum(len(r["processes"]) for r in results)
    s = sum(len(r["sockets"]) for r in results)
    d = sum(len(r["dirs"]) for r in results)
    print(f"lab-clean: removed {n} netns, {p} processes, {s} wireguard sockets, {d} state dirs")
    survivors = sorted(pid for r in results for pid in r.get("survivors", []))
    if survivors:  # their state dirs stay, so that the next lab-clean finds them
        print(f"lab-clean: still running after SIGKILL: {' '.join(map(str, survivors))}")
        return 1
    return 0


def cmd_demo(_args) -> int:
    from tests.lab.demo import main  # pylint: disable=import-outside-toplevel
    return main()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--clusters", default="a,b")
    up.add_argument("--pod-cidr", default="10.243.0.0/16")
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--pods-per-node", type=int, default=2)
    up.add_argument("--gateways", type=int, default=1)
    up.add_argument("--id", help="lab id (4 hex digits; default: random)")
    up.add_argument("--real-nodes", action="store_true",
                    help="containerd, kubelet and kube-proxy on every node, scheduler and controller manager per "
                         "cluster: pods run for real (tests.lab.realnode; docs/lab.md)")
    down = sub.add_parser("down")
    down.add_argument("lab_id", nargs="?")
    down.add_argument("--all", action="store_true")
    sub.add_parser("status")
    up.add_argument("--owner-pid", type=int,
                    help="process owning the lab: `make lab-clean` removes it only once that is gone "
                         "(default: the shell, or test run, that ran this command)")
    clean = sub.add_parser("clean")
    clean.add_argument("--all", action="store_true", help="also the labs whose owner still runs")
    clean.add_argument("--dry-run", action="store_true", help="print what would be removed")
    sub.add_parser("demo")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("the lab needs root (network namespaces)", file=sys.stderr)
        return 2
    return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "clean": cmd_clean, "demo": cmd_demo}[args.cmd](args)


if __name__ == "__main__":
    from tests.lab.interrupts import LabInterrupted  # pylint: disable=ungrouped-imports
    try:
        sys.exit(main())
    except LabInterrupted as exc:  # the lab being brought up is down again (Lab.up)
        print(f"interrupted: {exc}", file=sys.stderr)
        sys.exit(128 + exc.signum)
