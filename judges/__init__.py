"""driftline package."""
