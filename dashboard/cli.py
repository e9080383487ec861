"""``driftline dashboard``: run the Streamlit app (``dashboard/app.py``) as a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import click

from dashboard.settings import load_dashboard_settings

APP = Path(__file__).resolve().parent / "app.py"


def streamlit_argv(host: str, port: int) -> list[str]:
    """The ``streamlit run`` command line of the app on ``host:port`` (headless, no telemetry)."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--theme.base",
        "light",
        # users see the app, not Streamlit's developer menu (no "Deploy", no rerun settings)
        "--client.toolbarMode",
        "viewer",
    ]


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@click.command("dashboard")
@click.option("--host", default=None, help="Bind address (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="HTTP port (default 8501).")
@click.option("--database-url", default=None, help="Overrides DRIFTLINE_DATABASE_URL.")
@click.option("--dev", is_flag=True, default=None, help="No login (loopback only).")
def dashboard(
    host: str | None, port: int | None, database_url: str | None, dev: bool | None
) -> None:
    """Run the Streamlit dashboard (port 8501); outside --dev it asks for an API key."""
    settings = load_dashboard_settings(
        dashboard_host=host, dashboard_port=port, database_url=database_url, dashboard_dev=dev
    )
    env = {
        **os.environ,
        "DRIFTLINE_DATABASE_URL": settings.database_url,
        "DRIFTLINE_DASHBOARD_DEV": "true" if settings.dashboard_dev else "false",
        "DRIFTLINE_DASHBOARD_HOST": settings.dashboard_host,
    }
    mode = "dev mode, no login" if settings.dashboard_dev else "login with an API key"
    click.echo(
        f"driftline dashboard: http://{settings.dashboard_host}:{settings.dashboard_port} "
        f"({mode}), store {settings.database_url}"
    )
    # SIGTERM (kill, systemd, a supervisor) stops the Streamlit child too, like Ctrl-C does:
    # it must not outlive us holding the port
    signal.signal(signal.SIGTERM, _terminate)
    proc = subprocess.Popen(
        streamlit_argv(settings.dashboard_host, settings.dashboard_port), env=env
    )
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            rc = proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait(5)
        rc = 0
    if rc:
        raise SystemExit(rc)
