"""``driftline demo``: the product end to end (see :mod:`collector.demo.cli`)."""

from __future__ import annotations

from collector.demo.cli import demo

__all__ = ["demo"]
