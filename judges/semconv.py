"""Judge results in the OpenTelemetry GenAI ``gen_ai.evaluation.result`` event shape.

Attribute names from the GenAI semantic conventions v1.38+
(``docs/reference/otel-genai-otlp-webhooks.md`` §2.7): ``gen_ai.evaluation.name`` (required),
``gen_ai.evaluation.score.value`` (double), ``gen_ai.evaluation.score.label`` (low cardinality),
``gen_ai.evaluation.explanation``, ``gen_ai.response.id`` of the evaluated call when known.
"""

from __future__ import annotations

from judges.pairwise import PairwiseResult
from judges.runner import JudgeResult

EVALUATION_NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
RESPONSE_ID = "gen_ai.response.id"


def evaluation_attributes(
    result: JudgeResult | PairwiseResult, *, evaluated_response_id: str | None = None
) -> dict[str, str | float]:
    """The ``gen_ai.evaluation.result`` attributes of a pointwise or pairwise result.

    Pointwise: name = rubric name, value = ``result.score`` (omitted when the judge could not
    judge — an unknown score is absent, never 0), label = level label or ``unknown``.
    Pairwise: name = ``<rubric>_pairwise``, value = 1 / 0.5 / 0 (candidate win / tie / loss),
    label = ``win`` / ``tie`` / ``loss``. ``evaluated_response_id`` is the evaluated call's
    ``gen_ai.response.id`` (not the judge's own response id).
    """
    attributes: dict[str, str | float] = {}
    if isinstance(result, PairwiseResult):
        attributes[EVALUATION_NAME] = f"{result.rubric_name}_pairwise"
        attributes[SCORE_VALUE] = result.score
        attributes[SCORE_LABEL] = result.outcome
        attributes[EXPLANATION] = " | ".join(
            f"{j.order}: {j.preferred}: {j.explanation}" for j in result.judgements
        )
    else:
        attributes[EVALUATION_NAME] = result.rubric_name
        if result.score is not None:
            attributes[SCORE_VALUE] = result.score
        attributes[SCORE_LABEL] = result.label
        attributes[EXPLANATION] = result.explanation
    if evaluated_response_id is not None:
        attributes[RESPONSE_ID] = evaluated_response_id
    return attributes
