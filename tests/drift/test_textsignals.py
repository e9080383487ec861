"""Refusal heuristic, empty output and language identification."""

from __future__ import annotations

import json

import pytest

from drift import langwalk
from drift.textsignals import (
    LanguageGuess,
    _identifier,
    detect_language,
    detect_languages,
    is_empty_output,
    is_refusal,
    language_mismatch,
    refusal_marker,
)
from tests.support.fixtures import dolly_lines


@pytest.mark.parametrize(
    "text",
    [
        "I'm sorry, but I can't help with that request.",
        "I\u2019m sorry, but I can\u2019t assist with creating malware.",
        "I cannot provide instructions for making explosives.",
        "As an AI language model, I don't have personal opinions.",
        "I apologize, but that request goes against my guidelines.",
        "Sorry, I won't write that.",
        "I'm unable to share personal data about private individuals.",
        "My apologies, but I must decline to answer.",
    ],
)
def test_refusals_are_detected(text: str) -> None:
    assert is_refusal(text) is True
    assert refusal_marker(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "The capital of France is Paris.",
        "Here is a Python function that reverses a list:\n\ndef rev(xs):\n    return xs[::-1]",
        "I cannot stress enough how important it is to stretch before running.",
        "Tope is a species of fish; rope is not.",
        # a marker far into a long helpful answer is not a refusal
        "Camels survive without water because they store fat in their humps, have oval red "
        "blood cells, and lose little water through urine and sweat. Their body temperature "
        "also varies widely, so they do not sweat until it is very hot. I'm sorry to say "
        "that the hump does not store water.",
        "",
    ],
)
def test_ordinary_answers_are_not_refusals(text: str) -> None:
    assert is_refusal(text) is False


def test_unknown_text_is_unknown_not_false() -> None:
    assert is_refusal(None) is None
    assert is_empty_output(None) is None
    assert detect_language(None) is None
    with pytest.raises(ValueError, match="window_chars"):
        is_refusal("I'm sorry", window_chars=0)


def test_window_controls_where_markers_count() -> None:
    text = "Sure. " + "x" * 300 + " I'm sorry, I cannot help with that."
    assert is_refusal(text) is False
    assert is_refusal(text, window_chars=400) is True


def test_empty_output() -> None:
    assert is_empty_output("") is True
    assert is_empty_output(" \n\t") is True
    assert is_empty_output("ok") is False


@pytest.mark.parametrize(
    "text,lang",
    [
        ("Why can camels survive for long without water?", "en"),
        ("Pourquoi les chameaux peuvent-ils survivre longtemps sans eau ?", "fr"),
        ("Warum können Kamele lange ohne Wasser überleben?", "de"),
        ("¿Por qué los camellos pueden sobrevivir mucho tiempo sin agua?", "es"),
        ("Почему верблюды могут долго жить без воды?", "ru"),
        ("为什么骆驼可以长时间不喝水？", "zh"),
    ],
)
def test_detect_language(text: str, lang: str) -> None:
    guess = detect_language(text)
    assert guess is not None
    assert guess.language == lang
    assert 0.0 < guess.confidence <= 1.0


def test_detect_language_needs_letters_and_validates() -> None:
    assert detect_language("42") is None
    assert detect_language("```\n{}\n```") is None
    assert detect_language("   ") is None
    und = detect_language("ok ok", min_confidence=0.999)
    assert und is not None and und.language == "und"
    with pytest.raises(ValueError, match="min_letters"):
        detect_language("hello", min_letters=0)
    with pytest.raises(ValueError, match="min_confidence"):
        detect_language("hello", min_confidence=2.0)


def test_language_mismatch() -> None:
    en, fr = LanguageGuess("en", 0.99), LanguageGuess("fr", 0.98)
    assert language_mismatch(en, fr) is True
    assert language_mismatch(en, LanguageGuess("en", 0.7)) is False
    assert language_mismatch(en, None) is None
    assert language_mismatch(LanguageGuess("und", 0.2), fr) is None


def test_detect_languages_equals_detect_language_on_real_prompts() -> None:
    # every 4th Dolly prompt (3,750; a dozen languages by langid's reading) plus edge cases:
    # the same label and the same confidence, bit for bit, as one call per text
    lines = dolly_lines()[::4]
    texts: list[str | None] = [json.loads(line)["prompt"][:2000] for line in lines]
    texts += [
        None, "", "42", "   ", "ok", "ÉCOLE PRIMAIRE À PARIS", "Почему верблюды могут жить?",
        "为什么骆驼可以长时间不喝水？", "ab", "x" * 5000, "\ud800 lone surrogate, still text",
        "Warum können Kamele lange ohne Wasser überleben? " * 40,
    ]  # fmt: skip
    want = [detect_language(t) for t in texts]
    got = detect_languages(texts)
    assert got == want
    assert sum(g is not None and g.language != "en" for g in got) > 10  # not all one label
    und = detect_languages(["ok ok", "The weather is fine today."], min_confidence=0.999)
    assert und == [
        detect_language(t, min_confidence=0.999) for t in ("ok ok", "The weather is fine today.")
    ]
    with pytest.raises(ValueError, match="min_letters"):
        detect_languages(["hello"], min_letters=0)


def test_batch_classifier_checks_itself_against_the_library() -> None:
    from py3langid.langid import LanguageIdentifier

    ident = _identifier(None)
    assert langwalk.batch_classifier(ident) is not None  # py3langid >= 0.4 is installed

    def build(cls: type[LanguageIdentifier], norm_probs: bool) -> LanguageIdentifier:
        return cls(ident.nb_ptc, ident.nb_pc, ident.nb_classes, ident.tk_nextmove,
                   ident.tk_output, norm_probs=norm_probs, tk_row=ident.tk_row)  # fmt: skip

    class Tempered(LanguageIdentifier):  # same layout, other arithmetic (a future release)
        __slots__ = ()

        def classify(self, text: str) -> tuple[str, float]:
            lang, conf = super().classify(text)
            return lang, conf / 2

    assert langwalk.batch_classifier(build(LanguageIdentifier, True)) is not None
    assert langwalk.batch_classifier(build(LanguageIdentifier, False)) is None  # raw scores
    assert langwalk.batch_classifier(build(Tempered, True)) is None
