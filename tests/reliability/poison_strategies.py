"""Hypothesis strategies for poison OTLP exports: traces AND logs, protobuf and OTLP/JSON, each
item labelled with what the collector must do with it.

Every generated item is one of three classes:

* ``plain``: a well-formed span / log record (gen_ai content, so redaction and normalisation
  run; duplicates of earlier spans' ids among them): it must be stored exactly once.
* ``odd``: well-formed ids and times but hostile content: NUL characters, lone surrogates
  (OTLP/JSON escapes), invalid UTF-8, NaN / infinities, int64 extremes, huge and deeply nested
  attribute values, values past their store column (PostgreSQL varchar), evaluation times
  >= 2**63, over-long score names and labels. The collector may store it (cleaned), reject it
  (``partialSuccess``) or quarantine its spool record; never lose it silently and never stop
  on it (and a quarantined record must not take the plain spans beside it along).
* ``invalid``: ids of the wrong size, span times >= 2**63 or negative: it must be rejected in
  ``partialSuccess`` and never stored.

A request may also be poison as a whole (invalid UTF-8 inside a protobuf string: the message
does not parse): it may be answered 400, and then nothing of it is stored.

The strategies generate specs without ids; :func:`tests.reliability.poison_build.build_request`
gives each item its ids from a per-example ``salt`` so that the examples of one run never share
a key by chance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

NOW_NS = 1_760_000_000 * 10**9
#: placeholder replaced by invalid UTF-8 bytes of the same length after encoding
BAD_UTF8 = "@@BADUTF8@@"
BAD_BYTES = b"\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28"
assert len(BAD_BYTES) == len(BAD_UTF8)

EVAL = "gen_ai.evaluation.result"
CONTENT = "gen_ai.user.message"


# ----------------------------------------------------------------------------- values
class Text(str):
    """A str whose repr stays short (failing examples print huge texts as head * length)."""

    __slots__ = ()

    def __repr__(self) -> str:
        if len(self) <= 80:
            return str.__repr__(self)
        return f"<{len(self)} chars: {str.__repr__(self[:40])}...>"


#: text a redaction pattern will look at (e-mail, key=value secrets, phone, card)
SENSITIVE = [
    "mail me at jane.doe@example.com",
    "api_key=sk-live-1234567890abcdef please",
    "call +1 415 555 0132 now",
    "card 4111 1111 1111 1111 exp 12/29",
    "server at 10.0.0.12 token=abc",
]
plain_texts = st.one_of(st.sampled_from(SENSITIVE), st.text(max_size=60))
#: hostile text: NULs, lone surrogates (written as \\udXXX escapes in JSON only), invalid UTF-8
#: placeholders, huge text, small redaction blow-ups
odd_texts = st.one_of(
    st.builds(lambda s: s + "\x00" + s, plain_texts),
    st.sampled_from(["\x00", "a\x00b", Text("\x00" * 300)]),
    st.builds(lambda n: Text("token=abc " + ".token" * n), st.integers(1, 120)),
    st.builds(lambda n: Text("a!" * n + "@"), st.integers(1, 400)),
    st.builds(lambda n, s: Text(s * n), st.integers(1000, 20_000), st.sampled_from(SENSITIVE)),
)
#: attributes stored in a bounded column of ``llm_calls`` (varchar(64) to varchar(512))
COLUMN_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "driftline.rollout",
    "driftline.variant",
    "user.id",
    "session.id",
    "gen_ai.conversation.id",
    "gen_ai.response.id",
    "gen_ai.request.id",
    "gen_ai.response.finish_reasons",
]
int64_edges = st.sampled_from([2**63 - 1, -(2**63), -1, 0, 2**31, 2**53 + 1])
odd_doubles = st.sampled_from([math.nan, math.inf, -math.inf, 9.3e18, -0.0, 1e308])


@dataclass(frozen=True)
class Attr:
    """One attribute: ``kind`` s (text), i (int), d (double), b (bytes), deep (nested
    ``depth`` levels of arrays or kvlists), surrogate (text with a lone surrogate: JSON only)."""

    key: str
    kind: str
    value: Any = None
    depth: int = 0


def any_value(a: Attr) -> AnyValue:
    """The protobuf ``AnyValue`` of ``a`` (a lone surrogate, JSON only, is ``"x"`` here; nesting
    is capped at 20 levels: the protobuf runtime refuses deeper messages)."""
    v = AnyValue()
    if a.kind in ("s", "surrogate"):
        v.string_value = a.value if a.kind == "s" else "x"
    elif a.kind == "i":
        v.int_value = a.value
    elif a.kind == "d":
        v.double_value = a.value
    elif a.kind == "b":
        v.bytes_value = a.value
    else:  # deep
        inner = AnyValue(string_value="bottom")
        for i in range(min(a.depth, 20)):  # deeper: JSON only (_span_json rewrites it)
            outer = AnyValue()
            if a.value == "array":
                outer.array_value.values.append(inner)
            else:
                outer.kvlist_value.values.append(KeyValue(key=f"k{i}", value=inner))
            inner = outer
        v.CopyFrom(inner)
    return v


def _attr_strategy(odd: bool, json_ok: bool) -> st.SearchStrategy[Attr]:
    keys = st.sampled_from(
        ["gen_ai.prompt", "gen_ai.completion", "gen_ai.input.messages", "user.id", "x.note"]
    )
    if not odd:
        return st.one_of(
            st.builds(Attr, keys, st.just("s"), plain_texts),
            st.builds(Attr, st.just("x.count"), st.just("i"), st.integers(0, 10**6)),
        )
    options = [
        st.builds(Attr, keys, st.just("s"), odd_texts),
        st.builds(  # past the store's column of the value (PostgreSQL varchar(64..512))
            Attr,
            st.sampled_from(COLUMN_KEYS),
            st.just("s"),
            st.sampled_from([65, 129, 257, 513, 5000]).map(lambda n: Text("v" * n)),
        ),
        st.builds(Attr, st.just("x.weird\x00key"), st.just("s"), plain_texts),
        st.builds(
            Attr,
            st.sampled_from(["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "x.i"]),
            st.just("i"),
            int64_edges,
        ),
        st.builds(
            Attr,
            st.sampled_from(["gen_ai.usage.input_tokens", "gen_ai.latency.e2e", "x.d"]),
            st.just("d"),
            odd_doubles,
        ),
        st.builds(Attr, st.just("x.bytes"), st.just("b"), st.binary(max_size=64)),
        st.builds(
            Attr,
            st.just("x.deep"),
            st.just("deep"),
            st.sampled_from(["array", "kvlist"]),
            st.integers(1, 120 if json_ok else 20),
        ),
    ]
    if json_ok:
        options.append(st.builds(Attr, keys, st.just("surrogate")))
    return st.one_of(*options)


# ----------------------------------------------------------------------------- spans
@dataclass(frozen=True)
class SpanSpec:
    """One span: ``cls`` plain / odd / invalid; ``dup``: reuse the key of the example's
    ``dup``-th plain span (a duplicate id); ``bad``: what makes an invalid span invalid."""

    cls: str
    name: str
    start: int
    duration: int
    attrs: tuple[Attr, ...]
    dup: int | None = None
    bad: str | None = None


_BAD_SPAN_PB = ["short_trace", "zero_trace", "long_span", "zero_span", "bad_parent", "time_2_63"]
_BAD_SPAN_JSON = [*_BAD_SPAN_PB, "negative_time", "time_2_64"]


def span_specs(json_ok: bool) -> st.SearchStrategy[SpanSpec]:
    plain = st.builds(
        SpanSpec,
        st.just("plain"),
        st.sampled_from(["chat gpt-4o", "llm_request", "chat"]),
        st.integers(NOW_NS - 10**12, NOW_NS),
        st.integers(0, 10**10),
        st.lists(_attr_strategy(False, json_ok), max_size=4).map(tuple),
        st.one_of(st.none(), st.integers(0, 3)),
    )
    odd = st.builds(
        SpanSpec,
        st.just("odd"),
        st.one_of(st.just("chat"), odd_texts),
        st.one_of(st.integers(NOW_NS - 10**12, NOW_NS), st.sampled_from([0, 1, 2**63 - 1])),
        st.integers(0, 10**10),
        st.lists(_attr_strategy(True, json_ok), min_size=1, max_size=4).map(tuple),
    )
    invalid = st.builds(
        SpanSpec,
        st.just("invalid"),
        st.just("chat"),
        st.integers(NOW_NS - 10**12, NOW_NS),
        st.integers(0, 10**10),
        st.lists(_attr_strategy(False, json_ok), max_size=2).map(tuple),
        st.none(),
        st.sampled_from(_BAD_SPAN_JSON if json_ok else _BAD_SPAN_PB),
    )
    return st.one_of(plain, odd, invalid)


# ----------------------------------------------------------------------------- log records
@dataclass(frozen=True)
class LogSpec:
    """One log record: ``event`` eval / content / other; ``cls`` as for spans; ``poison``:
    what makes an odd record odd (or an invalid one invalid)."""

    event: str
    cls: str
    text: str
    score: float
    poison: str | None = None
    join: bool = False


_ODD_EVAL = ["time_2_63", "time_max", "nul_name", "long_name", "long_label", "long_response_id",
             "nan_score", "inf_score", "nul_label", "huge_explanation"]  # fmt: skip
_ODD_CONTENT = ["nul_body", "huge_body", "time_2_63", "deep_body", "nan_body"]


def log_specs(json_ok: bool) -> st.SearchStrategy[LogSpec]:
    scores = st.floats(-1e6, 1e6, allow_nan=False)
    ev = st.sampled_from(["eval", "content"])
    plain = st.builds(LogSpec, ev, st.just("plain"), plain_texts, scores, st.none(), st.booleans())
    odd_eval = st.builds(
        LogSpec, st.just("eval"), st.just("odd"), plain_texts, scores, st.sampled_from(_ODD_EVAL)
    )
    odd_content = st.builds(
        LogSpec,
        st.just("content"),
        st.just("odd"),
        odd_texts,
        scores,
        st.sampled_from(_ODD_CONTENT),
        st.booleans(),
    )
    invalid = st.builds(
        LogSpec, ev, st.just("invalid"), plain_texts, scores, st.sampled_from(["short_span"])
    )
    other = st.builds(LogSpec, st.just("other"), st.just("plain"), plain_texts, scores)
    return st.one_of(plain, odd_eval, odd_content, invalid, other)


# ----------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class RequestSpec:
    """One export: ``signal`` traces / logs, ``media`` protobuf / json, its items, and
    ``bad_utf8``: invalid UTF-8 written into the body (protobuf: the message cannot parse)."""

    signal: str
    media: str
    spans: tuple[SpanSpec, ...] = ()
    logs: tuple[LogSpec, ...] = ()
    bad_utf8: bool = False


@st.composite
def request_specs(draw: st.DrawFn) -> RequestSpec:
    media = draw(st.sampled_from(["protobuf", "json"]))
    json_ok = media == "json"
    if draw(st.booleans()):
        spans = tuple(draw(st.lists(span_specs(json_ok), max_size=5)))
        return RequestSpec("traces", media, spans=spans, bad_utf8=draw(st.integers(0, 9)) == 0)
    only_evals = draw(st.booleans())  # evaluation-only exports: item 1 of issue 35
    logs = draw(
        st.lists(
            log_specs(json_ok).filter(lambda s: s.event == "eval")
            if only_evals
            else log_specs(json_ok),
            max_size=4,
        )
    )
    return RequestSpec("logs", media, logs=tuple(logs), bad_utf8=draw(st.integers(0, 9)) == 0)


scenarios = st.lists(request_specs(), min_size=1, max_size=4)
