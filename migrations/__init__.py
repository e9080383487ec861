"""Alembic migrations of driftline. Revisions never import project code."""
