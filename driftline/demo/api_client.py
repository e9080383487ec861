"""The demo's client of the collector's REST API (rollouts, alert rules, summaries)."""

from __future__ import annotations

from typing import Any

import click
import httpx


class Api:
    """Small client of the collector's REST API for the story and its summary."""

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=30)

    def get(self, path: str, **params: Any) -> Any:
        """The JSON body, or None when the route is absent, fails or is slow (the summary
        then says 'n/a' instead of stopping the demo)."""
        try:
            r = self.http.get(path, params=params)
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(path, json=body)


def upsert_rules(api: Api, rules: list[dict[str, Any]]) -> None:
    """Create each alert rule, or replace it (PUT) when one of that name exists (a rerun).

    Raises:
        click.ClickException: the collector refused a rule (naming it, with its answer).
    """
    for rule in rules:
        r = api.post("/api/v1/alerts/rules", rule)
        if r.status_code == 409:
            r = api.http.put(f"/api/v1/alerts/rules/{rule['name']}", json=rule)
        if r.status_code not in (200, 201):
            raise click.ClickException(f"alert rule {rule['name']}: {r.text}")
