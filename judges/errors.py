"""Error hierarchy of the judges package: every error raised on purpose derives from JudgeError.

A judge that cannot produce a verdict raises; it never returns a score of 0 (docs/STYLE.md,
"Judges").
"""

from __future__ import annotations


class JudgeError(Exception):
    """Root of every error the judges package raises on purpose.

    ``raw_text`` carries the judge model's raw output when there was one (parse failures), so the
    caller can log it and count parse failures as a judge-health metric (reference §3.3).
    """

    def __init__(self, message: str, *, raw_text: str | None = None) -> None:
        super().__init__(message)
        self.raw_text = raw_text


class JudgeParseError(JudgeError):
    """The judge answered, but its output is not a valid verdict for the rubric."""


class JudgeUnavailableError(JudgeError):
    """The judge endpoint kept failing (429 / 5xx / timeout / connection) after every retry."""


class JudgeRequestError(JudgeError):
    """The judge endpoint refused the request for a reason retries cannot fix (401, 403, 404)."""


class RubricError(JudgeError):
    """A rubric file or rubric data is invalid; the message names the file and the field."""
