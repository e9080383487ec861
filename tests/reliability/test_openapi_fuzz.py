"""schemathesis against the collector's own OpenAPI document: every operation of every router
in ``driftline.app.ROUTERS`` is called with generated inputs over real HTTP (a uvicorn server
in this process, ``--dev``, SQLite) and must never answer 5xx (``not_a_server_error``).

The schema is read from the running app, so routers registered later are covered without
editing this file. Generation is derandomized and deadline-free so CI runs the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.schemas import APIOperation

from tests.conftest import LiveCollector, free_port, make_settings

#: generated cases per operation at most (45 operations today; ~20-30 s in all)
EXAMPLES_PER_OPERATION = 25


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCollector]:
    db = Path(tmp_path_factory.mktemp("openapi")) / "openapi.db"
    lc = LiveCollector(
        make_settings(
            f"sqlite:///{db}",
            http_port=free_port(),
            grpc_port=0,
            grpc_enabled=False,
            scheduler_enabled=False,
        )
    ).start()
    try:
        yield lc
    finally:
        lc.stop()


def fuzz_operation(operation: APIOperation) -> str | None:
    """Run the generated cases of one operation; the first failure as text, or None."""

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=[not_a_server_error])

    try:
        run()
    except (Exception, FailureGroup) as exc:  # reported with the operation it belongs to
        return f"{operation.method.upper()} {operation.path}: {exc}"
    return None


def test_no_operation_answers_5xx(live: LiveCollector) -> None:
    schema = schemathesis.openapi.from_url(f"{live.http_url}/openapi.json")
    operations: list[APIOperation] = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"an operation schemathesis cannot read: {result.err()}"
        operations.append(result.ok())
    assert len(operations) >= 10, "the schema lost its routes"
    failures = [f for f in map(fuzz_operation, operations) if f is not None]
    assert not failures, "\n\n".join(failures)
    assert httpx.get(f"{live.http_url}/healthz").status_code == 200
