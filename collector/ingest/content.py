"""Captured prompt/answer text from every content dialect, rendered as plain text.

Sources, in priority order (reference ``otel-genai-otlp-webhooks.md`` §2.5, §2.6, §3.2-3.5):
semconv ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (parts schema, JSON string or
structured); deprecated ``gen_ai.*.message`` / ``gen_ai.choice`` events; OpenLLMetry flattened
``gen_ai.prompt.{i}.*`` / ``gen_ai.completion.{i}.*``; OpenInference ``llm.input_messages.{i}``,
``llm.output_messages.{i}``, ``llm.prompts``, ``llm.choices``, ``input.value`` / ``output.value``;
OpenLIT ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events; Traceloop entity I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson

_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.tools.message": "tool",  # OpenLIT's spelling
}
#: ``isinstance(x, MAPPING)``: the same answer as ``isinstance(x, Mapping)``, but a ``dict`` (what
#: JSON and the decoder give) is recognised without the ABC's ``__instancecheck__`` (~4x slower)
MAPPING = (dict, Mapping)
_INDEXED = {
    "gen_ai.prompt": re.compile(
        r"^gen_ai\.prompt\.(\d+)\.(?:message\.)?(role|content|finish_reason)$"
    ),
    "gen_ai.completion": re.compile(
        r"^gen_ai\.completion\.(\d+)\.(?:message\.)?(role|content|finish_reason)$"
    ),
    "llm.input_messages": re.compile(r"^llm\.input_messages\.(\d+)\.message\.(role|content)$"),
    "llm.output_messages": re.compile(r"^llm\.output_messages\.(\d+)\.message\.(role|content)$"),
    "llm.prompts": re.compile(r"^llm\.prompts\.(\d+)\.prompt\.(text)$"),
    "llm.choices": re.compile(r"^llm\.choices\.(\d+)\.completion\.(text)$"),
}


#: digits of an integer that may lie outside orjson's 64-bit range (which orjson reads as a
#: float where ``json`` keeps the exact int)
_BIG_INT_DIGITS = 20
_DIGITS = frozenset("0123456789")


def _has_digit_run(s: str, n: int = _BIG_INT_DIGITS) -> bool:
    """``s`` holds ``n`` consecutive ASCII digits. A run of ``n`` covers one position of
    ``s[::n]``, so only the runs through those positions are measured (a regex search of
    ``[0-9]{20}`` costs ~12 us on a 700-character message, this ~0.3 us)."""
    stride = s[::n]
    for d in "0123456789":  # a loop of `in` scans: C speed, no generator
        if d in stride:
            break
    else:
        return False
    for j, c in enumerate(stride):
        if c in _DIGITS:
            p = j * n
            lo = hi = p
            while lo > 0 and s[lo - 1] in _DIGITS:
                lo -= 1
            while hi + 1 < len(s) and s[hi + 1] in _DIGITS:
                hi += 1
            if hi - lo + 1 >= n:
                return True
    return False


def _loads(s: str) -> Any:
    """``json.loads(s)``, through orjson (measured 3.4 -> 1.0 us on a 760-character message)
    when it gives the same value: orjson refuses what only ``json`` reads (``NaN``, ``1e400``,
    lone surrogates, deeper nesting) and those fall back to ``json``; text with a 20-digit run
    (an integer orjson may turn into a float) goes to ``json`` directly.

    Raises:
        ValueError: ``s`` is not JSON.
    """
    if not _has_digit_run(s):
        try:
            return orjson.loads(s)
        except ValueError:  # orjson.JSONDecodeError, or a str orjson cannot encode to UTF-8
            pass
    return json.loads(s)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("[", "{"):
            try:
                return _loads(s)
            except ValueError:
                return value
    return value


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    if not isinstance(part, MAPPING):
        return None
    ptype = part.get("type")
    if ptype in (None, "text", "input_text", "output_text"):
        content = part.get("content", part.get("text"))
        return content if isinstance(content, str) else None
    if ptype == "tool_call":
        args = part.get("arguments")
        args_s = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return f"[tool_call {part.get('name')}({args_s})]"
    if ptype == "tool_call_response":
        resp = part.get("response", part.get("result"))
        return resp if isinstance(resp, str) else json.dumps(resp, ensure_ascii=False)
    return None  # reasoning, blobs, files, uris: not part of the answer text


def message_text(message: Any) -> str | None:
    """Plain text of one chat message (semconv ``parts`` or OpenAI-style ``content``)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, MAPPING):
        return None
    pieces: list[str] = []
    parts = message.get("parts")
    content = message.get("content")
    if isinstance(parts, list):
        pieces = [t for t in (_part_text(p) for p in parts) if t]
    elif isinstance(content, str):
        pieces = [content]
    elif isinstance(content, list):
        pieces = [t for t in (_part_text(p) for p in content) if t]
    if not pieces and isinstance(message.get("message"), MAPPING):
        return message_text(message["message"])
    return "\n".join(pieces) if pieces else None


def render_conversation(messages: list[tuple[str | None, str]]) -> str | None:
    """One message -> its text; several -> ``role: text`` lines in order."""
    messages = [(r, t) for r, t in messages if t]
    if not messages:
        return None
    if len(messages) == 1:
        return messages[0][1]
    return "\n".join(f"{role or 'user'}: {text}" for role, text in messages)


def _messages(value: Any) -> list[tuple[str | None, str]] | None:
    value = _maybe_json(value)
    if isinstance(value, MAPPING):
        value = [value]
    if not isinstance(value, list):
        return [(None, value)] if isinstance(value, str) and value else None
    out = []
    for m in value:
        text = message_text(m)
        if text:
            role = m.get("role") if isinstance(m, MAPPING) else None
            out.append((str(role) if role else None, text))
    return out


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Messages flattened as ``prefix.{i}.field`` attributes, ordered by index."""
    if not any(k.startswith(prefix + ".") for k in attrs):
        return []
    pattern = _INDEXED[prefix]
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = pattern.match(key)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [found[i] for i in sorted(found)]


def _events(events: list[dict[str, Any]], names: set[str] | dict[str, str]) -> list[dict[str, Any]]:
    return [e for e in events if e.get("name") in names]


def input_text(attrs: Mapping[str, Any], events: list[dict[str, Any]]) -> str | None:
    """The prompt as plain text, or None when no content was captured."""
    system: list[tuple[str | None, str]] = [
        ("system", t) for _, t in _messages(attrs.get("gen_ai.system_instructions")) or []
    ]
    if "gen_ai.input.messages" in attrs:
        inputs = _messages(attrs["gen_ai.input.messages"]) or []
        # OpenLIT sends the system prompt twice: as instructions and as a system message
        known = {t for r, t in inputs if r == "system"}
        return render_conversation([m for m in system if m[1] not in known] + inputs)
    evs = _events(events, _MESSAGE_EVENTS)
    if evs:
        msgs: list[tuple[str | None, str]] = []
        for e in evs:
            a = e.get("attributes") or {}
            text = message_text(_maybe_json(a.get("content", a.get("gen_ai.event.content"))))
            if text:
                msgs.append((_MESSAGE_EVENTS[e["name"]], text))
        if msgs:
            return render_conversation(system + msgs)
    for prefix in ("gen_ai.prompt", "llm.input_messages"):
        items = _indexed(attrs, prefix)
        if items:
            return render_conversation(
                system + [(i.get("role"), t) for i in items if (t := message_text(i))]
            )
    prompts = _indexed(attrs, "llm.prompts")
    if prompts:
        return render_conversation([(None, p["text"]) for p in prompts if p.get("text")])
    for e in _events(events, {"gen_ai.content.prompt"}):
        text = (e.get("attributes") or {}).get("gen_ai.prompt")
        if isinstance(text, str) and text:
            return text
    for key in ("input.value", "gen_ai.prompt", "traceloop.entity.input"):
        value = attrs.get(key)
        if isinstance(value, str) and value:
            parsed = _messages(value)
            rendered = render_conversation(parsed) if parsed and parsed != [(None, value)] else None
            return rendered or value
    return render_conversation(system)


def output_text_and_reasons(
    attrs: Mapping[str, Any], events: list[dict[str, Any]]
) -> tuple[str | None, list[Any] | None]:
    """The first choice's answer text and the per-choice finish reasons found with it."""
    if "gen_ai.output.messages" in attrs:
        value = _maybe_json(attrs["gen_ai.output.messages"])
        items = value if isinstance(value, list) else [value]
        reasons = [m.get("finish_reason") for m in items if isinstance(m, MAPPING)]
        text = message_text(items[0]) if items else None
        return text, [r for r in reasons if r] or None
    choices = _events(events, {"gen_ai.choice"})
    if choices:
        a = choices[0].get("attributes") or {}
        reasons = [(c.get("attributes") or {}).get("finish_reason") for c in choices]
        text = message_text(_maybe_json(a.get("message", a.get("content"))))
        return text, [r for r in reasons if r] or None
    for prefix in ("gen_ai.completion", "llm.output_messages"):
        items = _indexed(attrs, prefix)
        if items:
            reasons = [i.get("finish_reason") for i in items if i.get("finish_reason")]
            return message_text(items[0]), reasons or None
    texts = _indexed(attrs, "llm.choices")
    if texts:
        return texts[0].get("text"), None
    for e in _events(events, {"gen_ai.content.completion"}):
        text = (e.get("attributes") or {}).get("gen_ai.completion")
        if isinstance(text, str) and text:
            return text, None
    for key in ("output.value", "gen_ai.completion", "traceloop.entity.output"):
        value = attrs.get(key)
        if isinstance(value, str) and value:
            msgs = _messages(value)
            if msgs and msgs != [(None, value)]:
                return msgs[0][1], None
            return value, None
    return None, None
