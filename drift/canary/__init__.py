"""Canary and A/B rollouts: policy, anytime-valid sequential tests (e-values, confidence
sequences), SRM, per-arm observation and evidence, decisions, the rollout store, the scheduled job,
simulations and the ``driftline canary`` CLI.
"""
