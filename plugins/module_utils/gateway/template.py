# -*- coding: utf-8 -*-
# Copyright: liqo.fabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fill a WgGatewayServerTemplate / WgGatewayClientTemplate from a GatewayServer / GatewayClient.

Pure Python, no Ansible imports. The placeholder syntax is the subset of Go templates that Liqo's
gateway templates use, so Liqo-style templates render unchanged:

* ``{{ .Name }}``, ``{{ .Namespace }}``, ``{{ .GatewayUID }}`` (metadata.uid), ``{{ .ClusterID }}``
  (label ``liqo.io/remote-cluster-id``), ``{{ .SecretName }}`` (spec.secretRef.name, else
  status.secretRef.name), ``{{ .Labels }}``, ``{{ .Annotations }}``;
* ``{{ .Spec.<Field>... }}`` / ``{{ .Status.<Field>... }}``: Go field names matched case-insensitively
  against the object's JSON keys (``.Spec.MTU`` -> ``spec.mtu``, ``.Spec.Endpoint.LoadBalancerIP`` ->
  ``spec.endpoint.loadBalancerIP``); a missing field renders empty;
* ``{{ index .Spec.Endpoint.Addresses 0 }}``: one element of a list.

``.Spec.Endpoint.Port`` / ``.Spec.Endpoint.NodePort`` of a gateway written with Liqo's single-element
``ports`` / ``nodePorts`` lists render that element (more than one is refused before rendering, see
gateway.endpoint_spec).

A string that is exactly one placeholder takes the value's own type (``port: "{{ .Spec.Endpoint.Port }}"``
renders the integer 51820), except under ``labels`` / ``annotations`` and for ``metadata.name`` /
``metadata.namespace``, which stay strings. Inside longer strings lists join with ``,`` and booleans
print ``true``/``false``. A key written ``?key`` is optional: it is dropped when its value renders
empty, zero or false (e.g. ``?nodePort`` with nodePort 0 lets Kubernetes choose), else kept as ``key``.
Anything else between ``{{`` and ``}}`` (pipelines, ``if``, trim markers) raises TemplateError naming
the position in the template. These are not Jinja: Ansible never templates data read from the API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import re

CLUSTER_ID_LABEL = "liqo.io/remote-cluster-id"
_PLACEHOLDER = re.compile(r"{{((?:(?!}}).)*)}}", re.S)
_PATH = r"\.[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_EXPR_PATH = re.compile(r"^\s*(%s)\s*$" % _PATH)
_EXPR_INDEX = re.compile(r"^\s*index\s+(%s)\s+([0-9]+)\s*$" % _PATH)
_FORCE_STRING_PARENTS = ("labels", "annotations")


class TemplateError(ValueError):
    """A template that cannot be rendered; ``reason`` is for a Kubernetes condition."""

    reason = "InvalidGatewayTemplate"


def template_data(gateway):
    """The values a template can refer to, from a GatewayServer/GatewayClient dict."""
    meta = gateway.get("metadata") or {}
    spec = gateway.get("spec") or {}
    status = gateway.get("status") or {}
    labels = meta.get("labels") or {}
    secret = (spec.get("secretRef") or {}).get("name") or (status.get("secretRef") or {}).get("name") or ""
    endpoint = spec.get("endpoint")
    if isinstance(endpoint, dict):
        # Liqo's v1beta1 lists of one stand for the single port: '{{ .Spec.Endpoint.Port }}' renders ports[0]
        endpoint = dict(endpoint)
        for scalar, plural in (("port", "ports"), ("nodePort", "nodePorts")):
            values = endpoint.get(plural)
            if not endpoint.get(scalar) and isinstance(values, list) and len(values) == 1:
                endpoint[scalar] = values[0]
        spec = dict(spec, endpoint=endpoint)
    return {
        "Name": meta.get("name") or "",
        "Namespace": meta.get("namespace") or "",
        "GatewayUID": meta.get("uid") or "",
        "ClusterID": labels.get(CLUSTER_ID_LABEL, ""),
        "SecretName": secret,
        "Labels": labels,
        "Annotations": meta.get("annotations") or {},
        "Spec": spec,
        "Status": status,
    }


def _lookup(data, path, where):
    parts = path[1:].split(".")
    if parts[0] not in data:
        raise TemplateError("%s: unknown value '.%s' (known: %s)" % (where, parts[0], ", ".join("." + k for k in sorted(data))))
    value = data[parts[0]]
    for part in parts[1:]:
        if not isinstance(value, dict):
            return None
        if part in value:
            value = value[part]
            continue
        low = part.lower()
        value = next((v for k, v in value.items() if k.lower() == low), None)
    return value


def _evaluate(expr, data, where):
    m = _EXPR_PATH.match(expr)
    if m:
        return _lookup(data, m.group(1), where)
    m = _EXPR_INDEX.match(expr)
    if m:
        seq = _lookup(data, m.group(1), where)
        idx = int(m.group(2))
        if isinstance(seq, list) and idx < len(seq):
            return seq[idx]
        return None
    raise TemplateError("%s: unsupported template expression '{{%s}}' (only '{{ .Path }}' and '{{ index .Path N }}')" % (where, expr))


def _to_text(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_to_text(v) for v in value)
    if isinstance(value, dict):
        raise TemplateError("a map cannot be embedded in a longer string")
    return str(value)


def render_string(text, data, where="template", force_string=False):
    """Render one string. Returns the native value when ``text`` is exactly one placeholder."""
    if "{{" not in text:
        return text
    whole = _PLACEHOLDER.fullmatch(text.strip())
    if whole:
        value = _evaluate(whole.group(1), data, where)
        if force_string:
            if isinstance(value, dict):  # e.g. annotations: "{{ .Spec.ServiceAnnotations }}"
                return dict((str(k), _to_text(v)) for k, v in value.items())
            return _to_text(value)
        return "" if value is None else copy.deepcopy(value)
    try:
        out = _PLACEHOLDER.sub(lambda m: _to_text(_evaluate(m.group(1), data, where)), text)
    except TemplateError as exc:
        if str(exc).startswith(where):
            raise
        raise TemplateError("%s: %s" % (where, exc))
    if "{{" in out or "}}" in out:
        raise TemplateError("%s: unbalanced '{{' / '}}' in '%s'" % (where, text))
    return out


def _empty(value):
    return value is None or value is False or value == "" or value == 0 or value == [] or value == {}


def _render(node, data, where, force_string):
    if isinstance(node, str):
        return render_string(node, data, where, force_string)
    if isinstance(node, list):
        return [_render(v, data, "%s[%d]" % (where, i), force_string) for i, v in enumerate(node)]
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            optional = isinstance(key, str) and key.startswith("?")
            name = key[1:] if optional else key
            child = "%s.%s" % (where, name)
            force = force_string or name in _FORCE_STRING_PARENTS or (where.rsplit(".", 1)[-1] == "metadata" and name in ("name", "namespace"))
            rendered = _render(value, data, child, force)
            if optional and _empty(rendered):
                continue
            out[name] = rendered
        return out
    if force_string and node is not None and not isinstance(node, (dict, list)):
        return _to_text(node)
    return node


def render(template, gateway, where="template"):
    """Return a rendered deep copy of ``template`` (a dict, e.g. ``spec.template`` of a gateway template).

    ``gateway`` is the GatewayServer/GatewayClient dict as read from the API (defaults applied).
    """
    return _render(template, template_data(gateway), where, False)


def render_gateway_template(template_object, gateway):
    """Render ``spec.template`` of a WgGateway*Template object dict for ``gateway``."""
    spec = (template_object or {}).get("spec") or {}
    if not isinstance(spec.get("template"), dict):
        name = ((template_object or {}).get("metadata") or {}).get("name")
        raise TemplateError("spec.template: missing or not a map in template '%s'" % name)
    return render(spec["template"], gateway, "spec.template")
