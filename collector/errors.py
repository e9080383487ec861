"""Error hierarchy of the collector. Only the API layer maps these to HTTP status codes."""

from __future__ import annotations


class CollectorError(Exception):
    """Root of every error the collector raises on purpose."""


class ConfigError(CollectorError):
    """Bad configuration; the message names the environment variable."""


class MigrationError(CollectorError):
    """A schema migration cannot run as asked (unknown or ambiguous revision); the message
    says why and what to give instead."""


class DecodeError(CollectorError):
    """An OTLP body could not be decoded (HTTP 400 / gRPC INVALID_ARGUMENT)."""


class UnsupportedMediaError(CollectorError):
    """Unsupported Content-Type or Content-Encoding (HTTP 415)."""


class BodyTooLargeError(CollectorError):
    """The body is larger than the limit after decompression (HTTP 413)."""


class QueueFullError(CollectorError):
    """The write queue is full; the client should retry after ``retry_after_s`` (HTTP 503)."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StoreUnavailableError(CollectorError):
    """The database could not be written; nothing was acknowledged (HTTP 503)."""

    def __init__(self, message: str, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotFoundError(CollectorError):
    """A requested resource does not exist for this tenant (HTTP 404)."""


class ConflictError(CollectorError):
    """The request conflicts with the resource's current state (HTTP 409): it already exists,
    or its status does not allow the change, or it changed since it was read."""


class BadRequestError(CollectorError):
    """A client request is invalid (HTTP 400); the message says why."""
