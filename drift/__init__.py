"""Drift monitoring: signal extraction per model x variant, two-sample tests and calibrated
thresholds, drift runs and their reports. Canary / A-B decisions live in :mod:`drift.canary`.
"""
