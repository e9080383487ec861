"""The ``driftline`` command line.

Sub-commands owned by other packages are loaded lazily (``click`` lazy group), so
``driftline collector`` never imports vLLM, torch or streamlit.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from collector.errors import ConfigError

#: command name -> "module:attribute" of a click command or group, imported on first use.
LAZY_COMMANDS: dict[str, str] = {
    "collector": "driftline.commands:collector",
    "db": "driftline.commands:db",
    "keys": "driftline.commands:keys",
    "tenants": "driftline.commands:tenants",
    "retention": "driftline.commands:retention",
    "spool": "driftline.commands:spool",
    "demo": "driftline.demo:demo",
    "serving": "serving.cli:serving",
    "gateway": "serving.cli:gateway",
    "load": "serving.cli:load",
    "drift": "drift.canary.cli:drift",
    "canary": "drift.canary.cli:canary",
    "judge": "judges.cli:judge",
    "export": "judges.cli:export",
    "alerts": "alerts.cli:alerts",
    "dashboard": "dashboard.cli:dashboard",
}
#: command name -> "module:function" called with the loaded group to add commands to it.
ATTACH: dict[str, str] = {
    "canary": "driftline.canary_client:attach",
    "export": "driftline.exports:attach",
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported only when invoked or listed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module_name, attr = LAZY_COMMANDS[cmd_name].split(":")
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name and module_name.startswith(exc.name):
                    return None  # that part of driftline is not built/installed
                raise
            cmd = getattr(module, attr, None)
            if isinstance(cmd, click.Group) and cmd_name in ATTACH:
                attach_mod, attach_fn = ATTACH[cmd_name].split(":")
                getattr(importlib.import_module(attach_mod), attach_fn)(cmd)
            return cmd if isinstance(cmd, click.Command) else None
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup)
@click.version_option(package_name="driftline")
def cli() -> None:
    """driftline: watch LLMs in production (OTLP gen_ai spans, judges, drift, canary)."""


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point; configuration errors exit 2 with the variable named."""
    try:
        return cli.main(args=argv, standalone_mode=True)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
