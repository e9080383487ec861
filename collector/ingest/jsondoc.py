"""Large and deeply nested JSON documents, parsed without stopping the process.

* Depth: orjson refuses documents nested past 1,024 levels and the standard library's ``json``
  raises ``RecursionError`` near Python's recursion limit (1,000 frames), so one deeply nested
  attribute used to lose a whole OTLP/JSON request. :func:`cut_deep` replaces each value that
  opens deeper than ``max_depth`` with ``null`` (the value is truncated there; the converters
  then reject or keep that span alone), leaving every other byte as it was.
* Size: one ``orjson.loads`` of a 30 MB body holds the GIL for its whole run (2 s on a busy
  2-core VM), so a worker thread decoding it still stalls the event loop. :func:`load_chunked`
  walks the outer levels in Python and hands each inner value (a span, a log record) to the
  standard library's C scanner: the GIL changes hands between values.

Pure; linear in the text.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

#: a JSON string (escapes included) or a bracket; everything else passes through untouched
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_WS = re.compile(r"[ \t\n\r]*")
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # C scanner: one value
#: levels walked in Python by :func:`load_chunked`: document, resourceSpans, resource, scopeSpans,
#: scope, spans; each span (log record) is then one scanner call
OUTER_LEVELS = 6
#: deepest nesting kept by the OTLP/JSON decoders (real exports nest ~12 levels, plus values)
MAX_JSON_DEPTH = 256


#: a run of json_format's nested error prefixes, one per level of the value that failed
_FIELD_CHAIN = re.compile(r"(?:Failed to parse (\w+) field: )+")
_FIELD_NAME = re.compile(r"Failed to parse (\w+) field: ")


def parse_error(exc: BaseException, limit: int = 300) -> str:
    """``str(exc)`` with json_format's ``Failed to parse X field: `` prefixes (one per nesting
    level: 300 for a value 300 levels deep) folded into one dotted field path, at most ``limit``
    characters. E.g. ``attributes.value.values...(52 fields deep): Message too deep. Max
    recursion depth is 100``."""
    text = str(exc) or type(exc).__name__
    m = _FIELD_CHAIN.search(text)
    if m is not None:
        names = _FIELD_NAME.findall(m.group())
        path = ".".join(names)
        if len(names) > 4:
            path = f"{'.'.join(names[:3])}...({len(names)} fields deep)"
        text = f"{text[: m.start()]}{path}: {text[m.end() :].rstrip('.') or 'invalid'}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def cut_deep(text: str, max_depth: int = MAX_JSON_DEPTH) -> str:
    """``text`` with every array or object that opens at depth ``max_depth + 1`` replaced by
    ``null`` (depth 1 is the document's outer value).

    Malformed JSON (unbalanced brackets, an unterminated string) is returned changed at most
    where it was balanced; the parser that follows reports it. Raises ``ValueError`` when
    ``max_depth`` < 1.
    """
    if max_depth < 1:
        raise ValueError(f"max_depth: must be >= 1, got {max_depth}")
    out: list[str] = []
    last = 0
    depth = 0
    cut_from: int | None = None
    for m in _TOKENS.finditer(text):
        c = m.group()[0]
        if c == '"':
            continue
        if c in "[{":
            depth += 1
            if depth == max_depth + 1 and cut_from is None:
                cut_from = m.start()
        else:
            if depth == max_depth + 1 and cut_from is not None:
                out.append(text[last:cut_from])
                out.append("null")
                last = m.end()
                cut_from = None
            depth -= 1
    out.append(text[last:])
    return "".join(out)


def load_chunked(text: str, levels: int = OUTER_LEVELS) -> Any:
    """``json.loads(text)``, the outer ``levels`` of arrays and objects parsed in Python and
    every value below them by one call of the C scanner each.

    Raises:
        ValueError: not JSON (the message gives the character offset).
        RecursionError: a value nested past Python's recursion limit (see :func:`cut_deep`).
    """
    value, end = _value(text, _WS.match(text, 0).end(), levels)  # type: ignore[union-attr]
    end = _WS.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise ValueError(f"extra data at character {end}")
    return value


def _skip(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _value(text: str, i: int, levels: int) -> tuple[Any, int]:
    c = text[i : i + 1]
    if levels > 0 and c == "{":
        return _object(text, i, levels)
    if levels > 0 and c == "[":
        return _array(text, i, levels)
    try:
        return _SCAN(text, i)
    except StopIteration:
        raise ValueError(f"expecting a value at character {i}") from None


def _object(text: str, i: int, levels: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i = _skip(text, i + 1)
    if text[i : i + 1] == "}":
        return out, i + 1
    while True:
        if text[i : i + 1] != '"':
            raise ValueError(f"expecting a property name at character {i}")
        key, i = scanstring(text, i + 1)
        i = _skip(text, i)
        if text[i : i + 1] != ":":
            raise ValueError(f"expecting ':' at character {i}")
        out[key], i = _value(text, _skip(text, i + 1), levels - 1)
        i = _skip(text, i)
        c = text[i : i + 1]
        if c == "}":
            return out, i + 1
        if c != ",":
            raise ValueError(f"expecting ',' or '}}' at character {i}")
        i = _skip(text, i + 1)


def _array(text: str, i: int, levels: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    i = _skip(text, i + 1)
    if text[i : i + 1] == "]":
        return out, i + 1
    while True:
        item, i = _value(text, i, levels - 1)
        out.append(item)
        i = _skip(text, i)
        c = text[i : i + 1]
        if c == "]":
            return out, i + 1
        if c != ",":
            raise ValueError(f"expecting ',' or ']' at character {i}")
        i = _skip(text, i + 1)
