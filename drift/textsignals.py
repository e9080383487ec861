"""Per-call text signals computed from captured prompt / output text.

Pure functions of one string; the drift tests then run on the per-window columns they produce
(refusal and empty-output rates as proportions, language as a categorical mix, language
mismatch as a proportion; docs/reference/drift-canary-judge-methods.md §4).

Unknown stays unknown: a ``None`` text (content not captured for the tenant) gives ``None``,
never ``False`` or a language, so the report drops it as a null instead of counting it as a
non-refusal.

Language identification uses ``py3langid`` (BSD-3-Clause), a maintained fork of Lui &
Baldwin's langid.py (ACL 2012 demo): a multinomial naive Bayes over byte n-grams for 97
languages whose model (4.5 MB) ships inside the wheel, so it works offline with no download at
run time; it depends only on numpy and is pure Python. fastText lid.176 is more accurate on
very short texts but needs a 126 MB model download (917 kB compressed, less accurate) and a C++
extension; CLD3 needs protobuf and a native build; lingua-py's wheels carry much larger models.
For a drift signal (the language mix of a window, not one text's label) langid's accuracy is
ample.
Many texts are identified at once by :func:`detect_languages` (:mod:`drift.langwalk`: the same
answers, the automaton walked in numpy).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING

from collector.lake import textfeatures
from drift.langwalk import BatchClassifier, batch_classifier

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier

# Refusal / apology openings, request verbs and the searched opening: one definition, in the
# lake's text features (:mod:`collector.lake.textfeatures`, whose DuckDB expression sealing
# evaluates); this module applies the same rule to one string.
REFUSAL_MARKERS = textfeatures.REFUSAL_MARKERS
_REQUEST_WORDS = textfeatures.REQUEST_WORDS
_FIRST_PERSON = textfeatures.FIRST_PERSON
REFUSAL_WINDOW_CHARS = textfeatures.REFUSAL_WINDOW_CHARS
_LETTERS = re.compile(r"[^\W\d_]", re.UNICODE)


@dataclass(frozen=True, slots=True)
class LanguageGuess:
    """Language of one text.

    Attributes:
        language: ISO 639-1 code (``"en"``, ``"fr"``, ...) as langid.py labels it, or ``"und"``
            when the best probability is below the detector's ``min_confidence``.
        confidence: posterior probability of ``language`` in [0, 1] (length-normalised softmax
            over the 97 languages, py3langid ``norm_probs=True``).
    """

    language: str
    confidence: float


def _fold(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").lower()


def refusal_marker(text: str | None, *, window_chars: int = REFUSAL_WINDOW_CHARS) -> str | None:
    """The refusal marker that fires on ``text``, or ``None`` when none does.

    Heuristic (reference notes §4, "Heuristic refusal detection", point 1): a marker from
    :data:`REFUSAL_MARKERS` must occur in the opening of the output, its first ``window_chars``
    characters (about the first sentence or two), because "I cannot" deep in a helpful answer
    is not a refusal. First-person "I cannot / I won't" markers also
    need a request verb ("help", "provide", "assist", ...) in that opening.

    Args:
        text: the model output; ``None`` when not captured.
        window_chars: length of the opening that is searched, in characters (> 0).

    Returns:
        The matched marker (lower-case) or ``None``.

    Raises:
        ValueError: ``window_chars`` ≤ 0.
    """
    if window_chars <= 0:
        raise ValueError(f"window_chars must be > 0, got {window_chars!r}")
    if text is None:
        return None
    opening = _fold(text.strip())[:window_chars]
    for marker in REFUSAL_MARKERS:
        if marker in opening:
            if marker in _FIRST_PERSON and not _REQUEST_WORDS.search(opening):
                continue
            return marker
    return None


def is_refusal(text: str | None, *, window_chars: int = REFUSAL_WINDOW_CHARS) -> bool | None:
    """Whether the output looks like a refusal (see :func:`refusal_marker` for the rule).

    Args:
        text: the model output; ``None`` when not captured.
        window_chars: length of the searched opening, in characters.

    Returns:
        ``True`` / ``False``; ``None`` when ``text`` is ``None`` (unknown). An empty output is
        not a refusal (it has its own signal, :func:`is_empty_output`).

    Raises:
        ValueError: ``window_chars`` ≤ 0.

    Known limits: noisy by design (false positives on answers that open with an apology for a
    limitation, false negatives on refusals phrased otherwise or not in English); calibrate
    against a judge (reference notes §4, point 3) before paging on it.
    """
    if text is None:
        return None
    return refusal_marker(text, window_chars=window_chars) is not None


def is_empty_output(text: str | None) -> bool | None:
    """Whether the output is empty or whitespace only.

    Returns ``None`` when ``text`` is ``None`` (not captured), never ``True``: a missing capture
    is not an empty answer.
    """
    if text is None:
        return None
    return text.strip() == ""


@lru_cache(maxsize=4)
def _identifier(min_confidence: float | None) -> LanguageIdentifier:
    """Load the py3langid model once per process (about 0.3 s, 4.5 MB shipped in the wheel)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(
        MODEL_FILE, norm_probs=True, min_confidence=min_confidence
    )


def detect_language(
    text: str | None, *, min_letters: int = 3, min_confidence: float | None = None
) -> LanguageGuess | None:
    """Identify the language of a prompt or an output.

    Args:
        text: the text; ``None`` when not captured.
        min_letters: texts with fewer letters (Unicode letters, not digits or punctuation) give
            ``None``: a code block or "42" has no language.
        min_confidence: optional probability floor in [0, 1]; below it the label is ``"und"``.

    Returns:
        ``LanguageGuess`` or ``None`` (unknown).

    Raises:
        ValueError: ``min_letters`` < 1 or ``min_confidence`` outside [0, 1].

    Source: Lui & Baldwin (2012), "langid.py: An Off-the-shelf Language Identification Tool",
    ACL System Demonstrations; via ``py3langid`` (see the module docstring for the choice).
    """
    _check_language_params(min_letters, min_confidence)
    if not _has_letters(text, min_letters):
        return None
    lang, conf = _identifier(min_confidence).classify(text)
    return LanguageGuess(language=str(lang), confidence=float(conf))


def _check_language_params(min_letters: int, min_confidence: float | None) -> None:
    if min_letters < 1:
        raise ValueError(f"min_letters must be >= 1, got {min_letters!r}")
    if min_confidence is not None and not 0.0 <= min_confidence <= 1.0:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence!r}")


def _has_letters(text: str | None, min_letters: int) -> bool:
    """Whether ``text`` holds at least ``min_letters`` Unicode letters (stops counting there)."""
    return text is not None and sum(1 for _ in islice(_LETTERS.finditer(text), min_letters)) >= (
        min_letters
    )


@lru_cache(maxsize=4)
def _batch(min_confidence: float | None) -> BatchClassifier | None:
    """The batch classifier of :func:`_identifier` (None: the installed py3langid is called
    text by text, :func:`drift.langwalk.batch_classifier`)."""
    return batch_classifier(_identifier(min_confidence))


def detect_languages(
    texts: Sequence[str | None], *, min_letters: int = 3, min_confidence: float | None = None
) -> list[LanguageGuess | None]:
    """:func:`detect_language` of every text, equal to it element for element (the same label
    and the same confidence, bit for bit), several times faster on hundreds of texts.

    py3langid walks each text's UTF-8 bytes through a byte n-gram automaton in a Python loop
    (most of its time); here the automaton advances every text of a batch one byte position
    per numpy step, and each text's visit counts then enter py3langid's own naive Bayes
    scoring one text at a time, in the library's order, so every float is computed as
    :func:`detect_language` computes it. An installed py3langid without that layout (< 0.4)
    is called text by text.

    Args:
        texts: the texts; ``None`` entries give ``None``.
        min_letters, min_confidence: as in :func:`detect_language`.

    Returns:
        One ``LanguageGuess`` or ``None`` per text, in order.

    Raises:
        ValueError: ``min_letters`` < 1 or ``min_confidence`` outside [0, 1].

    Source: Lui & Baldwin (2012), via ``py3langid`` (module docstring).
    """
    _check_language_params(min_letters, min_confidence)
    out: list[LanguageGuess | None] = [None] * len(texts)
    todo = [(i, t) for i, t in enumerate(texts) if t is not None and _has_letters(t, min_letters)]
    batch = _batch(min_confidence)
    if batch is not None:
        guesses = batch.classify([t for _, t in todo])
    else:
        guesses = [_identifier(min_confidence).classify(t) for _, t in todo]
    for (i, _), (lang, conf) in zip(todo, guesses, strict=True):
        out[i] = LanguageGuess(language=str(lang), confidence=float(conf))
    return out


def language_mismatch(prompt: LanguageGuess | None, output: LanguageGuess | None) -> bool | None:
    """Whether the output is in another language than the prompt.

    Returns ``None`` when either language is unknown (``None`` or ``"und"``), otherwise
    ``prompt.language != output.language``. A proportion signal (reference notes §4,
    "Language mix").
    """
    if prompt is None or output is None or "und" in (prompt.language, output.language):
        return None
    return prompt.language != output.language
