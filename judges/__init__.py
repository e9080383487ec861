"""driftline judges: sampling, rubrics, the LLM-as-judge runner, agreement and PPI++ estimates.

Modules: ``sampling`` (which calls to judge, π_i), ``rubrics`` (TOML rubrics), ``runner``
(pointwise ``judge_call``), ``pairwise`` (``judge_pair``), ``semconv`` (gen_ai.evaluation.*),
``agreement`` (κ, Spearman, confusion), ``ppi`` (PPI++ mean), ``judge_drift``, ``flywheel``,
``errors`` (``JudgeError`` root). Nothing here reads the environment or builds API clients.
"""
