"""``GET /api/v1/drift/runs`` and ``GET /api/v1/drift/runs/{run_id}``: stored drift runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from collector.errors import BadRequestError, NotFoundError
from collector.store import driftqueries
from driftline.api.deps import ReadTenant, State
from driftline.api.params import Cursor

router = APIRouter(prefix="/api/v1", tags=["drift"])


def verdict(result: dict[str, Any]) -> str:
    """``drift`` | ``no_drift`` (tested, no drift) | ``insufficient_data`` (not enough data to
    test: below ``min_samples``, never reported as no drift) of one stored result."""
    if result.get("insufficient_data") or result.get("drifted") is None:
        return "insufficient_data"
    return "drift" if result["drifted"] else "no_drift"


@router.get("/drift/runs", summary="Drift runs of the tenant, newest first")
def list_drift_runs(
    state: State,
    tenant: ReadTenant,
    limit: Annotated[int, Query(ge=1, le=driftqueries.MAX_PAGE)] = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    try:
        with state.engine.connect() as conn:
            items, next_cursor = driftqueries.list_runs(conn, tenant, limit=limit, cursor=cursor)
    except ValueError as exc:
        raise BadRequestError(str(exc)) from None
    return {"items": items, "next_cursor": next_cursor}


@router.get(
    "/drift/runs/{run_id}",
    summary="One drift run with every signal × segment result and its histograms",
)
def get_drift_run(
    run_id: str,
    state: State,
    tenant: ReadTenant,
    drifted_only: bool = False,
) -> dict[str, Any]:
    with state.engine.connect() as conn:
        run = driftqueries.get_run(conn, tenant, run_id, drifted_only=drifted_only)
    if run is None:
        raise NotFoundError(f"drift run {run_id!r} not found")
    for result in run["results"]:
        result["verdict"] = verdict(result)
    if not drifted_only:
        run["n_insufficient_data"] = sum(
            r["verdict"] == "insufficient_data" for r in run["results"]
        )
    return run
