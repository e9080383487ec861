"""Recover the parseable parts of an OTLP export request that upb refuses as a whole.

upb (python-protobuf's parser) refuses a message nested past 100 levels (each level of an array
attribute value uses two: ``AnyValue`` and ``ArrayValue``), and python-protobuf offers no way to
raise that bound short of ``SetAllowOversizeProtos`` (65,535 levels: a C stack risk in every
thread). So one span with a value nested ~48 levels used to lose its whole request. When the
fast one-call parse fails, :func:`recover` walks the outer levels of the wire format itself
(request -> resource-level -> scope-level -> item: all length-delimited fields, number 1 the
resource or scope, number 2 the children, the same numbers for traces and logs) and parses each
item alone: an item that fails is rejected alone; a resource or scope attribute that fails is kept
with a null value (its key stays), as the OTLP/JSON decoder cuts a value nested too deep.

Pure; linear in the body. Source: protobuf encoding spec (https://protobuf.dev/programming-guides/
encoding/: tag = field number << 3 | wire type; varints; length-delimited fields).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.internal import decoder
from google.protobuf.message import DecodeError as ProtoDecodeError
from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

_varint = decoder._DecodeVarint  # (buffer, pos) -> (value, new pos)
_LEN = 2
#: fixed sizes of the non-varint, non-length wire types (64-bit, 32-bit)
_FIXED = {1: 8, 5: 4}
#: the attributes' field number of a resource (``Resource``) and a scope (``InstrumentationScope``)
_ATTRS = {"Resource": 1, "InstrumentationScope": 3}


#: reasons kept per request (the receivers report 20)
MAX_REASONS = 20
#: items parsed alone and refused before the whole request is refused: each costs ~40-80 us (an
#: exception), so 1M five-byte bad spans in 5 MB took 79 s on the 2-core VM; 1,000 take < 0.1 s
MAX_UNPARSEABLE = 1000


class WireError(ValueError):
    """The bytes are not a well-formed protobuf wire encoding."""


@dataclass(slots=True)
class Recovered:
    """The request rebuilt from its parseable parts: ``message``, the ``rejected`` items and
    the ``reasons`` of the first :data:`MAX_REASONS` (each naming its path; a 64 MiB request of
    5-byte bad spans would otherwise hold millions of strings)."""

    message: Any
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)


def fields(data: bytes) -> Iterator[tuple[int, int, int, int, int]]:
    """The top-level fields of an encoded message: ``(number, wire type, field start, value
    start, end)``, offsets into ``data``.

    Raises:
        WireError: a truncated field, a bad varint or an unknown wire type.
    """
    pos, end = 0, len(data)
    while pos < end:
        start = pos
        try:
            tag, pos = _varint(data, pos)
            number, wire = tag >> 3, tag & 7
            value = pos
            if wire == 0:
                _, pos = _varint(data, pos)
            elif wire == _LEN:
                size, value = _varint(data, pos)
                pos = value + size
            elif wire in _FIXED:
                pos += _FIXED[wire]
            else:
                raise WireError(f"wire type {wire} at byte {start}")
        except (ProtoDecodeError, IndexError) as exc:
            raise WireError(f"bad varint at byte {start}: {exc}") from None
        if pos > end or number == 0:
            raise WireError(f"field at byte {start} runs past its message")
        yield number, wire, start, value, pos


def _merge_rest(msg: Message, rest: list[bytes]) -> None:
    """Merge the fields not walked (schema URLs, counts, unknown fields); dropped if bad."""
    if rest:
        with suppress(ProtoDecodeError, ValueError):
            msg.MergeFromString(b"".join(rest))


def _cut_attributes(data: bytes, msg: Message) -> None:
    """Parse a resource or scope into ``msg``; an attribute that does not parse keeps its key
    with a null value."""
    try:
        msg.ParseFromString(data)
        return
    except (ProtoDecodeError, ValueError):
        msg.Clear()
    attrs_number = _ATTRS[msg.DESCRIPTOR.name]
    attrs = getattr(msg, msg.DESCRIPTOR.fields_by_number[attrs_number].name)
    rest: list[bytes] = []
    for number, wire, start, value, end in fields(data):
        if number != attrs_number or wire != _LEN:
            rest.append(data[start:end])
            continue
        kv = KeyValue()
        try:
            kv.ParseFromString(data[value:end])
        except (ProtoDecodeError, ValueError):
            kv = KeyValue(key=_key(data[value:end]))
        attrs.append(kv)
    _merge_rest(msg, rest)


def _key(data: bytes) -> str:
    """The ``key`` (field 1) of an encoded ``KeyValue``, "" when it is missing or not UTF-8."""
    try:
        for number, wire, _, value, end in fields(data):
            if number == 1 and wire == _LEN:
                return data[value:end].decode()
    except (WireError, UnicodeDecodeError):
        pass
    return ""


def _container(desc: Any) -> Any:
    """Field 2 of a resource-level or scope-level message (its repeated children), else None
    (an item: a span or a log record)."""
    children = desc.fields_by_number.get(2)
    if children is None or children.message_type is None or not children.is_repeated:
        return None
    return children


def _level(data: bytes, msg: Message, where: str, out: Recovered) -> bool:
    """Fill ``msg`` (a resource-level or scope-level message, or an item) from ``data``: one
    parse when it succeeds, else field 1 (resource or scope) with its bad attributes cut to
    null and each child of field 2 alone. Returns False for an item that does not parse
    (counted rejected in ``out``)."""
    try:
        msg.ParseFromString(data)
        return True
    except (ProtoDecodeError, ValueError) as exc:
        msg.Clear()
        reason = str(exc)
    children = _container(msg.DESCRIPTOR)
    if children is None:
        out.rejected += 1
        if out.rejected > MAX_UNPARSEABLE:
            raise WireError(f"more than {MAX_UNPARSEABLE} items could not be parsed")
        if len(out.reasons) < MAX_REASONS:
            out.reasons.append(f"{where}: not parseable ({_short(reason)})")
        return False
    head = msg.DESCRIPTOR.fields_by_number.get(1)
    items = getattr(msg, children.name)
    rest: list[bytes] = []
    index = 0
    for number, wire, start, value, end in fields(data):
        if number == 1 and wire == _LEN and head is not None and head.message_type is not None:
            _cut_attributes(data[value:end], getattr(msg, head.name))
        elif number == 2 and wire == _LEN:
            if not _level(
                data[value:end], items.add(), f"{where}.{children.json_name}[{index}]", out
            ):
                del items[-1]  # the rejected item's empty shell
            index += 1
        else:
            rest.append(data[start:end])
    _merge_rest(msg, rest)
    return True


def _short(reason: str) -> str:
    """upb's message without the message type it names (long, the same for every item)."""
    return reason.rsplit(": ", 1)[-1]


def recover(data: bytes, request: Message) -> Recovered:
    """``request`` (an empty ``Export{Trace,Logs}ServiceRequest``) filled with every part of
    ``data`` that parses; see the module docstring.

    Raises:
        WireError: the bytes are not a protobuf wire encoding at the levels walked, or more than
            :data:`MAX_UNPARSEABLE` items do not parse.
    """
    out = Recovered(request)
    desc = request.DESCRIPTOR
    top = desc.fields_by_number[1]
    rest: list[bytes] = []
    index = 0
    for number, wire, start, value, end in fields(data):
        if number == 1 and wire == _LEN:
            child = getattr(request, top.name).add()
            _level(data[value:end], child, f"{top.json_name}[{index}]", out)
            index += 1
        else:
            rest.append(data[start:end])
    _merge_rest(request, rest)
    return out
