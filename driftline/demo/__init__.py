"""``driftline demo``: the product end to end (see :mod:`driftline.demo.cli`)."""

from __future__ import annotations

from driftline.demo.cli import demo

__all__ = ["demo"]
