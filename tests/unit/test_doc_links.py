"""The user documentation's relative links resolve (file and #anchor), and it speaks of the project as it is (no
tracker numbers, no work sessions of its developers; WireGuard's sessions are named as WireGuard names them)."""
import glob
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
DOCS = sorted(["README.md", "CONTRIBUTING.md"]
              + [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _text(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def _anchors(path):
    """GitHub's heading ids: lowercased, punctuation dropped (hyphens and underscores kept), spaces to hyphens."""
    out = set()
    for line in FENCE.sub("", _text(path)).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    broken = []
    for target in LINK.findall(FENCE.sub("", _text(doc))):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _sep, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not os.path.exists(os.path.join(ROOT, resolved)):
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.endswith(".md") and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved}")
    assert not broken, broken


# the developers' own history: a tracker number, a work session ("session" alone is WireGuard's term and stays)
HISTORY = re.compile(r".*\b(?:issue [0-9]+|this session|earlier sessions?)\b.*", re.I)


@pytest.mark.parametrize("doc", DOCS)
def test_no_issue_numbers_or_work_sessions(doc):
    found = HISTORY.findall(_text(doc))
    assert not found, found


@pytest.mark.parametrize("line, banned", [
    ("fixed in issue 36", True),
    ("measured in this session", True),
    ("as an earlier session found", True),
    ("two earlier sessions", True),
    ("the probe restarts the WireGuard session of its peer", False),
    ("`sessions_restarted`, `session_error`, `wireguard_session.py`, `restart_session`", False),
    ("a hold on their session restarts", False),
])
def test_the_history_check_bans_work_sessions_not_the_word_session(line, banned):
    assert bool(HISTORY.search(line)) is banned
