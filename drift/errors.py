"""Errors raised by the drift package (one root: ``DriftError``)."""

from __future__ import annotations


class DriftError(Exception):
    """Root of every error raised by ``drift``."""


class EmbeddingModelUnavailableError(DriftError):
    """The optional embedding model (extra ``embeddings``) is not installed or cannot load."""


class CalibrationError(DriftError):
    """The reference window is too small to calibrate a noise threshold."""
