"""Error root of the serving package."""

from __future__ import annotations


class ServingError(Exception):
    """Root of every error the serving package raises on purpose."""


class EngineUnavailableError(ServingError):
    """The inference engine could not be reached or failed before answering."""
