"""plugins/plugin_utils/speed/ansiballz_cache.py: payload zips imported through the hook compile once per machine.

Each case runs a fresh `python -S` (no site, so no .pth: the hook is installed by the test's own code, from a copy
made as `make setup` makes it) that imports a package from a zip named like an AnsiballZ payload and reports how many times compile() ran on a
member of the zip, which importer loaded it and the file name a traceback shows.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT

SPEED = os.path.join(ROOT, "plugins", "plugin_utils", "speed")
PROBE = r"""
import builtins, json, sys, traceback
sys.path.insert(0, {site!r})
from liqo_fabric_speed import ansiballz_cache
ansiballz_cache.install()
compiles = []
_compile = builtins.compile
def counting(source, filename, *a, **k):
    if ".zip" in str(filename):
        compiles.append(str(filename))
    return _compile(source, filename, *a, **k)
builtins.compile = counting
sys.path.insert(0, {zip!r})
import pkg.mod
try:
    pkg.mod.boom()
except ValueError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1].filename
print(json.dumps({{"answer": pkg.mod.answer(), "compiles": len(compiles), "where": where,
                  "loader": type(pkg.mod.__loader__).__name__}}))
"""


def make_payload(directory, name="ansible_liqo.fabric.test_payload.zip", answer=42):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg/mod.py", f"def answer():\n    return {answer}\n\n\ndef boom():\n    raise ValueError('x')\n")
    return path


def install(site):
    """The hook's files as `make setup` puts them into a venv's site-packages: the package liqo_fabric_speed."""
    package = os.path.join(site, "liqo_fabric_speed")
    os.makedirs(package, exist_ok=True)
    open(os.path.join(package, "__init__.py"), "w", encoding="utf-8").close()
    for name in ("switch.py", "ansiballz_cache.py"):
        shutil.copy(os.path.join(SPEED, name), package)
    return site


def run(zip_path, cache, home=None):
    env = {k: v for k, v in os.environ.items() if k != "LIQO_FABRIC_ANSIBALLZ_CACHE"}
    env["LIQO_FABRIC_ANSIBALLZ_CACHE"] = cache
    if home:  # where the default cache (~/.cache/liqo-fabric/ansiballz) would go
        env["HOME"] = str(home)
    site = install(os.path.join(os.path.dirname(zip_path), "site"))
    proc = subprocess.run([sys.executable, "-S", "-c", PROBE.format(site=site, zip=zip_path)],
                          capture_output=True, text=True, env=env, timeout=60, check=True)
    return json.loads(proc.stdout)


def entries(cache):
    return sorted(e for e in os.listdir(cache) if not e.endswith(".tmp")) if os.path.isdir(cache) else []


def test_second_run_from_another_payload_compiles_nothing(tmp_path):
    cache = str(tmp_path / "cache")
    first = run(make_payload(tmp_path / "run1"), cache)
    assert first["answer"] == 42 and first["loader"] == "PayloadImporter"
    assert first["compiles"] == 2  # each member once (stock zipimport compiles every module twice)
    assert len(entries(cache)) == 2
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(os.path.join(cache, e)).st_mode) == 0o600 for e in entries(cache))

    second_zip = make_payload(tmp_path / "run2")
    second = run(second_zip, cache)
    assert second["answer"] == 42 and second["compiles"] == 0
    assert second["where"] == os.path.join(second_zip, "pkg", "mod.py")  # not the first run's temp path
    assert len(entries(cache)) == 2


def test_changed_source_is_compiled_again(tmp_path):
    cache = str(tmp_path / "cache")
    run(make_payload(tmp_path / "run1"), cache)
    changed = run(make_payload(tmp_path / "run2", answer=7), cache)
    assert changed["answer"] == 7 and changed["compiles"] == 1  # only mod.py changed
    assert len(entries(cache)) == 3


def test_corrupt_entry_is_recompiled_and_replaced(tmp_path):
    cache = str(tmp_path / "cache")
    run(make_payload(tmp_path / "run1"), cache)
    for e in entries(cache):
        with open(os.path.join(cache, e), "wb") as f:
            f.write(b"\x00garbage")
    again = run(make_payload(tmp_path / "run2"), cache)
    assert again["answer"] == 42 and again["compiles"] == 2
    third = run(make_payload(tmp_path / "run3"), cache)
    assert third["compiles"] == 0


@pytest.mark.parametrize("mode", [0o777, 0o720])
def test_directory_writable_by_others_is_never_used(tmp_path, mode):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, mode)
    res = run(make_payload(tmp_path / "run1"), str(cache))
    assert res["answer"] == 42 and res["compiles"] == 2
    assert entries(str(cache)) == []


def test_off_disables_the_cache(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    first = run(make_payload(tmp_path / "run1"), "off", home)
    second = run(make_payload(tmp_path / "run2"), "off", home)
    assert first["answer"] == 42 and first["loader"] == "PayloadImporter"
    assert second["compiles"] == 2  # nothing was kept from the first run
    assert os.listdir(home) == [] and not (tmp_path / "off").exists()


def test_other_zips_keep_the_stock_importer(tmp_path):
    cache = str(tmp_path / "cache")
    res = run(make_payload(tmp_path / "run1", name="library.zip"), cache)
    assert res["loader"] == "zipimporter" and res["compiles"] == 4  # stock: twice per module
    assert entries(cache) == []


@pytest.mark.skipif(os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(ROOT, ".venv")),
                    reason="make setup installs the hook in .venv only (the other ansible-core venvs of make matrix run "
                           "module payloads the ordinary way)")
def test_setup_installed_the_hook_into_the_venv():
    """`make setup` puts the hook in the venv every module of the suite and the lab runs with."""
    out = subprocess.run([sys.executable, "-c", "import sys; print([getattr(h, '__name__', '') for h in sys.path_hooks])"],
                         capture_output=True, text=True, check=True).stdout
    assert "payload_hook" in out
