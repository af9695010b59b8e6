"""ansible-doc, of the ansible-core this venv holds (`make matrix` runs it on every version), finds and renders every
plugin of the collection and every entry point of its roles: what users read, and what Galaxy and Automation Hub
import."""
import ast
import glob
import json
import os
import subprocess

import pytest
import yaml

from tests.ansible_run import ROOT, VENV_BIN, ansible_env


def plugin_names(kind):
    """The plugins of one kind as files in the tree: one per .py file, or per name a filter file's filters() returns."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "plugins", kind, "*.py")):
        if kind != "filter":
            names.add(os.path.basename(path)[:-3])
            continue
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                ret = next(n for n in ast.walk(node) if isinstance(n, ast.Return))
                names |= {k.value for k in ret.value.keys}
    return {"liqo.fabric." + n for n in names}


def ansible_doc(*args):
    proc = subprocess.run([os.path.join(VENV_BIN, "ansible-doc"), "--json", *args], capture_output=True, text=True,
                          env=ansible_env(), check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # no warning or error but about ansible-core's own internal collections (2.20 warns that they have no version)
    problems = [ln for ln in proc.stderr.splitlines() if ("[WARNING]" in ln or "[ERROR]" in ln)
                and "/ansible/_internal/ansible_collections/" not in ln]
    assert not problems, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("kind,doc_type", [("modules", "module"), ("connection", "connection"),
                                           ("callback", "callback"), ("filter", "filter")])
def test_every_plugin_is_listed_and_documented(kind, doc_type):
    expected = plugin_names(kind)
    assert expected
    listed = ansible_doc("-t", doc_type, "-l", "liqo.fabric")
    assert set(listed) == expected, (sorted(set(listed) - expected), sorted(expected - set(listed)))
    docs = ansible_doc("-t", doc_type, *sorted(expected))
    assert set(docs) == expected
    for name, doc in docs.items():
        assert doc["doc"]["short_description"], name
        assert doc["doc"].get("description"), name
        if doc_type == "module":
            assert doc["examples"] and doc["return"] is not None, name


def test_every_role_entry_point_is_documented():
    roles = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
                   for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))
    assert roles and set(ansible_doc("-t", "role", "-l", "liqo.fabric")) == {"liqo.fabric." + r for r in roles}
    for role in roles:
        with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as f:
            specs = yaml.safe_load(f)["argument_specs"]
        doc = ansible_doc("-t", "role", "liqo.fabric." + role)["liqo.fabric." + role]
        assert set(doc["entry_points"]) == set(specs), role
        for entry, spec in specs.items():
            assert set(doc["entry_points"][entry]["options"]) == set(spec["options"]), (role, entry)
            assert doc["entry_points"][entry]["short_description"], (role, entry)
