"""`python -m tests.benchmarks` leaves one markdown report of its run: the real main() over a made-up package of two
benches, one printing figures and a ratio, one raising. The printed lines stay what report.py always printed."""
import re
import sys
import textwrap

import pytest

from tests.benchmarks import __main__ as bench_main
from tests.benchmarks import report

PACKAGE = "liqo_fabric_fake_benches"

FIGURES = """
from tests.benchmarks.report import figure, ratio


def run():
    figure("fake apply | one call", 0.25, "s", target=0.5)
    figure("fake throughput", 900, "Mbit/s", target=1400, lower_is_better=False)
    ratio("fake ours / baseline", 3.0, 2.0, target=1.2)
    print("  per fault:   detected   repaired")
    print("")
    print("  ```flush```        0.2 s      1.1 s")
"""

RAISES = """
from tests.benchmarks.report import figure


def run():
    figure("fake before the failure", 1.5, "ms")
    raise RuntimeError("the fake lab did not come up\\nits apiserver exited 1")
"""


def printed(name, value, unit, verdict=""):
    """A figure line as report.py printed it before the report existed (the format a change must keep)."""
    return f"  {name:<58} {value:>12.3f} {unit}" + (f"   target {verdict}" if verdict else "")


@pytest.fixture(name="benches")
def fixture_benches(tmp_path, monkeypatch):
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bench_zz_fake.py").write_text(textwrap.dedent(FIGURES))
    (pkg / "bench_zz_raises.py").write_text(textwrap.dedent(RAISES))
    (pkg / "helpers.py").write_text("raise AssertionError('not a bench: never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "reports" / "bench.md"
    monkeypatch.setenv("LIQO_FABRIC_BENCH_REPORT", str(out))
    yield out
    for mod in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[mod]
    report.ROWS.clear()


def test_report_of_a_whole_run(benches, capsys):
    assert bench_main.main(["tests.benchmarks"], package=PACKAGE) == 1
    stdout = capsys.readouterr().out.splitlines()
    assert stdout[:5] == ["", "=== bench_zz_fake",
                          printed("fake apply | one call", 0.25, "s", "< 0.5 s: met"),
                          printed("fake throughput", 900, "Mbit/s", ">= 1400 Mbit/s: MISSED"),
                          printed("fake ours / baseline", 1.5, "x", "<= 1.2: MISSED")]
    assert stdout[5:8] == ["  per fault:   detected   repaired", "", "  ```flush```        0.2 s      1.1 s"]
    assert re.fullmatch(r"--- bench_zz_fake: \d+\.\d s", stdout[8])
    assert stdout[9:12] == ["", "=== bench_zz_raises", printed("fake before the failure", 1.5, "ms")]
    assert re.fullmatch(r"--- bench_zz_raises: \d+\.\d s", stdout[12])
    assert stdout[13:] == ["", f"report: {benches}"]

    text = benches.read_text()
    assert re.search(r"^# `make bench` of \d{4}-\d\d-\d\d \d\d:\d\d UTC$", text, re.M)
    assert re.search(r"^- started: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", text, re.M)
    assert re.search(r"^- duration: \d+\.\d s \(\d+\.\d min\)$", text, re.M)
    assert "- benches: bench_zz_fake, bench_zz_raises (all)\n" in text
    assert "- failed: bench_zz_raises\n" in text
    for label in ("CPUs", "memory", "kernel", "distribution", "Python", "ansible-core", "wireguard-go", "kernel modules"):
        assert re.search(rf"^- {label}: \S", text, re.M), label
    assert re.search(r"^- CPUs: \d+ x ", text, re.M)
    assert re.search(rf"^- Python: {sys.version_info.major}\.{sys.version_info.minor}\.", text, re.M)

    fake = re.search(r"^## bench_zz_fake \(\d+\.\d s\)\n\n(.*?)(?=\n## |\Z)", text, re.M | re.S)
    assert fake, text
    assert fake.group(1).splitlines() == [
        "| figure | value | unit | target |",
        "|---|---:|---|---|",
        "| fake apply \\| one call | 0.250 | s | < 0.5 s: met |",
        "| fake throughput | 900.000 | Mbit/s | >= 1400 Mbit/s: MISSED |",
        "| fake ours / baseline | 1.500 | x | <= 1.2: MISSED |",
        "",
        "Also printed:",
        "",
        "~~~~~~text",
        "  per fault:   detected   repaired",
        "  ```flush```        0.2 s      1.1 s",
        "~~~~~~",
    ]
    failed = re.search(r"^## bench_zz_raises \(\d+\.\d s\): FAILED with RuntimeError: its apiserver exited 1\n\n(.*)\Z",
                       text, re.M | re.S)
    assert failed, text
    assert failed.group(1).splitlines()[2:] == ["| fake before the failure | 1.500 | ms |  |"]


def test_named_benches_only_and_the_header_says_so(benches, capsys):
    assert bench_main.main(["tests.benchmarks", "zz_fake"], package=PACKAGE) == 0
    assert "=== bench_zz_raises" not in capsys.readouterr().out
    text = benches.read_text()
    assert "- benches: bench_zz_fake (asked for: zz_fake)\n" in text
    assert "- failed:" not in text and "## bench_zz_raises" not in text and "## bench_zz_fake (" in text


def test_a_figure_outside_a_run_is_only_printed(capsys):
    report.ROWS.clear()
    report.figure("alone", 1.0, "s")
    assert capsys.readouterr().out == printed("alone", 1.0, "s") + "\n"
    assert not report.ROWS


def test_the_doc_page_is_written_below_its_marker_from_a_report(tmp_path, monkeypatch):
    """tests/benchmarks/doc.py: the page's own text stays; below the marker, the run's facts and every bench of the
    report under its topic, a bench of a topic that did not run said so; a bench in no topic is refused."""
    from tests.benchmarks import doc  # pylint: disable=import-outside-toplevel
    report_text = ("# `make bench` of 2026-11-28 16:00 UTC\n\n- started: 2026-11-28 16:00:00 UTC\n- CPUs: 2 x fake\n\n"
                   "## bench_routing (1.5 s)\n\n| figure | value | unit | target |\n|---|---:|---|---|\n"
                   "| 10k routes | 0.170 | s |  |\n\n"
                   "## bench_drift (258.2 s): FAILED with IndexError: list index out of range\n\nNothing printed.\n")
    report_path = tmp_path / "report.md"
    report_path.write_text(report_text)
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\nWhat the page says itself.\n\n{doc.MARKER}\n\nan older run's figures\n")
    monkeypatch.setattr(doc, "DOC", str(page))
    assert doc.main(["doc", str(report_path)]) == 0
    text = page.read_text()
    own, generated = text.split(doc.MARKER)
    assert own == "# Benchmarks\n\nWhat the page says itself.\n\n"
    assert "an older run's figures" not in generated
    assert "## The run\n\n- started: 2026-11-28 16:00:00 UTC\n- CPUs: 2 x fake\n" in generated
    blocks = re.split(r"^## ", generated, flags=re.M)[1:]
    assert [b.splitlines()[0] for b in blocks] == ["The run"] + [t for t, _names in doc.TOPICS]
    assert "### `bench_routing` (1.5 s)\n\n| figure | value | unit | target |" in generated
    assert "| 10k routes | 0.170 | s |  |" in generated
    assert "### `bench_drift` (258.2 s): FAILED with IndexError: list index out of range\n\nNothing printed." in generated
    assert "### `bench_wireguard`\n\nNot in this run." in generated
    with pytest.raises(SystemExit, match="bench_new"):
        doc.body(report_text + "\n## bench_new (1.0 s)\n\nNothing printed.\n")


def test_every_bench_module_has_a_topic_of_the_doc_page():
    """`make bench` runs every tests/benchmarks/bench_*.py and tests/benchmarks/doc.py refuses a report whose bench is
    in no topic: a new bench without its topic would fail the page's generation after a 30-minute run."""
    import glob  # pylint: disable=import-outside-toplevel
    import os  # pylint: disable=import-outside-toplevel
    from tests.benchmarks import doc  # pylint: disable=import-outside-toplevel
    modules = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(os.path.dirname(doc.__file__), "bench_*.py"))}
    topics = [name for _topic, names in doc.TOPICS for name in names]
    assert sorted(topics) == sorted(modules)
