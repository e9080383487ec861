"""Tables of driftline: one ``Base``; one module per concept, all re-exported here.

Only this package defines tables. Migrations in ``migrations/versions`` mirror them (a test
compares them). Domain modules: ``core`` (spans, calls, tenants), ``alerts``, ``api``
(keys, feedback, engine samples), ``drift``, ``judges``, ``canary``.
"""

from __future__ import annotations

import importlib
import pkgutil

from collector.store.models.alerts import (
    Alert,
    AlertGroup,
    AlertNotification,
    AlertReceiver,
    AlertRule,
    AlertSilence,
)
from collector.store.models.base import NAMING_CONVENTION, Base
from collector.store.models.core import LLMCall, Span, Tenant

# Import every table module so Base.metadata is complete whoever imports this package.
for _mod in pkgutil.iter_modules(__path__):
    if _mod.name not in ("base",):
        importlib.import_module(f"{__name__}.{_mod.name}")

__all__ = [
    "NAMING_CONVENTION",
    "Alert",
    "AlertGroup",
    "AlertNotification",
    "AlertReceiver",
    "AlertRule",
    "AlertSilence",
    "Base",
    "LLMCall",
    "Span",
    "Tenant",
]
