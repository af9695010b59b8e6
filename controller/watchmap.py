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


@dataclasses.dataclass(frozen=True)
class Drift:
    function: str
    period: float
    call: Callable = dataclasses.field(compare=False, repr=False, default=None)


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


ENTRY_KEYS = {"kind", "playbook", "finalizer", "finalizer_playbook", "vars", "resync", "key", "lock", "status", "inputs",
              "secrets", "related", "drift", "timeout", "finalizer_timeout", "modes", "label_selector", "member_if",
              "objects"}


def parse_entry(raw: Any, i: int, playbook_dir: Optional[str]) -> WatchEntry:
    where = f"watches[{i}]"
    if not isinstance(raw, dict):
        raise WatchMapError(f"{where}: must be a mapping, got {type(raw).__name__}")
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        raise WatchMapError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(ENTRY_KEYS)})")
    kind = raw.get("kind")
    if kind not in RESOURCES or kind in ("Event", "Lease", "Secret", "ConfigMap"):
        raise WatchMapError(f"{where}.kind: {kind!r} is not a watchable kind "
                            f"({', '.join(k for k in RESOURCES if k not in ('Event', 'Lease', 'Secret', 'ConfigMap'))})")
    res = RESOURCES[kind]
    kw: Dict[str, Any] = {"kind": kind, "resource": res}
    missing = []
    for field in ("playbook", "finalizer_playbook"):
        if raw.get(field) is None:
            continue
        if not isinstance(raw[field], str) or not raw[field]:
            raise WatchMapError(f"{where}.{field}: {raw[field]!r} must be a playbook file name")
        path = raw[field] if os.path.isabs(raw[field]) or playbook_dir is None else os.path.join(playbook_dir, raw[field])
        if not os.path.isfile(path):
            missing.append(f"{field} {path} does not exist")
        kw[field] = path
    if raw.get("finalizer") is not None:
        if not isinstance(raw["finalizer"], str) or "/" not in raw["finalizer"]:
            raise WatchMapError(f"{where}.finalizer: {raw['finalizer']!r} must be a qualified name like 'example.io/cleanup'")
        if not kw.get("finalizer_playbook"):
            raise WatchMapError(f"{where}.finalizer: needs finalizer_playbook (what runs before the finalizer is removed)")
        kw["finalizer"] = raw["finalizer"]
    elif raw.get("finalizer_playbook"):
        raise WatchMapError(f"{where}.finalizer_playbook: needs finalizer (the finalizer name to add)")
    if "vars" in raw:
        if not isinstance(raw["vars"], dict):
            raise WatchMapError(f"{where}.vars: must be a mapping")
        reserved = {k for k in raw["vars"] if k.startswith("fabric_") or k == "kubeconfig"}
        if reserved:
            raise WatchMapError(f"{where}.vars: {sorted(reserved)} are set by the controller")
        kw["vars"] = dict(raw["vars"])
    for field in ("resync", "timeout", "finalizer_timeout"):
        if field in raw:
            kw[field] = _number(raw[field], f"{where}.{field}", 0.0 if field == "resync" else 1.0)
    kw["key"] = _template(raw.get("key", DEFAULT_KEY), f"{where}.key")
    if raw.get("lock") is not None:
        kw["lock"] = _template(raw["lock"], f"{where}.lock")
    status = raw.get("status", res.has_status)
    if not isinstance(status, bool):
        raise WatchMapError(f"{where}.status: {status!r} must be true or false")
    if status and not res.has_status:
        raise WatchMapError(f"{where}.status: {kind} has no status subresource with conditions")
    kw["status"] = status
    if "inputs" in raw:
        kw["inputs"] = _fields(raw["inputs"], f"{where}.inputs")
    if "secrets" in raw:
        kw["secrets"] = _fields(raw["secrets"], f"{where}.secrets")
        if not res.namespaced:
            raise WatchMapError(f"{where}.secrets: {kind} is cluster-scoped (secrets are looked up in the object's namespace)")
    rel = []
    for j, r in enumerate(raw.get("related") or []):
        w = f"{where}.related[{j}]"
        if not isinstance(r, dict) or set(r) - {"kind", "labels", "ref", "namespace", "inputs"}:
            raise WatchMapError(f"{w}: must be a mapping with kind and labels, ref or namespace (and optional inputs)")
        if r.get("kind") not in RESOURCES:
            raise WatchMapError(f"{w}.kind: {r.get('kind')!r} is not a known kind")
        labels = _fields(r["labels"], f"{w}.labels") if "labels" in r else ()
        ref = r.get("ref")
        in_namespace = r.get("namespace", False)
        if not isinstance(in_namespace, bool):
            raise WatchMapError(f"{w}.namespace: {in_namespace!r} must be true or false")
        if [bool(labels), bool(ref), in_namespace].count(True) != 1:
            raise WatchMapError(f"{w}: give exactly one of labels (same label values, same namespace), ref or"
                                " namespace: true (every object of the namespace)")
        if in_namespace and not (res.namespaced and RESOURCES[r["kind"]].namespaced):
            raise WatchMapError(f"{w}.namespace: {kind} or {r['kind']} is cluster-scoped")
        if ref is not None and not isinstance(ref, str):
            raise WatchMapError(f"{w}.ref: {ref!r} must be a field path like spec.serverTemplateRef")
        rel.append(Related(r["kind"], labels, ref, _fields(r.get("inputs", ["spec"]), f"{w}.inputs"), in_namespace))
    kw["related"] = tuple(rel)
    if raw.get("drift") is not None:
        d = raw["drift"]
        if not isinstance(d, dict) or "function" not in d:
            raise WatchMapError(f"{where}.drift: must be a mapping with function (and period)")
        fn = resolve_callable(d["function"], f"{where}.drift.function")
        kw["drift"] = Drift(d["function"], _number(d.get("period", 30), f"{where}.drift.period", 1.0), fn)
    modes = raw.get("modes", ["controller"])
    if not isinstance(modes, list) or not modes or set(modes) - set(MODES):
        raise WatchMapError(f"{where}.modes: {modes!r} must be a non-empty list of {list(MODES)}")
    kw["modes"] = tuple(modes)
    if raw.get("label_selector") is not None:
        if not isinstance(raw["label_selector"], str) or not raw["label_selector"].strip():
            raise WatchMapError(f"{where}.label_selector: {raw['label_selector']!r} must be a label selector like 'a=b'")
        kw["label_selector"] = raw["label_selector"].strip()
    if "objects" in raw:
        if not isinstance(raw["objects"], bool):
            raise WatchMapError(f"{where}.objects: {raw['objects']!r} must be true or false")
        kw["objects"] = raw["objects"]
    if raw.get("member_if") is not None:
        conds = []
        for j, c in enumerate(_fields(raw["member_if"], f"{where}.member_if")):
            path, sep, value = c.partition("=")
            if not path or (sep and not value):
                raise WatchMapError(f"{where}.member_if[{j}]: {c!r} must be 'field.path' (set) or 'field.path=value'")
            conds.append((path, value if sep else None))
        if kw.get("finalizer"):
            raise WatchMapError(f"{where}.member_if: an entry with a finalizer must keep every object as a member")
        kw["member_if"] = tuple(conds)
    if kw.get("finalizer") and "{name}" not in kw["key"]:
        raise WatchMapError(f"{where}.finalizer: only per-object keys (with {{name}}) can carry a finalizer")
    if missing and kw.get("playbook"):
        kw["enabled"] = False
        kw["disabled_reason"] = "; ".join(missing)
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
