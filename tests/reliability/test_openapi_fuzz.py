"""schemathesis against the collector's own OpenAPI document: every operation of every router
in ``driftline.app.ROUTERS`` is called with generated inputs over real HTTP (a uvicorn server
in this process, ``--dev``, SQLite) and must never answer 5xx (``not_a_server_error``).

Two passes: schemathesis' own generation (values its schema allows), then an edge sweep that
sets each query and path parameter, and each top-level field of a generated JSON body, to
numeric edge values in turn (NaN, infinities, past int64, past the int64 nanosecond range of
a time, far-future and pre-1970 dates, NUL): the values that once answered 500 (issue 35).

The sweep runs on SQLite and on PostgreSQL. The schema is read from the running app, so
routers registered later are covered without editing this file. Generation is derandomized
and deadline-free so CI runs the same inputs. ~90 s for the three tests on a 2-core machine.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.schemas import APIOperation

from tests.conftest import LiveCollector, free_port, make_settings

#: generated cases per operation at most (45 operations today; ~20-30 s in all)
EXAMPLES_PER_OPERATION = 25

#: values a query or path parameter takes in the edge sweep (each alone, as text)
EDGE_TEXT = [
    "inf",
    "-inf",
    "nan",
    "1e12",  # unix seconds past 2262 (int64 nanoseconds)
    "1e30",
    "-1e30",
    "1e308",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "9" * 40,
    "99999999999d",
    "10000-01-01T00:00:00Z",
    "0001-01-01T00:00:00",
    "a\x00b",
]
#: values a JSON body field takes in the edge sweep (numbers and the same texts)
EDGE_JSON: list[Any] = [
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -1e308,
    2**63,
    -(2**63) - 1,
    10**30,
    -1,
    *EDGE_TEXT,
]


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


_FEEDBACK = {
    "trace_id": "ab" * 16,
    "kind": "rating",
    "value": 4,
    "timestamp": "1780000000",
    "comment": "c",
    "user_id": "u1",
    "metadata": {"source": "web"},
}
#: valid bodies of routes whose schema is free-form (``Any``, ``dict``): schemathesis cannot
#: generate their fields, so the sweep starts from these
SEED_BODIES: dict[str, dict[str, Any]] = {
    "POST /api/v1/scores": {
        "items": [
            {
                "trace_id": "ab" * 16,
                "name": "accuracy",
                "data_type": "numeric",
                "value": 0.5,
                "timestamp": "1780000000",
                "comment": "c",
                "attributes": {"k": 1},
            }
        ]
    },
    "POST /api/v1/feedback": _FEEDBACK,
    "POST /api/v1/feedback/batch": {"items": [_FEEDBACK]},
}


def base_case(operation: APIOperation) -> schemathesis.Case:
    """One generated case of ``operation`` (the same on every run): the base of the sweep."""
    found: list[schemathesis.Case] = []

    @settings(
        max_examples=1,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def grab(case: schemathesis.Case) -> None:
        found.append(case)

    grab()
    return found[0]


def edge_cases(operation: APIOperation) -> Iterator[tuple[str, schemathesis.Case]]:
    """(what was set, case) for each parameter and top-level body field × edge value."""
    base = base_case(operation)
    path = dict(base.path_parameters or {})

    def make(query: dict[str, Any] | None = None, **kw: Any) -> schemathesis.Case:
        body = kw.get("body", base.body)
        return operation.Case(
            path_parameters=kw.get("path", path), query=query or {}, body=body,
            media_type=base.media_type,
        )  # fmt: skip

    for param in operation.iter_parameters():
        where = param.location.value
        for value in EDGE_TEXT if where in ("query", "path") else []:
            if where == "path":
                case = make(path={**path, param.name: quote(value, safe="")})
            else:
                case = make({param.name: value})
            yield f"{where} {param.name}={value!r}", case
    seed = SEED_BODIES.get(f"{operation.method.upper()} {operation.path}", base.body)
    if not isinstance(seed, dict):
        return
    top: dict[str, Any] = seed
    items = top.get("items")
    first = items[0] if isinstance(items, list) and items else None
    targets = [top, first] if isinstance(first, dict) else [top]
    for target, fields in enumerate(targets):
        for field in list(fields):
            for value in EDGE_JSON:
                body: dict[str, Any] = copy.deepcopy(top)
                (body if target == 0 else body["items"][0])[field] = value
                yield f"body {'items[0].' if target else ''}{field}={value!r}", make(body=body)


def sweep_operation(operation: APIOperation, base_url: str) -> list[str]:
    """The edge sweep of one operation: each 5xx (or failed call) as text. Sent with httpx,
    the body serialised by Python's ``json`` (NaN and Infinity included, as a client may)."""
    failures = []
    with httpx.Client(base_url=base_url, timeout=30) as http:
        for what, case in edge_cases(operation):
            body = case.body if isinstance(case.body, dict | list) else None
            try:
                r = http.request(
                    case.method,
                    case.formatted_path,
                    params=case.query,
                    content=None if body is None else json.dumps(body),
                    headers=None if body is None else {"content-type": "application/json"},
                )
            except httpx.HTTPError as exc:
                failures.append(f"{operation.method.upper()} {operation.path} {what}: {exc!r}")
                continue
            if r.status_code >= 500:
                failures.append(
                    f"{operation.method.upper()} {operation.path} {what}: "
                    f"{r.status_code} {r.text[:300]}"
                )
    return failures


def operations_of(live: LiveCollector) -> list[APIOperation]:
    schema = schemathesis.openapi.from_url(f"{live.http_url}/openapi.json")
    operations: list[APIOperation] = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"an operation schemathesis cannot read: {result.err()}"
        operations.append(result.ok())
    assert len(operations) >= 10, "the schema lost its routes"
    return operations


def test_no_operation_answers_5xx(live: LiveCollector) -> None:
    failures = [f for f in map(fuzz_operation, operations_of(live)) if f is not None]
    assert not failures, "\n\n".join(failures)
    assert httpx.get(f"{live.http_url}/healthz").status_code == 200


def sweep(live: LiveCollector) -> None:
    failures = [f for op in operations_of(live) for f in sweep_operation(op, live.http_url)]
    assert not failures, f"{len(failures)} cases answered 5xx:\n\n" + "\n\n".join(failures)
    assert httpx.get(f"{live.http_url}/healthz").status_code == 200


def test_no_operation_answers_5xx_to_edge_values(live: LiveCollector) -> None:
    sweep(live)


@pytest.mark.postgres
def test_no_operation_answers_5xx_to_edge_values_on_postgres(pg_url: str) -> None:
    """PostgreSQL binds what SQLite takes as is (an INTEGER column refused a cursor of 2**31)."""
    live = LiveCollector(
        make_settings(
            pg_url, http_port=free_port(), grpc_port=0, grpc_enabled=False, scheduler_enabled=False
        )
    ).start()
    try:
        sweep(live)
    finally:
        live.stop()
