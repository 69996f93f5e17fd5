"""Strict JSON schemas for the prometheus-operator objects we ship (ServiceMonitor, PrometheusRule).

kubernetes-validate has schemas for built-in kinds only; these cover exactly the fields we use, with the types
of the prometheus-operator v1 API, and reject any other field (a typo such as `honorLabel` must fail).
"""

from __future__ import annotations

from typing import Any


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": list(required)}


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_ACTIONS = ["replace", "keep", "drop", "labeldrop", "labelkeep", "labelmap", "hashmod"]
_RELABEL = _object({"sourceLabels": _STRINGS, "targetLabel": _STRING, "action": {"enum": _ACTIONS},
                    "regex": _STRING, "replacement": _STRING, "separator": _STRING})
_SECRET_KEY = _object({"name": _STRING, "key": _STRING, "optional": {"type": "boolean"}}, ("key",))
_SECRET_OR_CONFIGMAP = _object({"secret": _SECRET_KEY, "configMap": _SECRET_KEY})
_TLS = _object({"ca": _SECRET_OR_CONFIGMAP, "cert": _SECRET_OR_CONFIGMAP, "keySecret": _SECRET_KEY,
                "serverName": _STRING, "insecureSkipVerify": {"type": "boolean"}})
_ENDPOINT = _object({"port": _STRING, "interval": _STRING, "scrapeTimeout": _STRING,
                     "honorLabels": {"type": "boolean"}, "relabelings": {"type": "array", "items": _RELABEL},
                     "scheme": {"enum": ["http", "https"]}, "tlsConfig": _TLS,
                     "basicAuth": _object({"username": _SECRET_KEY, "password": _SECRET_KEY})})
_METADATA = {"type": "object", "required": ["name", "namespace"]}
_RULE = _object({"alert": _STRING, "record": _STRING, "expr": _STRING, "for": _STRING,
                 "labels": {"type": "object"}, "annotations": {"type": "object"}}, ("expr",))
_GROUP = _object({"name": _STRING, "interval": _STRING, "rules": {"type": "array", "items": _RULE}},
                 ("name", "rules"))


def _kind(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _object({"apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": kind},
                    "metadata": _METADATA, "spec": spec}, ("apiVersion", "kind", "metadata", "spec"))


SCHEMAS: dict[str, dict[str, Any]] = {
    "ServiceMonitor": _kind("ServiceMonitor", _object({
        "selector": {"type": "object"},
        "namespaceSelector": _object({"matchNames": _STRINGS, "any": {"type": "boolean"}}),
        "endpoints": {"type": "array", "items": _ENDPOINT, "minItems": 1},
    }, ("selector", "endpoints"))),
    "PrometheusRule": _kind("PrometheusRule", _object({"groups": {"type": "array", "items": _GROUP}},
                                                      ("groups",))),
}
