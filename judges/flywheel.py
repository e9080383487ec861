"""The data flywheel: flagged calls + human corrections → chat fine-tuning JSONL lines.

Each line is one training example in the chat ``messages`` format accepted by OpenAI fine-tuning
and by TRL's ``SFTTrainer`` conversational datasets:
``{"messages": [{"role": "system"|"user"|"assistant", "content": "..."}, ...]}``, ending with the
assistant turn to learn. Pure: the caller reads the calls and writes the lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Correction:
    """A reviewed call.

    ``prompt``: the user text, or the request's chat messages (``role`` / ``content``; the last
    one from the user). ``corrected_output``: the reviewer's rewritten answer (None when none).
    ``approved``: the reviewer accepted ``original_output`` as it is.
    """

    call_id: str
    prompt: str | Sequence[Mapping[str, str]]
    original_output: str | None = None
    corrected_output: str | None = None
    approved: bool = False


def _prompt_messages(item: Correction) -> list[dict[str, str]]:
    if isinstance(item.prompt, str):
        if not item.prompt.strip():
            raise ValueError(f"prompt of {item.call_id!r} is empty")
        return [{"role": "user", "content": item.prompt}]
    messages: list[dict[str, str]] = []
    for message in item.prompt:
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES or not isinstance(content, str):
            raise ValueError(
                f"prompt of {item.call_id!r}: each message needs role in {_ROLES} and str content"
            )
        messages.append({"role": role, "content": content})
    if not messages or messages[-1]["role"] != "user":
        raise ValueError(f"prompt of {item.call_id!r} must end with a user message")
    return messages


def finetune_lines(
    items: Iterable[Correction],
    *,
    system_prompt: str | None = None,
    include_approved: bool = False,
) -> tuple[str, ...]:
    """One JSONL line (no trailing newline) per usable correction, in input order.

    The assistant turn is ``corrected_output`` when the reviewer wrote one; with
    ``include_approved`` an approved ``original_output`` is used too; other items are skipped.
    ``system_prompt`` is prepended when the prompt has no system message of its own.
    Raises ValueError naming the parameter for a duplicate ``call_id`` or a malformed ``prompt``.
    """
    lines: list[str] = []
    seen: set[str] = set()
    for item in items:
        if item.call_id in seen:
            raise ValueError(f"items: duplicate call_id {item.call_id!r}")
        seen.add(item.call_id)
        if item.corrected_output is not None and item.corrected_output.strip():
            target = item.corrected_output
        elif include_approved and item.approved and item.original_output:
            target = item.original_output
        else:
            continue
        messages = _prompt_messages(item)
        if system_prompt is not None and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": system_prompt})
        messages.append({"role": "assistant", "content": target})
        lines.append(json.dumps({"messages": messages}, ensure_ascii=False))
    return tuple(lines)
