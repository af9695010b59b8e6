"""docs/benchmarks.md from the report of one `make bench` run: `python -m tests.benchmarks.doc [REPORT]` (default
build/reports/benchmarks.md) keeps the page's text down to its MARKER line and writes the run's facts and every
bench's figures below it, grouped by topic (TOPICS: the sections other pages link to)."""
import os
import re
import sys

# importing tests.conftest puts the collection on sys.path
from tests.conftest import ROOT

from ansible_collections.liqo.fabric.plugins.module_utils.host.atomic_file import write_atomic

MARKER = "<!-- below: written by python -m tests.benchmarks.doc from one make bench report -->"
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
REPORT = os.path.join(ROOT, "build", "reports", "benchmarks.md")
TOPICS = [
    ("Dataplane building blocks", ["bench_routing", "bench_nat_table", "bench_wireguard", "bench_ipam",
                                   "bench_ipam_concurrency"]),
    ("The lab", ["bench_lab"]),
    ("`connect`, throughput and failover on a small lab", ["bench_gateway", "bench_k8s_apply", "bench_node_repoint"]),
    ("The pod path in detail", ["bench_overlay"]),
    ("Scale: 2 clusters of 100 light nodes, the agentless path", ["bench_scale", "bench_scale_failover"]),
    ("The controller", ["bench_controller", "bench_controller_scale", "bench_drift", "bench_webhook"]),
    ("Key rotation and live health", ["bench_key_rotation", "bench_peer_health"]),
    ("Path MTU", ["bench_path_mtu"]),
    ("In the cluster: real kubelets", ["bench_in_cluster", "bench_scale_in_cluster", "bench_rolling_upgrade"]),
]


def sections(report):
    """(the run's facts: its "- label: value" lines, {bench: (heading, body)}) of a report_file.render text."""
    head, *parts = re.split(r"^## ", report, flags=re.M)
    benches = {}
    for part in parts:
        title, _sep, body = part.partition("\n")
        benches[title.split()[0]] = (title, body.strip())
    return [line for line in head.splitlines() if line.startswith("- ")], benches


def body(report):
    """The generated part: the run, then each topic's benches; a bench of the report in no topic is an error."""
    facts, benches = sections(report)
    out = ["## The run", "", *facts, ""]
    for topic, names in TOPICS:
        out += [f"## {topic}", ""]
        for name in names:
            if name in benches:
                title, text = benches.pop(name)
                out += [f"### {title.replace(name, f'`{name}`', 1)}", "", text, ""]
            else:
                out += [f"### `{name}`", "", "Not in this run.", ""]
    if benches:
        raise SystemExit(f"benches in no topic of tests/benchmarks/doc.py: {', '.join(sorted(benches))}")
    return "\n".join(out).rstrip() + "\n"


def main(argv):
    with open(argv[1] if len(argv) > 1 else REPORT, encoding="utf-8") as f:
        report = f.read()
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    if MARKER not in doc:
        raise SystemExit(f"{DOC}: no line {MARKER!r} to write below")
    write_atomic(DOC, doc.split(MARKER)[0] + MARKER + "\n\n" + body(report), mode=0o644)
    print(DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
