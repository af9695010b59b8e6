"""NAT table with 10,000 1:1 remaps (20,000 map elements: each remap translates both ways), in a
throwaway netns: atomic apply, idempotent rerun, and the same ruleset through a raw `nft -f`."""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 10_000
N_TUNNELS = 100
RUNS = 5


def remaps(n, shift=0):
    """n distinct /24s: 10.0.0.0/24... remapped into 100.64.0.0/10 (shift moves every target)."""
    out = []
    for i in range(n):
        j = (i + shift) % 16384
        out.append({"original": f"10.{i >> 8}.{i & 255}.0/24", "remapped": f"100.{64 + (j >> 8)}.{j & 255}.0/24",
                    "iifname": "wg0", "oifname": "wg0"})
    return out


def tunnels(n):
    """n tunnels wg0..: every remote cluster uses 10.243.0.0/16, each reached at its own 10.x.0.0/16 inside 10.128.0.0/9."""
    return [{"interface": f"wg{i}", "mark": 0x4b00 + i, "remote_original": "10.243.0.0/16",
             "remote_remapped": f"10.{128 + i}.0.0/16"} for i in range(n)]


def _median(fn, runs=RUNS):
    times = []
    result = None
    for _run in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def inner():
    """Runs inside the benchmark netns."""
    sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
    from ansible_collections.liqo.fabric.plugins.module_utils.nft import nat_table as nt
    from ansible_collections.liqo.fabric.plugins.module_utils.nft.client import Nft
    from tests.benchmarks.report import figure, ratio

    spec_a = {"name": "lfab_bench_nat", "remaps": remaps(N)}
    spec_b = {"name": "lfab_bench_nat", "remaps": remaps(N, shift=1)}
    with Nft() as nft:
        t_build, table = _median(lambda: nt.build_table(spec_a))
        buffer = nt.replace_commands(table)
        t_txn, _result = _median(lambda: nft.run(buffer))

        def flip():
            flip.n += 1
            res = nt.ensure(spec_b if flip.n % 2 else spec_a, nft=nft)
            assert res["changed"], "every alternate run changes 10,000 remaps"
        flip.n = 0
        t_change, _result = _median(flip)
        nt.ensure(spec_a, nft=nft)
        t_idem, res = _median(lambda: nt.ensure(spec_a, nft=nft))
        assert res["changed"] is False, "idempotent rerun must not change anything"
        t_read, _result = _median(lambda: nt.read_table(nft, "ip", "lfab_bench_nat"))
        assert nt.read_table(nft, "ip", "lfab_bench_nat") == table

        # same content with one rule per remap instead of two interval maps
        saved = nt.MAP_MIN_ENTRIES
        nt.MAP_MIN_ENTRIES = N + 1
        try:
            rules_buffer = nt.replace_commands(nt.build_table(spec_a))
        finally:
            nt.MAP_MIN_ENTRIES = saved
        t_rules_txn, _result = _median(lambda: nft.run(rules_buffer))
        nft.run(nt.delete_commands("ip", "lfab_bench_nat"))

    def nft_f(text):
        return lambda: subprocess.run(["nft", "-f", "-"], input=text, text=True, check=True, capture_output=True)
    t_nft_f, _result = _median(nft_f(buffer))
    t_nft_f_rules, _result = _median(nft_f(rules_buffer))
    t_cli_idem, res = _median(lambda: nt.ensure(spec_a, backend="nft"), runs=3)
    assert res["changed"] is False and res["backend"] == "nft"
    with Nft() as nft:
        nft.run(nt.delete_commands("ip", "lfab_bench_nat"))

    # tunnels: one per peered cluster (8 rules each); 100 peers, all with the same overlapping pod CIDR
    spec_t = {"name": "lfab_bench_nat", "remaps": remaps(N), "tunnels": tunnels(N_TUNNELS)}
    with Nft() as nft:
        t_tun_build, table_t = _median(lambda: nt.build_table(spec_t))

        def from_scratch():
            nft.run(nt.delete_commands("ip", "lfab_bench_nat"))  # the table exists: left by the previous step
            res = nt.ensure(spec_t, nft=nft)
            assert res["changed"]
        nt.ensure(spec_a, nft=nft)
        t_tun_apply, _result = _median(from_scratch)
        t_tun_idem, res = _median(lambda: nt.ensure(spec_t, nft=nft))
        assert res["changed"] is False, "idempotent rerun with tunnels must not change anything"
        nft.run(nt.delete_commands("ip", "lfab_bench_nat"))
    t_plain_idem = t_idem

    print(f"  {N} remaps (both directions) = 2 map rules, {2 * N} map elements, buffer {len(buffer) // 1024} KiB; "
          f"median of {RUNS}", flush=True)
    figure("validate + build canonical table (10k remaps)", t_build, "s")
    figure("atomic apply: one libnftables transaction (replace table)", t_txn, "s", target=0.3)
    figure("raw `nft -f` of the same buffer", t_nft_f, "s")
    ratio("libnftables transaction / raw nft -f", t_txn, t_nft_f)
    figure("full reconcile with change (read JSON + compare + apply)", t_change, "s")
    ratio("full reconcile with change / raw nft -f", t_change, t_nft_f)
    figure("idempotent rerun (read JSON + compare, 0 writes)", t_idem, "s")
    figure("  of which: kernel read-back as JSON + canonicalise", t_read, "s")
    figure("idempotent rerun through the nft command (fallback backend)", t_cli_idem, "s")
    figure("one rule per remap (20k rules): libnftables transaction", t_rules_txn, "s")
    figure("one rule per remap (20k rules): raw nft -f", t_nft_f_rules, "s")
    ratio("maps / one rule per remap (libnftables transaction)", t_txn, t_rules_txn)
    print(f"  + {N_TUNNELS} tunnels ({table_t.rule_count - 2} tunnel rules) on top of the {N} remaps", flush=True)
    figure("validate + build canonical table (10k remaps + tunnels)", t_tun_build, "s")
    figure("delete + reconcile from scratch (10k remaps + tunnels)", t_tun_apply, "s")
    figure("idempotent rerun (10k remaps + tunnels, 0 writes)", t_tun_idem, "s")
    ratio("idempotent rerun: with tunnels / remaps only", t_tun_idem, t_plain_idem)


def run():
    sys.path.insert(0, ROOT)
    from tests.lab import names, netns

    ns = f"{names.lab_prefix(names.new_lab_id())}-bnat"
    netns.create_netns([ns])
    try:
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "tests.benchmarks.bench_nat_table", "--inner"],
                       cwd=ROOT, env=env, check=True, timeout=600)
    finally:
        netns.delete_netns([ns])


if __name__ == "__main__":
    if sys.argv[1:] == ["--inner"]:
        inner()
    else:
        run()
