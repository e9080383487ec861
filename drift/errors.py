"""Errors raised by the drift package (one root: ``DriftError``)."""

from __future__ import annotations


class DriftError(Exception):
    """Root of every error raised by ``drift``."""
