"""Prompt sets shipped with driftline (package data)."""
