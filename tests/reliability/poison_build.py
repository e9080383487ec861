"""Bodies of the specs of :mod:`tests.reliability.poison_strategies` (protobuf or OTLP/JSON,
ids unique to an example) and what each must lead to (:class:`Expect`)."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.reliability.poison_strategies import (
    BAD_BYTES,
    BAD_UTF8,
    CONTENT,
    EVAL,
    NOW_NS,
    Attr,
    LogSpec,
    RequestSpec,
    SpanSpec,
    any_value,
)


# ----------------------------------------------------------------------------- building
@dataclass
class Expect:
    """What one built request must lead to. Keys are lowercase hex (trace_id, span_id)."""

    spec: RequestSpec
    body: bytes
    content_type: str
    #: whole request poison: a 400 is a right answer (then nothing of it may be stored)
    may_400: bool = False
    plain_spans: list[tuple[str, str]] = field(default_factory=list)
    odd_spans: list[tuple[str, str]] = field(default_factory=list)
    invalid_spans: list[tuple[str, str]] = field(default_factory=list)
    #: log records: (event, name prefix or key) by class
    plain_evals: list[str] = field(default_factory=list)
    odd_evals: list[str] = field(default_factory=list)
    plain_contents: list[tuple[str, str]] = field(default_factory=list)
    odd_contents: list[tuple[str, str]] = field(default_factory=list)
    #: the spec of each item by its key or evaluation-name prefix (for failure messages)
    specs: dict[Any, SpanSpec | LogSpec] = field(default_factory=dict)
    invalid_logs: int = 0
    #: items refused alone by the protobuf parser (``bad_utf8``: the first span or record)
    refused_alone: int = 0

    @property
    def invalid_count(self) -> int:
        return len(self.invalid_spans) + self.invalid_logs + self.refused_alone


def key_of(salt: int, n: int) -> tuple[bytes, bytes]:
    """A trace id and span id unique to (``salt``, ``n``), never all zero."""
    return (0xD1 << 120 | salt << 32 | n).to_bytes(16, "big"), (1 << 62 | n).to_bytes(8, "big")


def _base_attrs() -> list[KeyValue]:
    return [
        KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat")),
        KeyValue(key="gen_ai.request.model", value=AnyValue(string_value="gpt-4o")),
    ]


def _span(spec: SpanSpec, trace: bytes, sid: bytes) -> Span:
    end = min(spec.start + spec.duration, 2**63 - 1)
    s = Span(trace_id=trace, span_id=sid, name=spec.name, kind=Span.SPAN_KIND_CLIENT)
    s.start_time_unix_nano, s.end_time_unix_nano = spec.start, end
    s.attributes.extend(_base_attrs())
    s.attributes.extend(KeyValue(key=a.key, value=any_value(a)) for a in spec.attrs)
    bad = spec.bad
    if bad == "short_trace":
        s.trace_id = trace[:5]
    elif bad == "zero_trace":
        s.trace_id = bytes(16)
    elif bad == "long_span":
        s.span_id = sid + b"\x01"
    elif bad == "zero_span":
        s.span_id = bytes(8)
    elif bad == "bad_parent":
        s.parent_span_id = b"\x01\x02\x03"
    elif bad == "time_2_63":
        s.end_time_unix_nano = 2**63
    return s


def _hex_ids(d: dict[str, Any]) -> dict[str, Any]:
    for k in ("traceId", "spanId", "parentSpanId"):
        if k in d:
            d[k] = base64.b64decode(d[k]).hex()
    return d


def _deep_json(kind: str, depth: int) -> dict[str, Any]:
    v: dict[str, Any] = {"stringValue": "bottom"}
    for i in range(depth):
        if kind == "array":
            v = {"arrayValue": {"values": [v]}}
        else:
            v = {"kvlistValue": {"values": [{"key": f"k{i}", "value": v}]}}
    return v


def _span_json(spec: SpanSpec, msg: Span) -> dict[str, Any]:
    d = _hex_ids(json_format.MessageToDict(msg))
    attrs = d.setdefault("attributes", [])
    base = len(_base_attrs())
    for i, a in enumerate(spec.attrs):
        if a.kind == "surrogate":
            attrs[base + i]["value"] = {"stringValue": "lone \ud800 surrogate \udfff"}
        elif a.kind == "deep":
            attrs[base + i]["value"] = _deep_json(a.value, a.depth)
    if spec.bad == "negative_time":
        d["startTimeUnixNano"] = "-5"
    elif spec.bad == "time_2_64":
        d["endTimeUnixNano"] = str(2**64)
    return d


_EVAL_POISON: dict[str, dict[str, Any]] = {
    "time_2_63": {"time": 2**63},
    "time_max": {"time": 2**64 - 1},
    "nul_name": {"suffix": "nul\x00name"},
    "long_name": {"suffix": "n" * 5000},
    "long_label": {"label": "L" * 5000},
    "long_response_id": {"response_id": "r" * 5000},
    "nan_score": {"score": math.nan},
    "inf_score": {"score": math.inf},
    "nul_label": {"label": "go\x00od"},
    "huge_explanation": {"explanation": "e" * 300_000},
}


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _eval_record(spec: LogSpec, prefix: str, trace: bytes, sid: bytes) -> LogRecord:
    p = _EVAL_POISON.get(spec.poison or "", {})
    rec = LogRecord(time_unix_nano=p.get("time", NOW_NS), event_name=EVAL)
    rec.trace_id, rec.span_id = trace, sid
    rec.attributes.extend(
        [
            _kv("gen_ai.evaluation.name", prefix + p.get("suffix", "")),
            _kv("gen_ai.evaluation.score.value", p.get("score", spec.score)),
            _kv("gen_ai.evaluation.score.label", p.get("label", "good")),
            _kv("gen_ai.evaluation.explanation", p.get("explanation", spec.text)),
            _kv("gen_ai.response.id", p.get("response_id", f"resp-{prefix}")),
        ]
    )
    return rec


def _content_record(spec: LogSpec, trace: bytes, sid: bytes) -> LogRecord:
    rec = LogRecord(time_unix_nano=NOW_NS, event_name=CONTENT)
    rec.trace_id, rec.span_id = trace, sid
    text = spec.text
    if spec.poison == "nul_body":
        text += "\x00"
    elif spec.poison == "huge_body":
        text = "x" * 300_000
    elif spec.poison == "time_2_63":
        rec.time_unix_nano = 2**63
    if spec.poison == "deep_body":
        rec.body.CopyFrom(any_value(Attr("body", "deep", "kvlist", 30)))
    elif spec.poison == "nan_body":
        rec.body.double_value = math.nan
    else:
        rec.body.kvlist_value.values.append(_kv("content", text))
    return rec


def _dump(doc: Any, media: str) -> tuple[bytes, str]:
    if media == "json":
        return json.dumps(doc).encode("ascii"), "application/json"
    return doc.SerializeToString(), "application/x-protobuf"


def build_request(
    spec: RequestSpec, salt: int, start: int, plain_keys: list[tuple[bytes, bytes]]
) -> tuple[Expect, int]:
    """The body of ``spec`` with ids unique to ``salt`` (items numbered from ``start``) and
    what it must lead to; returns it and the next item number. ``plain_keys``: the keys of
    the example's plain spans so far (duplicates and joined log records reuse them; this
    request's plain span keys are appended)."""
    n = start
    exp = Expect(spec, b"", "", may_400=spec.bad_utf8 and spec.media == "protobuf")
    hexkey = lambda k: (k[0].hex(), k[1].hex())  # noqa: E731
    if spec.signal == "traces":
        req = ExportTraceServiceRequest()
        ss = req.resource_spans.add().scope_spans.add()
        docs: list[dict[str, Any]] = []
        for sp in spec.spans:
            key = key_of(salt, n)
            n += 1
            if sp.cls == "plain" and sp.dup is not None and sp.dup < len(plain_keys):
                key = plain_keys[sp.dup]
            msg = _span(sp, *key)
            refused = False
            if spec.bad_utf8 and not docs and not ss.spans:
                msg.attributes.append(_kv("x.raw", BAD_UTF8))
                refused = spec.media == "protobuf" and sp.cls != "invalid"
            ss.spans.append(msg)
            docs.append(_span_json(sp, msg))
            exp.specs[hexkey(key)] = sp
            if refused:  # the parser refuses this span alone (rejected in partialSuccess)
                exp.refused_alone += 1
            else:
                {"plain": exp.plain_spans, "odd": exp.odd_spans, "invalid": exp.invalid_spans}[
                    sp.cls
                ].append(hexkey(key))
            if sp.cls == "plain":
                plain_keys.append(key)
        doc: Any = {"resourceSpans": [{"scopeSpans": [{"spans": docs}]}]} if docs else {}
    else:
        lreq = ExportLogsServiceRequest()
        sl = lreq.resource_logs.add().scope_logs.add()
        for lg in spec.logs:
            trace, sid = key_of(salt, n)
            prefix = f"ev-{salt}-{n}-"
            n += 1
            if lg.join and plain_keys:
                trace, sid = plain_keys[0]
            if lg.cls == "invalid":
                sid = sid[:5]
            refused = spec.bad_utf8 and not sl.log_records and spec.media == "protobuf"
            if refused and lg.cls != "invalid":  # the parser refuses this record alone
                exp.refused_alone += 1
            if lg.event == "eval":
                rec = _eval_record(lg, prefix, trace, sid)
                if lg.cls != "invalid" and not refused:
                    (exp.plain_evals if lg.cls == "plain" else exp.odd_evals).append(prefix)
                    exp.specs[prefix] = lg
            elif lg.event == "content":
                rec = _content_record(lg, trace, sid)
                if lg.cls != "invalid" and not refused:
                    target = exp.plain_contents if lg.cls == "plain" else exp.odd_contents
                    target.append((trace.hex(), sid.hex()))
                    exp.specs[(trace.hex(), sid.hex())] = lg
            else:
                rec = LogRecord(time_unix_nano=NOW_NS, event_name="app.log")
                rec.body.string_value = lg.text
            if lg.cls == "invalid":
                exp.invalid_logs += 1
            if spec.bad_utf8 and not sl.log_records:
                rec.attributes.append(_kv("x.raw", BAD_UTF8))
            sl.log_records.append(rec)
        doc = lreq
        if spec.media == "json":
            recs = [_hex_ids(json_format.MessageToDict(r)) for r in sl.log_records]
            doc = {"resourceLogs": [{"scopeLogs": [{"logRecords": recs}]}]} if recs else {}
    if spec.signal == "traces" and spec.media == "protobuf":
        doc = req
    exp.body, exp.content_type = _dump(doc, spec.media)
    exp.body = exp.body.replace(BAD_UTF8.encode(), BAD_BYTES)
    return exp, n
