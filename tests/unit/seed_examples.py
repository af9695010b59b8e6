"""The YAML examples of the spec document ../shared/seeds/003_* (verbatim), for the CRD tests.

Read from the seed itself when it is present next to the repository, else from the verbatim copy in
tests/unit/data/seed_003_examples.yaml (test_crds checks that the two agree).
"""
import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COPY = os.path.join(ROOT, "tests", "unit", "data", "seed_003_examples.yaml")
SEED_GLOB = os.path.join(os.path.dirname(ROOT), "shared", "seeds", "003_*.txt")
_BLOCK = re.compile(r"^apiVersion: networking\.liqo\.io/.*?(?=\n\n|\Z)", re.M | re.S)


def seed_path():
    found = sorted(glob.glob(SEED_GLOB))
    return found[0] if found else None


def texts_from_seed(path):
    """Each YAML example of the seed, as text exactly as written there."""
    with open(path, encoding="utf-8") as f:
        return [m.group(0) + "\n" for m in _BLOCK.finditer(f.read())]


def texts_from_copy():
    with open(COPY, encoding="utf-8") as f:
        body = f.read()
    return [part.lstrip("\n") for part in body.split("---\n")[1:]]


def seed_example_texts():
    path = seed_path()
    return texts_from_seed(path) if path else texts_from_copy()


def seed_examples():
    """(text, object) pairs of every YAML example of the seed."""
    return [(t, yaml.safe_load(t)) for t in seed_example_texts()]


def seed_table_headers():
    """{resource: [column headers]} from the seed's `kubectl get <resource>.networking.liqo.io -A` outputs."""
    path = seed_path()
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    headers = {}
    for i, line in enumerate(lines[:-1]):
        m = re.match(r"^kubectl get (\w+)\.networking\.liqo\.io -A$", line.strip())
        if m:
            headers[m.group(1)] = re.split(r"\s{2,}", lines[i + 1].strip())
    return headers
