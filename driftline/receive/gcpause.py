"""Pausing CPython's cyclic garbage collector while a large request body decodes."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

#: the cyclic garbage collector stays paused this long at most while large bodies decode
GC_PAUSE_MAX_S = 30.0

_T = TypeVar("_T")
_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_paused_at = 0.0
_gc_owned = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector while a large body is decoded (process-wide,
    counted: the last one out resumes it).

    Decoding a 30 MB OTLP/JSON body allocates millions of containers, which trigger full
    (generation 2) collections: each traversed the whole heap holding the GIL for 0.56-0.67 s
    on a 2-core VM, so the event loop stalled although the decode ran in a worker thread.
    Decoding creates no reference cycles: nothing is lost by collecting afterwards. Overlapping
    decodes never keep it paused past :data:`GC_PAUSE_MAX_S`.
    """
    global _gc_pausers, _gc_paused_at, _gc_owned
    with _gc_lock:
        _gc_pausers += 1
        now = time.monotonic()
        if _gc_pausers == 1:
            _gc_paused_at = now
            _gc_owned = gc.isenabled()
            gc.disable()
        elif _gc_owned and now - _gc_paused_at > GC_PAUSE_MAX_S:
            gc.enable()
            _gc_owned = False
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_owned:
                gc.enable()
                _gc_owned = False


def paused(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` with the collector paused (:func:`gc_paused`). Raises what ``fn`` raises."""
    with gc_paused():
        return fn(*args)
