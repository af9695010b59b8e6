"""playbooks/: the entry points at the top, what the controller and other playbooks run in playbooks/internal/
(playbooks/README.md). Every top-level playbook is a documented entry point, every internal one is documented and
run by the controller or imported by a playbook, every reference to a playbook resolves, and the built collection
ships the folder and resolves each playbook by its FQCN."""
import glob
import os
import re
import subprocess
import tarfile

import pytest
import yaml

from controller import key_rotation, watchmap
from tests.ansible_run import ROOT, VENV_BIN, ansible_env

PLAYBOOKS = os.path.join(ROOT, "playbooks")
INTERNAL = os.path.join(PLAYBOOKS, "internal")
WATCH_MAPS = [os.path.join(ROOT, "controller", name) for name in ("watches.yaml", "watches-in-cluster.yaml")]
IMPORT_PLAYBOOK = ("ansible.builtin.import_playbook", "import_playbook")
TASK_FILE_KEYS = ("ansible.builtin.import_tasks", "import_tasks", "ansible.builtin.include_tasks", "include_tasks")


def names(folder):
    return sorted(os.path.basename(p)[:-len(".yml")] for p in glob.glob(os.path.join(folder, "*.yml")))


ENTRY_POINTS = names(PLAYBOOKS)
INTERNAL_BOOKS = names(INTERNAL)


def readme_rows(section):
    """First cells of the table under `## section` of playbooks/README.md."""
    text = open(os.path.join(PLAYBOOKS, "README.md"), encoding="utf-8").read()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [cells[1].strip() for cells in (line.split("|") for line in body.splitlines() if line.startswith("| `"))]


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or []


def imports(path):
    """(key, target as written, target resolved) of every import_playbook of a playbook and every literal
    import/include of a task file in its plays (relative to the playbook's folder, as Ansible resolves them)."""
    here = os.path.dirname(path)
    data = load(path)
    for play in data if isinstance(data, list) else []:
        if not isinstance(play, dict):
            continue
        for key in IMPORT_PLAYBOOK:
            if key in play:
                yield key, play[key], os.path.normpath(os.path.join(here, play[key]))
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            for task in flat(play.get(section) or []):
                for key in TASK_FILE_KEYS:
                    target = task.get(key)
                    if isinstance(target, str) and "{{" not in target:
                        yield key, target, os.path.normpath(os.path.join(here, target))


def flat(tasks):
    for task in tasks:
        yield task
        for part in ("block", "rescue", "always"):
            yield from flat(task.get(part) or [])


def every_playbook():
    return [os.path.join(PLAYBOOKS, n + ".yml") for n in ENTRY_POINTS] + [
        os.path.join(INTERNAL, n + ".yml") for n in INTERNAL_BOOKS]


def watch_map_playbooks():
    """{resolved path: [who runs it]} from both watch maps, read as the controller reads them."""
    found = {}
    for path in WATCH_MAPS:
        for entry in watchmap.load(path, PLAYBOOKS):
            for field in ("playbook", "finalizer_playbook"):
                if getattr(entry, field):
                    found.setdefault(os.path.normpath(getattr(entry, field)), []).append(
                        f"{os.path.basename(path)} {entry.kind} {field}")
    return found


def test_the_folders_hold_playbooks_only():
    assert len(ENTRY_POINTS) >= 15 and len(INTERNAL_BOOKS) >= 5
    assert sorted(os.listdir(PLAYBOOKS)) == sorted([n + ".yml" for n in ENTRY_POINTS] + ["README.md", "internal",
                                                                                         "tasks"])
    assert sorted(os.listdir(INTERNAL)) == [n + ".yml" for n in INTERNAL_BOOKS]
    assert not set(ENTRY_POINTS) & set(INTERNAL_BOOKS)


def test_every_top_level_playbook_is_a_documented_entry_point():
    documented = readme_rows("Entry points")
    assert all(re.fullmatch(r"`liqo\.fabric\.\w+`", cell) for cell in documented), documented
    documented = [cell.strip("`")[len("liqo.fabric."):] for cell in documented]
    assert len(documented) == len(set(documented)), documented
    assert sorted(documented) == ENTRY_POINTS, (sorted(set(ENTRY_POINTS) - set(documented)),
                                                sorted(set(documented) - set(ENTRY_POINTS)))


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_an_entry_point_header_gives_its_usage_by_fqcn(name):
    with open(os.path.join(PLAYBOOKS, name + ".yml"), encoding="utf-8") as f:
        header = "".join(line for line in f if line.startswith(("#", "---")))
    assert re.search(rf"ansible-playbook .*liqo\.fabric\.{name}\b", header), header


def test_every_internal_playbook_is_documented_and_run_by_the_controller_or_a_playbook():
    documented = readme_rows("Internal")
    assert all(re.fullmatch(r"`internal/\w+\.yml`", cell) for cell in documented), documented
    documented = [cell.strip("`")[len("internal/"):-len(".yml")] for cell in documented]
    assert sorted(documented) == INTERNAL_BOOKS, (sorted(set(INTERNAL_BOOKS) - set(documented)),
                                                  sorted(set(documented) - set(INTERNAL_BOOKS)))
    run_by = watch_map_playbooks()
    for path in every_playbook():
        for key, _target, resolved in imports(path):
            if key in IMPORT_PLAYBOOK:
                run_by.setdefault(resolved, []).append(os.path.relpath(path, ROOT))
    unrun = [n for n in INTERNAL_BOOKS if not run_by.get(os.path.join(INTERNAL, n + ".yml"))]
    assert not unrun, f"internal playbooks nothing runs: {unrun}"


def test_the_controller_runs_what_exists():
    """Every playbook of both watch maps exists (a missing one would only disable its entry, with a warning), and
    so does the key rotation's (an entry point beside the gateway kinds' playbook, internal in a cluster)."""
    missing = {path: who for path, who in watch_map_playbooks().items() if not os.path.isfile(path)}
    assert not missing, missing
    for path in WATCH_MAPS:
        gateway = next(e for e in watchmap.load(path, PLAYBOOKS) if e.kind == "GatewayServer" and e.playbook)
        rotation = key_rotation.KeyRotation(None, os.path.dirname(gateway.playbook)).playbook
        assert rotation == os.path.join(PLAYBOOKS, key_rotation.PLAYBOOK) and os.path.isfile(rotation)


def test_every_import_resolves():
    """import_playbook and literal task file includes of the playbooks (and the molecule scenarios' imports of them)
    name existing files, relative to the importing playbook's folder."""
    books = every_playbook() + sorted(glob.glob(os.path.join(ROOT, "molecule", "*", "*.yml")))
    broken = [f"{os.path.relpath(path, ROOT)}: {key}: {target}" for path in books
              for key, target, resolved in imports(path) if not os.path.isfile(resolved)]
    assert not broken, "\n".join(broken)


def test_no_mention_of_an_internal_playbook_at_its_old_place():
    """Docs, code and tests name an internal playbook by its path under playbooks/internal/ (or a bare name), never
    as playbooks/<name>.yml or liqo.fabric.<name>."""
    old = re.compile(r"(?<![\w/])playbooks/(%(n)s)\.yml|(?<![\w.])liqo\.fabric\.(%(n)s)\b" % {
        "n": "|".join(INTERNAL_BOOKS)})
    files = subprocess.run(["git", "ls-files", "*.md", "*.py", "*.yml", "*.yaml", "*.sh", "*.j2", "Makefile"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    found = [f"{path}:{n}: {line.strip()}" for path in files if not path.startswith("changelogs/")
             and os.path.isfile(os.path.join(ROOT, path))
             for n, line in enumerate(open(os.path.join(ROOT, path), encoding="utf-8"), 1) if old.search(line)]
    assert not found, "\n".join(found)


def test_the_built_collection_ships_internal_and_resolves_every_playbook_by_fqcn(tmp_path):
    """`ansible-galaxy collection build` keeps playbooks/internal/; unpacked as an installed collection, every entry
    point resolves as liqo.fabric.<name> and every internal playbook as liqo.fabric.internal.<name> (ansible-core
    maps the FQCN's middle parts to subfolders of playbooks/), and passes --syntax-check there."""
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-galaxy"), "collection", "build", "--output-path",
                           str(tmp_path), ROOT], capture_output=True, text=True, env=ansible_env(), check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    installed = tmp_path / "collections" / "ansible_collections" / "liqo" / "fabric"
    with tarfile.open(next(tmp_path.glob("liqo-fabric-*.tar.gz"))) as tar:
        files = {m.name for m in tar.getmembers() if m.isfile()}
        wanted = {"playbooks/README.md", *[f"playbooks/{n}.yml" for n in ENTRY_POINTS],
                  *[f"playbooks/internal/{n}.yml" for n in INTERNAL_BOOKS]}
        assert wanted <= files, sorted(wanted - files)
        tar.extractall(installed, filter="data")
    fqcns = {f"liqo.fabric.{n}": f"playbooks/{n}.yml" for n in ENTRY_POINTS}
    fqcns.update({f"liqo.fabric.internal.{n}": f"playbooks/internal/{n}.yml" for n in INTERNAL_BOOKS})
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")  # not this repository's (it points at build/)
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "--syntax-check", *fqcns], cwd=tmp_path,
                          capture_output=True, text=True, check=False, timeout=300, env=ansible_env({
                              "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "collections"),
                              "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
                              "ANSIBLE_HOME": str(tmp_path / "ansible-home")}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked = re.findall(r"^playbook: (\S+)$", proc.stdout, re.M)
    assert checked == [str(installed / path) for path in fqcns.values()], proc.stdout
