"""OTLP ``AnyValue`` and attribute lists as plain JSON-able Python, and an OTLP/JSON resource's
attributes with the values that do not parse cut to null (pure; no I/O).

Source: opentelemetry-proto ``opentelemetry/proto/common/v1/common.proto``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource


def any_value(v: AnyValue) -> Any:
    """Convert an OTLP ``AnyValue`` to plain JSON-able Python (bytes become base64 text)."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        return v.double_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return None


def attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    """OTLP attributes as a dict; a key repeated keeps its last value."""
    return {kv.key: any_value(kv.value) for kv in kvs}


def json_resource_attributes(doc: dict[str, Any]) -> dict[str, Any]:
    """The attributes of an OTLP/JSON ``resource`` object. An attribute whose value does not
    parse (nested past json_format's depth limit, a wrong type) keeps its key with a null value,
    as :func:`~collector.ingest.jsondoc.cut_deep` cuts one: the resource's spans are kept.

    Raises:
        ValueError, json_format.ParseError: the resource itself is malformed (not its values).
    """
    res = Resource()
    try:
        json_format.ParseDict(doc, res, ignore_unknown_fields=True)
        return attributes(res.attributes)
    except (json_format.ParseError, RecursionError):
        attrs = doc.get("attributes")
        if not isinstance(attrs, list):
            raise
    res.Clear()
    json_format.ParseDict(
        {k: v for k, v in doc.items() if k != "attributes"}, res, ignore_unknown_fields=True
    )
    out: dict[str, Any] = {}
    for raw in attrs:
        if not isinstance(raw, dict) or not isinstance(raw.get("key"), str):
            raise ValueError("resource attributes must be objects with a string key")
        kv = KeyValue()
        try:
            json_format.ParseDict(raw, kv, ignore_unknown_fields=True)
            out[kv.key] = any_value(kv.value)
        except (json_format.ParseError, RecursionError):
            out[raw["key"]] = None
    return out
