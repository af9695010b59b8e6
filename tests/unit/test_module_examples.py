"""Every module's EXAMPLES: valid YAML tasks, modules, lookups and filters written by FQCN and known to Ansible,
the whole set accepted by `ansible-playbook --syntax-check`; and the templated example that reads files
(k8s_apply's CRDs) evaluated for real on deploy/crds."""
import ast
import glob
import os
import shutil
import subprocess

import jinja2
import jinja2.nodes
import pytest
import yaml

from tests.ansible_run import ROOT, VENV_BIN, ansible_env

MODULES = sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
TASK_KEYWORDS = {"name", "register", "no_log", "loop", "loop_control", "when", "vars", "become", "delegate_to",
                 "changed_when", "failed_when", "check_mode", "diff", "notify", "tags", "environment", "until",
                 "retries", "delay", "run_once", "ignore_errors"}
JINJA_FILTERS = set(jinja2.Environment().filters)  # Jinja's own filters need no FQCN
ITEM_FILTERS = {"map", "select", "reject", "selectattr", "rejectattr"}


def examples(path):
    for node in ast.parse(open(path, encoding="utf-8").read()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "EXAMPLES":
            return node.value.value
    raise AssertionError(f"{path}: no EXAMPLES")


def templates(value):
    if isinstance(value, str):
        if "{{" in value or "{%" in value:
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from templates(v)
    elif isinstance(value, list):
        for v in value:
            yield from templates(v)


def plugin_names(template):
    """(kind, name) of every filter, test and lookup a template uses."""
    env = jinja2.Environment()
    for node in env.parse(template).find_all((jinja2.nodes.Filter, jinja2.nodes.Call, jinja2.nodes.Test)):
        if isinstance(node, jinja2.nodes.Filter):
            yield "filter", node.name
            if node.name in ITEM_FILTERS and node.args and isinstance(node.args[0], jinja2.nodes.Const):
                arg = node.args[0].value
                if node.name == "map":
                    yield "filter", arg
                elif node.name in ("select", "reject") or len(node.args) > 1:
                    yield "test", node.args[-1].value if node.name.endswith("attr") else arg
        elif isinstance(node, jinja2.nodes.Test):
            yield "test", node.name
        elif isinstance(node.node, jinja2.nodes.Name) and node.node.name in ("query", "lookup", "q"):
            if node.args and isinstance(node.args[0], jinja2.nodes.Const):
                yield "lookup", node.args[0].value


@pytest.mark.parametrize("path", MODULES, ids=[os.path.basename(p)[:-3] for p in MODULES])
def test_examples_use_known_plugins_by_fqcn(path):
    # pylint: disable-next=import-outside-toplevel
    from ansible.plugins.loader import filter_loader, init_plugin_loader, lookup_loader, test_loader
    init_plugin_loader()
    tasks = yaml.safe_load(examples(path))
    assert isinstance(tasks, list) and tasks, "EXAMPLES must be a list of tasks"
    module = "liqo.fabric." + os.path.basename(path)[:-3]
    assert any(module in task for task in tasks), f"no example calls {module}"
    for task in tasks:
        actions = [k for k in task if k not in TASK_KEYWORDS]
        assert len(actions) == 1, f"task {task.get('name')!r}: one module expected, got {actions}"
        assert actions[0].startswith(("liqo.fabric.", "ansible.builtin.")), f"{actions[0]}: not an FQCN the collection ships or needs"
        for template in templates(task):
            for kind, name in plugin_names(template):
                if kind == "filter" and name in JINJA_FILTERS or kind == "test" and name in jinja2.Environment().tests:
                    continue
                assert "." in name, f"{kind} {name!r} in {template!r}: write it by FQCN"
                loader = {"filter": filter_loader, "test": test_loader, "lookup": lookup_loader}[kind]
                found = loader.has_plugin(name) if kind == "lookup" else loader.get(name) is not None
                assert found, f"{kind} {name!r} in {template!r} does not exist"


def test_all_examples_pass_syntax_check(tmp_path):
    plays = [{"name": os.path.basename(p)[:-3], "hosts": "localhost", "gather_facts": False,
              "tasks": yaml.safe_load(examples(p))} for p in MODULES]
    book = tmp_path / "examples.yml"
    book.write_text(yaml.safe_dump(plays, sort_keys=False))
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "--syntax-check", str(book)],
                          capture_output=True, text=True, env=ansible_env(), cwd=tmp_path, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_k8s_apply_crd_example_reads_the_files(tmp_path):
    """The example's own vars and `definitions` template, evaluated on a copy of deploy/crds."""
    task = next(t for t in yaml.safe_load(examples(os.path.join(ROOT, "plugins", "modules", "k8s_apply.py")))
                if "crd_files" in t.get("vars", {}))
    shutil.copytree(os.path.join(ROOT, "deploy", "crds"), tmp_path / "crds")
    expected = len(glob.glob(os.path.join(ROOT, "deploy", "crds", "*.yaml")))
    play = [{"hosts": "localhost", "gather_facts": False, "vars": task["vars"], "tasks": [{
        "name": "The definitions evaluate to the CRDs",
        "ansible.builtin.assert": {"that": [
            f"({task['liqo.fabric.k8s_apply']['definitions'][2:-2]}) | length == {expected}",
            f"({task['liqo.fabric.k8s_apply']['definitions'][2:-2]}) | map(attribute='kind') | unique "
            "== ['CustomResourceDefinition']"]}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", "play.yml"],
                          capture_output=True, text=True, env=ansible_env(), cwd=tmp_path, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
