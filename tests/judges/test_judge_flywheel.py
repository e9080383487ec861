"""Flywheel: reviewed calls to chat fine-tuning JSONL lines."""

from __future__ import annotations

import json

import pytest

from judges.flywheel import Correction, finetune_lines


def test_corrections_become_messages_lines() -> None:
    items = [
        Correction("c1", "Capital of France?", "Lyon.", corrected_output="Paris."),
        Correction("c2", "2+2?", "4", approved=True),
        Correction("c3", "Say hi", "Go away.", corrected_output="   "),
        Correction(
            "c4",
            [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Colour of the sky?"},
            ],
            "It depends on many factors...",
            corrected_output="Blue.",
        ),
    ]
    lines = finetune_lines(items, system_prompt="You are a helpful assistant.")
    assert len(lines) == 2
    first, fourth = (json.loads(line) for line in lines)
    assert first == {
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "Paris."},
        ]
    }
    assert [m["role"] for m in fourth["messages"]] == ["system", "user", "assistant"]
    assert fourth["messages"][0]["content"] == "You are terse."  # own system prompt kept
    assert all("\n" not in line for line in lines)


def test_approved_originals_only_on_request() -> None:
    items = [Correction("c2", "2+2?", "4", approved=True), Correction("c5", "x", "y")]
    assert finetune_lines(items) == ()
    (line,) = finetune_lines(items, include_approved=True)
    assert json.loads(line)["messages"][-1] == {"role": "assistant", "content": "4"}


def test_unicode_is_kept_verbatim() -> None:
    (line,) = finetune_lines([Correction("u", "Grüße?", corrected_output="Hallo 👋")])
    assert "Grüße" in line and "👋" in line


def test_bad_items_raise_value_error() -> None:
    with pytest.raises(ValueError, match="duplicate call_id"):
        finetune_lines([Correction("a", "p", corrected_output="x")] * 2)
    with pytest.raises(ValueError, match="end with a user message"):
        finetune_lines(
            [Correction("b", [{"role": "assistant", "content": "hi"}], corrected_output="x")]
        )
    with pytest.raises(ValueError, match="role"):
        finetune_lines(
            [Correction("c", [{"role": "robot", "content": "hi"}], corrected_output="x")]
        )
