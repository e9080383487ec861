"""Errors of the alerting subsystem (all under :class:`collector.errors.CollectorError`)."""

from __future__ import annotations

from collector.errors import CollectorError, ConfigError


class AlertError(CollectorError):
    """Root of the errors raised on purpose by ``alerts``."""


class ReceiverNotFoundError(AlertError):
    """A notification names a receiver that is not configured for its tenant."""


class ReceiverConfigError(AlertError, ConfigError):
    """The receivers file is missing, unreadable or invalid; the message says where."""
