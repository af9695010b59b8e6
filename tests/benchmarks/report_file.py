"""The report of a `make bench` run: one markdown file, build/reports/benchmarks.md unless LIQO_FABRIC_BENCH_REPORT
names another, with the machine the run had and every figure and ratio it printed (report.py's rows), by bench module.
The figures of different machines and days differ a lot (docs/benchmarks.md): the header says what to compare with."""
import os
import platform
import re
from typing import NamedTuple, Optional

# importing tests.conftest puts COLLECTIONS on sys.path
from tests.conftest import ROOT, COLLECTIONS  # noqa: F401  pylint: disable=unused-import

from ansible_collections.liqo.fabric.plugins.module_utils.host.atomic_file import write_atomic  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.liqo.fabric.plugins.module_utils.wireguard import go_version  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_PATH = os.path.join(ROOT, "build", "reports", "benchmarks.md")


class BenchRun(NamedTuple):
    name: str
    seconds: float
    error: Optional[str]   # when run() raised: the exception's type and the last line of its message


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _kernel_modules(*names):
    """Whether the running kernel has each module. Without /lib/modules/<release> (a VM booted from a kernel outside
    its disk) a built-in module without parameters is nowhere to be seen: then the answer is unknown, not no."""
    base = os.path.join("/lib/modules", os.uname().release)
    dep, builtin = _read(os.path.join(base, "modules.dep")), _read(os.path.join(base, "modules.builtin"))
    out = []
    for name in names:
        if os.path.isdir(f"/sys/module/{name}"):
            has = "yes"
        elif not dep:
            has = "unknown"
        elif re.search(rf"/{name}\.ko\b", builtin):
            has = "yes (built in)"
        else:
            has = "yes (not loaded)" if re.search(rf"/{name}\.ko(\.\w+)?:", dep) else "no"
        out.append(f"{name} {has}")
    return ", ".join(out) + ("" if dep else f" (no {base}/modules.dep)")


def machine():
    """(label, value) pairs: what the run's figures depend on."""
    cpuinfo, meminfo = _read("/proc/cpuinfo"), _read("/proc/meminfo")
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    mem = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.M)
    try:
        distribution = platform.freedesktop_os_release().get("PRETTY_NAME", "unknown")
    except OSError:
        distribution = "unknown"
    try:
        from ansible.release import __version__ as ansible_core  # pylint: disable=import-outside-toplevel
    except ImportError:
        ansible_core = "not installed"
    wg_go = go_version.probe()
    return [
        ("CPUs", f"{os.cpu_count()} x {model.group(1).strip() if model else 'unknown model'}"),
        ("memory", f"{int(mem.group(1)) / 1048576:.1f} GiB (MemTotal {mem.group(1)} kB)" if mem else "unknown"),
        ("kernel", os.uname().release),
        ("distribution", distribution),
        ("Python", platform.python_version()),
        ("ansible-core", ansible_core),
        ("wireguard-go", "not installed" if wg_go is None else f"{wg_go['version'] or 'unknown version'} ({wg_go['path']})"),
        ("kernel modules", _kernel_modules("wireguard", "geneve")),
    ]


FENCE = "~~~~~~"   # a fence of tildes: bench output prints backticks and pipes


def _cell(text):
    return str(text).strip().replace("|", "\\|")


def render(started, seconds, asked, runs, rows, facts, output=None):
    """The markdown: `started` (an aware UTC datetime) and `seconds` of the whole run, the bench names it was
    `asked` for (empty: all), its BenchRuns in order, report.ROWS, machine()'s facts and report.OUTPUT (what each
    bench printed besides its figures, as it printed it)."""
    output = output or {}
    names = ", ".join(r.name for r in runs) or "none"
    failed = [r.name for r in runs if r.error is not None]
    out = [f"# `make bench` of {started:%Y-%m-%d %H:%M} UTC", "",
           f"- started: {started:%Y-%m-%d %H:%M:%S} UTC",
           f"- duration: {seconds:.1f} s ({seconds / 60:.1f} min)",
           f"- benches: {names}" + (f" (asked for: {' '.join(asked)})" if asked else " (all)")]
    if failed:
        out.append(f"- failed: {', '.join(failed)}")
    out += [f"- {label}: {value}" for label, value in facts]
    for run in runs:
        head = f"## {run.name} ({run.seconds:.1f} s)"
        out += ["", head if run.error is None else f"{head}: FAILED with {run.error}", ""]
        got, printed = rows.get(run.name, []), output.get(run.name, [])
        if not got and not printed:
            out.append("Nothing printed.")
        if got:
            out += ["| figure | value | unit | target |", "|---|---:|---|---|"]
            out += [f"| {_cell(r.figure)} | {r.value:.3f} | {_cell(r.unit)} | {_cell(r.target)} |" for r in got]
        if printed:
            out += ["", "Also printed:", "", FENCE + "text", *printed, FENCE]
    return "\n".join(out) + "\n"


def write(started, seconds, asked, runs, rows, output=None):
    """Writes the report whole (a reader never sees half of one) and returns its path."""
    path = os.environ.get("LIQO_FABRIC_BENCH_REPORT") or DEFAULT_PATH
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(path, render(started, seconds, asked, runs, rows, machine(), output), mode=0o644)
    return path
