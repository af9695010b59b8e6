# -*- coding: utf-8 -*-
# Copyright: liqo.fabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Conversion of networking.liqo.io objects between v1alpha1 (the seeds' shapes) and v1beta1 (Liqo's).

Pure Python, no Ansible imports: the controller's conversion webhook (ConversionReview v1) calls
``convert()``; the unit tests call it directly.

What differs (everything else is copied unchanged, ``apiVersion`` aside):

* Configuration: v1alpha1 writes one CIDR string (``spec.remote.cidr.pod: 10.243.0.0/16``), v1beta1 Liqo's
  list, of exactly one CIDR here (``pod: [10.243.0.0/16]``), in ``spec.local``, ``spec.remote`` and
  ``status.remote``: the string and the list of one are the same value, converted both ways, no annotation.
* GatewayServer: v1beta1 adds ``spec.endpoint.ports`` / ``nodePorts`` (lists beside the deprecated
  ``port`` / ``nodePort``), ``spec.secretRef``, ``spec.serviceAnnotations``, ``spec.serviceLabels`` and
  ``status.endpoint.ports``.
* GatewayClient: v1beta1 adds ``spec.endpoint.ports`` and ``spec.secretRef``.

Going up (v1alpha1 -> v1beta1) never loses anything: every v1alpha1 value has a v1beta1 place. Going
down, what v1alpha1 cannot hold (a ports list, a secretRef, ...) is kept, as JSON, in the annotation
``ANNOTATION`` of the v1alpha1 object, and the nearest v1alpha1 value is shown (the first port). Going
up again restores the kept values unless the v1alpha1 value they were shown as was edited meanwhile:
then the edit wins (an edited ``port`` replaces a ``ports`` list). So b -> a -> b is the identity, and
a -> b -> a is the identity too.
"""
from __future__ import absolute_import, division, print_function

import copy
import json

__metaclass__ = type  # pylint: disable=invalid-name

GROUP = "networking.liqo.io"
VERSIONS = ("v1alpha1", "v1beta1")
ANNOTATION = "conversion.networking.liqo.io/v1beta1-fields"
_MISSING = object()

_CIDR_PATHS = tuple((section, part, "cidr", field)
                    for section, part in (("spec", "local"), ("spec", "remote"), ("status", "remote"))
                    for field in ("pod", "external"))

# kind -> (list paths shown as their first element in v1alpha1: (list path, scalar path)),
#         (v1beta1-only paths, dropped from v1alpha1 and kept in the annotation)
_RULES = {
    "Configuration": ((), ()),
    "GatewayServer": (
        ((("spec", "endpoint", "ports"), ("spec", "endpoint", "port")),
         (("spec", "endpoint", "nodePorts"), ("spec", "endpoint", "nodePort")),
         (("status", "endpoint", "ports"), ("status", "endpoint", "port"))),
        (("spec", "secretRef"), ("spec", "serviceAnnotations"), ("spec", "serviceLabels"))),
    "GatewayClient": (
        ((("spec", "endpoint", "ports"), ("spec", "endpoint", "port")),),
        (("spec", "secretRef"),)),
}
# Kinds whose two versions have the same schema: only apiVersion changes.
SAME_SHAPE = ("Connection", "PublicKey", "WgGatewayServerTemplate", "WgGatewayClientTemplate")


class ConversionError(ValueError):
    """An object that cannot be converted; the message names the field and the value."""


def _get(obj, path):
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _set(obj, path, value):
    for key in path[:-1]:
        obj = obj.setdefault(key, {})
    obj[path[-1]] = value


def _pop(obj, path):
    """Removes path and the dicts it leaves empty (they were created by the conversion)."""
    parents = []
    for key in path[:-1]:
        if not isinstance(obj, dict) or key not in obj:
            return
        parents.append((obj, key))
        obj = obj[key]
    if isinstance(obj, dict):
        obj.pop(path[-1], None)
        for parent, key in reversed(parents):
            if parent[key] == {}:
                del parent[key]
            else:
                break


def _dotted(path):
    return ".".join(path)


def _first(values, where):
    if not isinstance(values, list):
        raise ConversionError("%s must be a list, got %r" % (where, values))
    return values[0] if values else _MISSING


def _down(obj, kind):
    """v1beta1 -> v1alpha1: returns the object and the kept v1beta1-only values (dotted path -> value)."""
    kept = {}
    if kind == "Configuration":
        for path in _CIDR_PATHS:
            value = _get(obj, path)
            if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
                _set(obj, path, value[0])
            elif not (value is _MISSING or value is None or isinstance(value, str)):
                # a string: stored before v1beta1 took lists only; shown as is, applying it back stores the list
                raise ConversionError("%s must be a list of one CIDR in v1beta1, got %r" % (_dotted(path), value))
        return obj, kept
    lists, only_v1beta1 = _RULES[kind]
    for list_path, scalar_path in lists:
        values = _get(obj, list_path)
        if values is _MISSING:
            continue
        first = _first(values, _dotted(list_path))
        if _get(obj, scalar_path) is not _MISSING:
            raise ConversionError("%s and %s are mutually exclusive" % (_dotted(scalar_path), _dotted(list_path)))
        kept[_dotted(list_path)] = values
        _pop(obj, list_path)
        if first is not _MISSING:
            _set(obj, scalar_path, first)
    for path in only_v1beta1:
        value = _get(obj, path)
        if value is not _MISSING:
            kept[_dotted(path)] = value
            _pop(obj, path)
    return obj, kept


def _still_shown(saved, shown):
    """True when v1alpha1 still shows what the down conversion of the list `saved` showed."""
    return isinstance(saved, list) and (shown == saved[0] if saved else shown is _MISSING)


def _up(obj, kind, kept):
    """v1alpha1 -> v1beta1, restoring the kept values that still match what v1alpha1 shows (edits win)."""
    if kind == "Configuration":
        for path in _CIDR_PATHS:
            value = _get(obj, path)
            if isinstance(value, str):
                _set(obj, path, [value])
            elif not (value is _MISSING or value is None):
                raise ConversionError("%s must be one CIDR string in v1alpha1, got %r" % (_dotted(path), value))
        return obj
    lists, only_v1beta1 = _RULES[kind]
    for list_path, scalar_path in lists:
        saved = kept.get(_dotted(list_path), _MISSING)
        if _still_shown(saved, _get(obj, scalar_path)):
            _pop(obj, scalar_path)
            _set(obj, list_path, copy.deepcopy(saved))
    for path in only_v1beta1:
        dotted = _dotted(path)
        if dotted in kept:
            _set(obj, path, copy.deepcopy(kept[dotted]))
    return obj


def _kept_from(obj):
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION)
    if text is None:
        return {}
    try:
        kept = json.loads(text)
    except ValueError as exc:
        raise ConversionError("metadata.annotations[%s] is not JSON (%s): %r" % (ANNOTATION, exc, text))
    if not isinstance(kept, dict):
        raise ConversionError("metadata.annotations[%s] must be a JSON object, got %r" % (ANNOTATION, text))
    return kept


def _set_annotation(obj, kept):
    metadata = obj.setdefault("metadata", {})
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop(ANNOTATION, None)
    if kept:
        annotations[ANNOTATION] = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)


def version_of(obj):
    api_version = obj.get("apiVersion", "") if isinstance(obj, dict) else ""
    group, version = api_version.rpartition("/")[::2]
    if group != GROUP or version not in VERSIONS:
        raise ConversionError("apiVersion %r is not one of %s" % (api_version, ", ".join(GROUP + "/" + v for v in VERSIONS)))
    return version


def convert(obj, desired_api_version):
    """`obj` (a dict, left untouched) converted to `desired_api_version` ("networking.liqo.io/v1beta1" ...)."""
    source = version_of(obj)
    target = version_of({"apiVersion": desired_api_version})
    kind = obj.get("kind")
    if kind not in _RULES and kind not in SAME_SHAPE:
        raise ConversionError("kind %r is not a kind of %s" % (kind, GROUP))
    out = copy.deepcopy(obj)
    out["apiVersion"] = desired_api_version
    if source == target or kind in SAME_SHAPE:
        return out
    if target == "v1alpha1":
        out, kept = _down(out, kind)
        _set_annotation(out, kept)
        return out
    kept = _kept_from(out)
    _set_annotation(out, {})
    return _up(out, kind, kept)
