# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The declarative watch map (watches.yaml): which kinds are watched and which playbook owns each.

Pure data + validation; every error names the entry and the field (`watches[2].related[0].kind: ...`).
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import string
from typing import Any, Callable, Dict, List, Optional

import yaml


@dataclasses.dataclass(frozen=True)
class Resource:
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    has_status: bool  # status subresource with conditions the controller may write

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: Optional[str] = None, name: Optional[str] = None, sub: Optional[str] = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if sub:
                base += f"/{sub}"
        return base


_NET = ("networking.liqo.io", "v1beta1")
RESOURCES: Dict[str, Resource] = {r.kind: r for r in (
    Resource("Configuration", *_NET, "configurations", True, True),
    Resource("GatewayServer", *_NET, "gatewayservers", True, True),
    Resource("GatewayClient", *_NET, "gatewayclients", True, True),
    Resource("Connection", *_NET, "connections", True, True),
    Resource("PublicKey", *_NET, "publickeies", True, False),  # sic: Liqo's plural; no status subresource
    Resource("WgGatewayServerTemplate", *_NET, "wggatewayservertemplates", True, False),
    Resource("WgGatewayClientTemplate", *_NET, "wggatewayclienttemplates", True, False),
    Resource("Node", "", "v1", "nodes", False, False),
    Resource("Pod", "", "v1", "pods", True, False),
    Resource("Secret", "", "v1", "secrets", True, False),
    Resource("Service", "", "v1", "services", True, False),
    Resource("ConfigMap", "", "v1", "configmaps", True, False),
    Resource("Event", "", "v1", "events", True, False),
    Resource("Lease", "coordination.k8s.io", "v1", "leases", True, False),
    Resource("DaemonSet", "apps", "v1", "daemonsets", True, False),
)}

TEMPLATE_FIELDS = {"cluster", "kind", "namespace", "name", "node"}
DEFAULT_KEY = "{cluster}/{kind}/{namespace}/{name}"
DEFAULT_INPUTS = ("spec", "metadata.labels")
MODES = ("controller", "node", "gateway")


class WatchMapError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Related:
    kind: str
    labels: tuple = ()          # match: same values of these labels (and the same namespace)
    ref: Optional[str] = None   # match: the owner's field (e.g. spec.serverTemplateRef) names the related object
    inputs: tuple = ("spec",)   # what of the related object enters the owner's input hash
    namespace: bool = False     # match: every object of the kind in the owner's namespace
    all: bool = False           # match: every object of the kind its informer lists (any namespace)


@dataclasses.dataclass(frozen=True)
class Drift:
    function: str
    period: float
    call: Callable = dataclasses.field(compare=False, repr=False, default=None)
    events: bool = True     # also check as the kernel reports a change (controller/engine/fault_events.py)


@dataclasses.dataclass(frozen=True)
class WatchEntry:
    kind: str
    resource: Resource
    playbook: Optional[str] = None           # path (absolute once loaded); None: watched for related/metrics only
    finalizer: Optional[str] = None          # finalizer name added on create
    finalizer_playbook: Optional[str] = None
    vars: dict = dataclasses.field(default_factory=dict)
    resync: float = 300.0
    key: str = DEFAULT_KEY
    lock: Optional[str] = None               # default: the key
    status: bool = False                     # write Ready/Reconciling/Degraded
    inputs: tuple = DEFAULT_INPUTS
    secrets: tuple = ()                      # fields naming Secrets of the same namespace ({name: x} or "x")
    related: tuple = ()
    drift: Optional[Drift] = None
    timeout: float = 600.0
    finalizer_timeout: float = 300.0
    modes: tuple = ("controller",)
    enabled: bool = True
    disabled_reason: str = ""
    label_selector: Optional[str] = None     # the kind's informer lists these only (and, in node mode, on every node)
    objects: bool = True                     # pass fabric_objects (the refs of the key's members) to the playbook
    # ((path, value or None), ...): an object is a member of its key only while every field is set (None) or equals
    # the value
    member_if: tuple = ()

    def is_member(self, obj: dict) -> bool:
        """False for an object the playbook cannot act on yet (a Pod without its IP): it is left out of its key, so
        its events start no run and it enters no hash until it qualifies."""
        for path, value in self.member_if:
            got = get_field(obj, path)
            if (got in (None, "", [], {})) if value is None else (str(got) != value):
                return False
        return True

    @property
    def grouped(self) -> bool:
        """One work key for many objects (the playbook reconciles all of them in one run)."""
        return "{name}" not in self.key

    def work_key(self, cluster: str, obj: dict, node: str = "") -> str:
        return self.key.format_map(_template_values(self, cluster, obj, node))

    def lock_key(self, cluster: str, obj: dict, node: str = "") -> str:
        return (self.lock or self.key).format_map(_template_values(self, cluster, obj, node))


def _template_values(entry: WatchEntry, cluster: str, obj: dict, node: str) -> dict:
    meta = obj.get("metadata") or {}
    return {"cluster": cluster, "kind": entry.kind, "namespace": meta.get("namespace") or "",
            "name": meta.get("name") or "", "node": node}


def _template(value, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise WatchMapError(f"{where}: {value!r} must be a non-empty string")
    try:
        fields = {part[1] for part in string.Formatter().parse(value) if part[1] is not None}
    except ValueError as exc:
        raise WatchMapError(f"{where}: {value!r} is not a valid template ({exc})") from exc
    bad = fields - TEMPLATE_FIELDS
    if bad:
        raise WatchMapError(f"{where}: {value!r} uses unknown field(s) {sorted(bad)} (known: {sorted(TEMPLATE_FIELDS)})")
    if "cluster" not in fields:
        raise WatchMapError(f"{where}: {value!r} must contain {{cluster}} (one process serves several clusters)")
    return value


def _number(value, where: str, lo: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < lo:
        raise WatchMapError(f"{where}: {value!r} must be a number >= {lo}")
    return float(value)


def _fields(value, where: str) -> tuple:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise WatchMapError(f"{where}: {value!r} must be a list of field paths like 'spec.secretRef'")
    return tuple(value)


def resolve_callable(spec: str, where: str) -> Callable:
    """'package.module:function' -> the function."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise WatchMapError(f"{where}: {spec!r} must look like 'package.module:function'")
    mod, func = spec.split(":")
    try:
        fn = getattr(importlib.import_module(mod), func)
    except (ImportError, AttributeError) as exc:
        raise WatchMapError(f"{where}: cannot import {spec!r}: {exc}") from exc
    if not callable(fn):
        raise WatchMapError(f"{where}: {spec!r} is not callable")
    return fn


NOT_WATCHABLE = ("Event", "Lease", "Secret", "ConfigMap")


@dataclasses.dataclass
class _EntryParse:
    """One entry being parsed: what its field parsers read (the raw entry, its kind) and fill in."""
    raw: dict
    at: str                          # watches[i]
    resource: Resource
    playbook_dir: Optional[str]
    kw: dict                         # WatchEntry's arguments
    missing: list = dataclasses.field(default_factory=list)   # playbook files that do not exist

    def where(self, key: str) -> str:
        return f"{self.at}.{key}"


def _playbook(p: _EntryParse, key: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise WatchMapError(f"{p.where(key)}: {value!r} must be a playbook file name")
    path = value if os.path.isabs(value) or p.playbook_dir is None else os.path.join(p.playbook_dir, value)
    if not os.path.isfile(path):
        p.missing.append(f"{key} {path} does not exist")
    return path


def _finalizer_playbook(p: _EntryParse, key: str, value) -> str:
    path = _playbook(p, key, value)
    if p.raw.get("finalizer") is None:
        raise WatchMapError(f"{p.where(key)}: needs finalizer (the finalizer name to add)")
    return path


def _finalizer(p: _EntryParse, key: str, value) -> str:
    if not isinstance(value, str) or "/" not in value:
        raise WatchMapError(f"{p.where(key)}: {value!r} must be a qualified name like 'example.io/cleanup'")
    if not p.kw.get("finalizer_playbook"):
        raise WatchMapError(f"{p.where(key)}: needs finalizer_playbook (what runs before the finalizer is removed)")
    return value


def _vars(p: _EntryParse, key: str, value) -> dict:
    if not isinstance(value, dict):
        raise WatchMapError(f"{p.where(key)}: must be a mapping")
    reserved = {k for k in value if k.startswith("fabric_") or k == "kubeconfig"}
    if reserved:
        raise WatchMapError(f"{p.where(key)}: {sorted(reserved)} are set by the controller")
    return dict(value)


_MIN_SECONDS = {"resync": 0.0, "timeout": 1.0, "finalizer_timeout": 1.0}


def _seconds(p: _EntryParse, key: str, value) -> float:
    return _number(value, p.where(key), _MIN_SECONDS[key])


def _key_template(p: _EntryParse, key: str, value) -> str:
    return _template(value, p.where(key))


def _bool(p: _EntryParse, key: str, value) -> bool:
    if not isinstance(value, bool):
        raise WatchMapError(f"{p.where(key)}: {value!r} must be true or false")
    return value


def _status(p: _EntryParse, key: str, value) -> bool:
    if _bool(p, key, value) and not p.resource.has_status:
        raise WatchMapError(f"{p.where(key)}: {p.resource.kind} has no status subresource with conditions")
    return value


def _field_list(p: _EntryParse, key: str, value) -> tuple:
    return _fields(value, p.where(key))


def _secrets(p: _EntryParse, key: str, value) -> tuple:
    fields = _fields(value, p.where(key))
    if not p.resource.namespaced:
        raise WatchMapError(f"{p.where(key)}: {p.resource.kind} is cluster-scoped (secrets are looked up in the object's"
                            " namespace)")
    return fields


def _related(p: _EntryParse, key: str, value) -> tuple:
    return tuple(_one_related(p, f"{p.where(key)}[{j}]", r) for j, r in enumerate(value or []))


def _one_related(p: _EntryParse, w: str, r) -> Related:
    if not isinstance(r, dict) or set(r) - {"kind", "labels", "ref", "namespace", "all", "inputs"}:
        raise WatchMapError(f"{w}: must be a mapping with kind and labels, ref, namespace or all (and optional inputs)")
    if r.get("kind") not in RESOURCES:
        raise WatchMapError(f"{w}.kind: {r.get('kind')!r} is not a known kind")
    labels = _fields(r["labels"], f"{w}.labels") if "labels" in r else ()
    ref = r.get("ref")
    in_namespace = r.get("namespace", False)
    every = r.get("all", False)
    for flag, value in (("namespace", in_namespace), ("all", every)):
        if not isinstance(value, bool):
            raise WatchMapError(f"{w}.{flag}: {value!r} must be true or false")
    if [bool(labels), bool(ref), in_namespace, every].count(True) != 1:
        raise WatchMapError(f"{w}: give exactly one of labels (same label values, same namespace), ref,"
                            " namespace: true (every object of the namespace) or all: true (every object listed)")
    if in_namespace and not (p.resource.namespaced and RESOURCES[r["kind"]].namespaced):
        raise WatchMapError(f"{w}.namespace: {p.resource.kind} or {r['kind']} is cluster-scoped")
    if ref is not None and not isinstance(ref, str):
        raise WatchMapError(f"{w}.ref: {ref!r} must be a field path like spec.serverTemplateRef")
    return Related(r["kind"], labels, ref, _fields(r.get("inputs", ["spec"]), f"{w}.inputs"), in_namespace, every)


def _drift(p: _EntryParse, key: str, value) -> Drift:
    where = p.where(key)
    if not isinstance(value, dict) or "function" not in value:
        raise WatchMapError(f"{where}: must be a mapping with function (and period, events)")
    unknown = sorted(set(value) - {"function", "period", "events"})
    if unknown:
        raise WatchMapError(f"{where}: unknown key(s) {unknown} (function, period, events)")
    if not isinstance(value.get("events", True), bool):
        raise WatchMapError(f"{where}.events: {value['events']!r} must be true or false")
    fn = resolve_callable(value["function"], f"{where}.function")
    return Drift(value["function"], _number(value.get("period", 30), f"{where}.period", 1.0), fn,
                 value.get("events", True))


def _modes(p: _EntryParse, key: str, value) -> tuple:
    if not isinstance(value, list) or not value or set(value) - set(MODES):
        raise WatchMapError(f"{p.where(key)}: {value!r} must be a non-empty list of {list(MODES)}")
    return tuple(value)


def _label_selector(p: _EntryParse, key: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise WatchMapError(f"{p.where(key)}: {value!r} must be a label selector like 'a=b'")
    return value.strip()


def _member_if(p: _EntryParse, key: str, value) -> tuple:
    conds = []
    for j, c in enumerate(_fields(value, p.where(key))):
        path, sep, expected = c.partition("=")
        if not path or (sep and not expected):
            raise WatchMapError(f"{p.where(key)}[{j}]: {c!r} must be 'field.path' (set) or 'field.path=value'")
        conds.append((path, expected if sep else None))
    if p.kw.get("finalizer"):
        raise WatchMapError(f"{p.where(key)}: an entry with a finalizer must keep every object as a member")
    return tuple(conds)


# The fields of an entry besides its kind, in the order they are checked (the first problem found is the one
# reported): (key, parser, null_ok). A parser takes the field's value and returns WatchEntry's; a field left out
# keeps WatchEntry's default (status: whether the kind has a status subresource), and so does a null one where
# null_ok (elsewhere null is refused like any other wrong value).
FIELDS = (
    ("playbook", _playbook, True),
    ("finalizer_playbook", _finalizer_playbook, True),
    ("finalizer", _finalizer, True),
    ("vars", _vars, False),
    ("resync", _seconds, False),
    ("timeout", _seconds, False),
    ("finalizer_timeout", _seconds, False),
    ("key", _key_template, False),
    ("lock", _key_template, True),
    ("status", _status, False),
    ("inputs", _field_list, False),
    ("secrets", _secrets, False),
    ("related", _related, False),
    ("drift", _drift, True),
    ("modes", _modes, False),
    ("label_selector", _label_selector, True),
    ("objects", _bool, False),
    ("member_if", _member_if, True),
)
ENTRY_KEYS = {"kind"} | {key for key, _parse, _null_ok in FIELDS}


def parse_entry(raw: Any, i: int, playbook_dir: Optional[str]) -> WatchEntry:
    """Entry `i` of the map -> WatchEntry; WatchMapError names the entry and the field of the first problem."""
    where = f"watches[{i}]"
    if not isinstance(raw, dict):
        raise WatchMapError(f"{where}: must be a mapping, got {type(raw).__name__}")
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        raise WatchMapError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(ENTRY_KEYS)})")
    kind = raw.get("kind")
    if kind not in RESOURCES or kind in NOT_WATCHABLE:
        raise WatchMapError(f"{where}.kind: {kind!r} is not a watchable kind "
                            f"({', '.join(k for k in RESOURCES if k not in NOT_WATCHABLE)})")
    res = RESOURCES[kind]
    p = _EntryParse(raw, where, res, playbook_dir, {"kind": kind, "resource": res, "status": res.has_status})
    for key, parse_field, null_ok in FIELDS:
        if key in raw and not (null_ok and raw[key] is None):
            p.kw[key] = parse_field(p, key, raw[key])
    kw = p.kw
    if kw.get("finalizer") and "{name}" not in kw.get("key", DEFAULT_KEY):
        raise WatchMapError(f"{where}.finalizer: only per-object keys (with {{name}}) can carry a finalizer")
    if p.missing and kw.get("playbook"):
        kw["enabled"] = False
        kw["disabled_reason"] = "; ".join(p.missing)
    return WatchEntry(**kw)


def load(path: str, playbook_dir: Optional[str] = None) -> List[WatchEntry]:
    """Reads a watch map; playbook names are relative to playbook_dir (default: ../playbooks of the file,
    i.e. the collection's playbooks/ when the map is controller/watches.yaml)."""
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if playbook_dir is None:
        playbook_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(path))), "playbooks")
    return parse(data, playbook_dir)


def parse(data: Any, playbook_dir: Optional[str]) -> List[WatchEntry]:
    if isinstance(data, dict):
        data = data.get("watches")
    if not isinstance(data, list):
        raise WatchMapError("watches: must be a list of entries (or a mapping with key 'watches')")
    entries = [parse_entry(raw, i, playbook_dir) for i, raw in enumerate(data)]
    seen: Dict[str, set] = {}
    by_key: Dict[str, WatchEntry] = {}  # "mode key" -> the first entry of that group
    for i, e in enumerate(entries):
        # a kind may appear once per mode (the controller and a gateway pod reconcile a GatewayServer differently)
        if seen.get(e.kind, set()) & set(e.modes):
            raise WatchMapError(f"watches[{i}].kind: {e.kind} appears twice for mode(s) "
                                f"{sorted(seen[e.kind] & set(e.modes))}")
        seen.setdefault(e.kind, set()).update(e.modes)
        for mode in e.modes if e.playbook and e.grouped else ():
            other = by_key.setdefault(f"{mode} {e.key}", e)
            if other.playbook != e.playbook or other.status != e.status:
                raise WatchMapError(f"watches[{i}].key: {e.key!r} is shared with {other.kind}, which has another "
                                    f"playbook or status setting (a group has one playbook)")
    return entries


def get_field(obj: Any, path: str) -> Any:
    """'spec.secretRef.name' -> value or None."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watches.yaml")
