"""python -m tests.lab up|down|status|clean|demo — poke at a lab by hand.

  up      bring up clusters (default: a and b, both 10.243.0.0/16) and leave them running
  down    remove one lab by id (or --all)
  status  list running labs: clusters, kubeconfigs, inventory, processes alive
  clean   remove everything any lab left behind (what `make lab-clean` runs)
  demo    what `make demo` runs
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from tests.lab import cleanup, names, netns


def cmd_up(args) -> int:
    from tests.lab.lab import Lab  # pylint: disable=import-outside-toplevel
    specs = [{"name": n} for n in args.clusters.split(",")]
    lab = Lab(specs, pod_cidr=args.pod_cidr, nodes=args.nodes, pods_per_node=args.pods_per_node,
              gateways=args.gateways, lab_id=args.id).up()
    print(f"lab {lab.lab_id} is up (apiservers {lab.timings['apiservers_start']:.1f} s, "
          f"rest {lab.timings['up_without_apiservers']:.1f} s)")
    for name, c in lab.clusters.items():
        print(f"  cluster {name}: kubeconfig {c.kubeconfig}  id {c.cluster_id}")
    print(f"  inventory {lab.inventory_path}")
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
        alive = [p for p in st.get("pids", []) if os.path.exists(f"/proc/{p}")]
        spaces = [n for n in all_ns if n.startswith(prefix)]
        print(f"lab {st['lab_id']}: {len(spaces)} netns, {len(alive)}/{len(st.get('pids', []))} processes alive")
        for name, c in st.get("clusters", {}).items():
            print(f"  cluster {name}: pod CIDR {c['pod_cidr']}, {len(c['nodes'])} nodes, "
                  f"{sum(len(n['pods']) for n in c['nodes'])} pods, kubeconfig {c['kubeconfig']}")
        if st.get("inventory"):
            print(f"  inventory {st['inventory']}")
    orphans = [n for n in all_ns if names.is_lab_name(n) and not any(n.startswith(s["prefix"]) for s in states)]
    if orphans:
        print(f"orphan lab netns (make lab-clean removes them): {' '.join(orphans)}")
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
    return 0


def cmd_clean(_args) -> int:
    results = cleanup.clean_all()
    n = sum(len(r["netns"]) for r in results)
    p = sum(len(r["processes"]) for r in results)
    s = sum(len(r["sockets"]) for r in results)
    d = sum(len(r["dirs"]) for r in results)
    print(f"lab-clean: removed {n} netns, {p} processes, {s} wireguard sockets, {d} state dirs")
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
    down = sub.add_parser("down")
    down.add_argument("lab_id", nargs="?")
    down.add_argument("--all", action="store_true")
    sub.add_parser("status")
    sub.add_parser("clean")
    sub.add_parser("demo")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("the lab needs root (network namespaces)", file=sys.stderr)
        return 2
    return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "clean": cmd_clean, "demo": cmd_demo}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
