"""OTLP/HTTP request bodies: media type, content encoding, and reading with decompression
under a size limit (streamed: never more than the limit in memory).

Source: opentelemetry-proto ``docs/specification.md`` (OTLP/HTTP request, compression).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from typing import Any

from collector.errors import BodyTooLargeError, DecodeError, UnsupportedMediaError

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SUPPORTED_ENCODINGS = ("gzip", "x-gzip", "deflate", "identity")


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header without parameters, lower case.

    Raises:
        UnsupportedMediaError: neither ``application/x-protobuf`` nor ``application/json``.
    """
    mt = (content_type or "").split(";", 1)[0].strip().lower()
    if mt in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if mt == JSON:
        return JSON
    raise UnsupportedMediaError(
        f"unsupported Content-Type {content_type!r}: send {PROTOBUF} or {JSON}"
    )


def _decompressor(encoding: str) -> Any:
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj(wbits=zlib.MAX_WBITS)
    return None


def content_encoding(header: str | None) -> str:
    """Normalise a Content-Encoding header; only one coding is accepted.

    Raises:
        UnsupportedMediaError: an encoding other than gzip, deflate or identity (HTTP 415).
    """
    enc = (header or "identity").strip().lower() or "identity"
    if enc not in SUPPORTED_ENCODINGS:
        raise UnsupportedMediaError(
            f"unsupported Content-Encoding {header!r}: send gzip, deflate or identity"
        )
    return enc


async def read_body(chunks: AsyncIterator[bytes], encoding: str, limit: int) -> bytes:
    """Read and decompress a request body while streaming, never holding more than ``limit``.

    Args:
        chunks: the raw body as it arrives.
        encoding: a value returned by :func:`content_encoding`.
        limit: the largest decompressed body accepted, in bytes.

    Raises:
        BodyTooLargeError: more than ``limit`` bytes before or after decompression (HTTP 413).
        DecodeError: the body could not be decompressed (HTTP 400).
    """
    d = _decompressor(encoding)
    out = bytearray()
    raw_total = 0
    async for chunk in chunks:
        if not chunk:
            continue
        raw_total += len(chunk)
        if raw_total > limit:
            raise BodyTooLargeError(f"request body exceeds the limit of {limit} bytes")
        if d is None:
            out += chunk
            continue
        data = chunk
        while data:
            try:
                piece = d.decompress(data, limit - len(out) + 1)
            except zlib.error as exc:
                raise DecodeError(
                    f"the body could not be decompressed as {encoding}: {exc}"
                ) from None
            out += piece
            if len(out) > limit:
                raise BodyTooLargeError(f"decompressed body exceeds the limit of {limit} bytes")
            data = d.unconsumed_tail
            if d.eof and d.unused_data:  # concatenated gzip members
                data = d.unused_data
                d = _decompressor(encoding)
    if d is not None:
        if raw_total and not d.eof:
            raise DecodeError(f"the body could not be decompressed as {encoding}: truncated")
        out += d.flush()
    return bytes(out)
