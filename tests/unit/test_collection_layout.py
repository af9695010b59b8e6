"""The collection as Ansible's tooling sees it: meta/runtime.yml's action group and ansible-core range, every role's
meta/argument_specs.yml against its defaults, no Galaxy dependencies, and what the built tarball ships."""
import ast
import glob
import os
import re
import subprocess
import tarfile

import pytest
import yaml
from ansible.release import __version__ as ansible_core_version
from packaging.specifiers import SpecifierSet

from tests.ansible_run import ROOT, VENV_BIN, ansible_env

ROLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "roles", "*")))


def load(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return yaml.safe_load(f)


def module_doc(path):
    text = open(path, encoding="utf-8").read()
    return yaml.safe_load(re.search(r'^DOCUMENTATION = r?"""(.*?)^"""', text, re.S | re.M).group(1))


def test_kube_action_group_is_every_module_that_reaches_a_cluster():
    """group/liqo.fabric.kube lists exactly the modules that take the kube doc fragment (kubeconfig, context)."""
    kube = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py"))
            if "liqo.fabric.kube" in module_doc(p).get("extends_documentation_fragment", [])}
    group = load("meta", "runtime.yml")["action_groups"]["kube"]
    assert len(kube) >= 10 and sorted(group) == group
    assert set(group) == kube, f"missing {sorted(kube - set(group))}, not kube modules {sorted(set(group) - kube)}"


def matrix_versions():
    """The ansible-core releases `make matrix` runs: hack/matrix/core-*.txt and the suite's own pin."""
    pins = [os.path.join(ROOT, "requirements-dev.txt")] + glob.glob(os.path.join(ROOT, "hack", "matrix", "core-*.txt"))
    return sorted((re.search(r"^ansible-core==(\S+)$", open(p, encoding="utf-8").read(), re.M).group(1) for p in pins),
                  key=lambda v: tuple(int(n) for n in v.split(".")))


def test_requires_ansible_is_the_lowest_version_the_matrix_runs():
    """requires_ansible is the matrix's lowest minor release with no upper bound (newer ones run the plain path), the
    roles say the same, and each matrix venv pins a distinct minor release."""
    requires = load("meta", "runtime.yml")["requires_ansible"]
    versions = matrix_versions()
    minors = [".".join(v.split(".")[:2]) for v in versions]
    assert len(set(minors)) == len(minors) >= 4, versions
    assert requires == ">=%s.0" % minors[0]
    spec = SpecifierSet(requires)
    assert ansible_core_version in spec and all(v in spec for v in versions)
    for role in ROLES:  # the roles say the same
        assert str(load("roles", role, "meta", "main.yml")["galaxy_info"]["min_ansible_version"]) == minors[0]


def test_no_galaxy_dependencies_and_no_collection_other_than_builtin():
    assert not load("galaxy.yml").get("dependencies")
    other = re.compile(r"\b(community\.\w+|ansible\.(posix|utils|netcommon)|kubernetes\.core)\.\w+")
    found = []
    for path in (glob.glob(os.path.join(ROOT, "roles", "**", "*.yml"), recursive=True)
                 + glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True)
                 + glob.glob(os.path.join(ROOT, "plugins", "**", "*.yml"), recursive=True)):
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if other.search(line.split("#", 1)[0]):
                found.append(f"{os.path.relpath(path, ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("role", ROLES)
def test_role_argument_specs_document_every_default(role):
    """Every default is an option of the main entry point (and the reverse), role-prefixed, with the same
    literal default; ansible-doc prints the spec."""
    prefix = role + "_"
    defaults = load("roles", role, "defaults", "main.yml") or {}
    options = load("roles", role, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options), (sorted(set(defaults) - set(options)), sorted(set(options) - set(defaults)))
    assert all(name.startswith(prefix) for name in options), [n for n in options if not n.startswith(prefix)]
    for name, value in defaults.items():
        if not (isinstance(value, str) and "{{" in value):  # templated defaults are described, not repeated
            assert options[name].get("default") == value, (name, options[name].get("default"), value)
        assert options[name].get("description"), name
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-doc"), "-t", "role", f"liqo.fabric.{role}"],
                          capture_output=True, text=True, env=ansible_env(), check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ENTRY POINT: main" in re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert all(name in proc.stdout for name in options)


# Never in the tarball: the suite, the lab, build and CI files. Always: what install/connect/the controller use.
NOT_SHIPPED = ("tests/", "molecule/", "hack/", "deploy/image/", ".ci/", "changelogs/fragments/", "build/", ".venv/",
               "Makefile", "pytest.ini", "requirements-test.txt", "requirements-dev.txt", "ansible.cfg", ".ansible-lint",
               ".gitignore", "CONTRIBUTING.md")
# the execution-environment metadata (meta/execution-environment.yml and the two files it names) ships: ansible-builder
# reads it from the installed collection
SHIPPED = ("meta/runtime.yml", "meta/execution-environment.yml", "requirements.txt", "bindep.txt", "README.md",
           "playbooks/connect.yml", "plugins/modules/k8s_apply.py",
           "plugins/module_utils/kube/client.py", "controller/__main__.py", "controller/watches.yaml",
           "deploy/crds/networking.liqo.io_gatewayservers.yaml", "deploy/templates/wireguard-server.yaml",
           "changelogs/config.yaml", "plugins/plugin_utils/speed/ansiballz_cache.py",
           *[f"roles/{r}/meta/argument_specs.yml" for r in ROLES])


def test_built_tarball_ships_the_collection_only(tmp_path):
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-galaxy"), "collection", "build", "--output-path",
                           str(tmp_path), ROOT], capture_output=True, text=True, env=ansible_env(), check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with tarfile.open(next(tmp_path.glob("liqo-fabric-*.tar.gz"))) as tar:
        files = {m.name for m in tar.getmembers() if m.isfile() or m.issym()}
        # the modules' action plugins stay symlinks to a shared plugin shipped beside them (test_action_plugins.py)
        links = {m.name: os.path.join(os.path.dirname(m.name), m.linkname) for m in tar.getmembers() if m.issym()}
    assert links and all(name.startswith("plugins/action/") and os.path.dirname(target) == os.path.dirname(name)
                         and target in files for name, target in links.items()), links
    shipped = [f for f in files if f.startswith(tuple(p for p in NOT_SHIPPED if p.endswith("/"))) or f in NOT_SHIPPED
               or "__pycache__" in f or f.endswith(".pyc")]
    assert not shipped, sorted(shipped)
    assert set(SHIPPED) <= files, sorted(set(SHIPPED) - files)
    # everything git tracks under the shipped trees is there (build_ignore drops no runtime file)
    tracked = subprocess.run(["git", "ls-files", "plugins", "roles", "playbooks", "controller", "deploy/crds",
                              "deploy/templates", "deploy/controller"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert tracked and set(tracked) <= files, sorted(set(tracked) - files)


def test_no_caller_sets_the_old_node_overlay_variables():
    """node_overlay's variables were overlay_* before they took the role prefix: a caller still setting one would be
    ignored silently (the role would read its default, e.g. the local kubeconfig for the remote cluster)."""
    old = re.compile(r"(?<![\w.])overlay_(kubeconfig|node_name|gateway_hosts|active_gateway|link_type|mtu|"
                     r"masquerade_bypass|table|state|skip_unchanged|record_name|record_namespace|applied|planned|"
                     r"reuse_plan)\b(?!\()")
    files = subprocess.run(["git", "ls-files", "*.yml", "*.yaml", "*.py", "*.md", "*.j2"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    found = [f"{path}:{n}: {line.strip()}" for path in files if not path.startswith("changelogs/")
             for n, line in enumerate(open(os.path.join(ROOT, path), encoding="utf-8"), 1) if old.search(line)]
    assert not found, "\n".join(found)


def _sources(*trees):
    for tree in trees:
        for dirpath, _dirs, names in os.walk(os.path.join(ROOT, tree)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        yield os.path.relpath(path, ROOT), f.read()


def test_one_kubernetes_client_for_the_modules_and_the_controller():
    """One REST client (module_utils/kube/rest.py) for both; the old second client's dead names are gone."""
    client = re.compile(r"^\s*(import http\.client|from http import client|import urllib\.request|import urllib3|"
                        r"from urllib3|from kubernetes import client|from kubernetes\.client import ApiClient)", re.M)
    opened = [path for path, text in _sources("plugins", "controller") if client.search(text)]
    assert opened == ["plugins/module_utils/kube/rest.py"], opened
    dead = [path for path, text in _sources("plugins", "controller", "tests")
            if re.search(r"\b(CORE_PLURALS|KUBERNETES_IMPORT_ERROR)\b", text) and not path.endswith(
                "test_collection_layout.py")]
    assert not dead, dead
    with open(os.path.join(ROOT, "controller", "kubeapi.py"), encoding="utf-8") as f:
        assert "from controller.library import kube_rest" in f.read()
    with open(os.path.join(ROOT, "controller", "library.py"), encoding="utf-8") as f:
        assert "from ansible_collections.liqo.fabric.plugins.module_utils.kube import rest as kube_rest" in f.read()


def test_module_utils_is_subpackages_whose_init_is_a_docstring_only():
    """plugins/module_utils holds one subpackage per family and no loose file; each __init__.py says what the family
    holds and imports nothing (a module run through AnsiballZ imports every package on its way)."""
    top = os.path.join(ROOT, "plugins", "module_utils")
    loose = sorted(n for n in os.listdir(top) if n.endswith(".py"))
    assert not loose, loose
    for family in sorted(n for n in os.listdir(top) if os.path.isdir(os.path.join(top, n)) and n != "__pycache__"):
        with open(os.path.join(top, family, "__init__.py"), encoding="utf-8") as f:
            body = ast.parse(f.read()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), family


def test_the_controller_reaches_module_utils_through_controller_library_only():
    """controller/library.py is the one controller file that imports the collection; the others import its modules
    from there (`from controller.library import kube_client`) and call none of their private (_name) functions."""
    from controller import library  # pylint: disable=import-outside-toplevel
    direct = [path for path, text in _sources("controller")
              if "ansible_collections.liqo.fabric.plugins" in text and path != "controller/library.py"]
    assert not direct, direct
    private, unknown = [], []
    for path, text in _sources("controller"):
        for names in re.findall(r"^from controller\.library import (.+)$", text, re.M):
            for item in names.split(","):
                name, _as, alias = item.strip().partition(" as ")
                if name not in library.__all__:
                    unknown.append(f"{path}: {name}")
                private += [f"{path}: {m}" for m in re.findall(r"\b%s\._\w+" % re.escape(alias or name), text)]
    assert not unknown, unknown
    assert not private, private


def test_readme_configuration_table_is_short():
    """The README's configuration table has short cells; the detail is in docs/."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("### Configuration"):]
    section = section[:section.index("\n#")]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(rows) >= 3
    long_cells = [c.strip() for row in rows for c in row.strip("|").split("|") if len(c.strip()) > 160]
    assert not long_cells, long_cells
    assert "docs/configuration.md" in section
