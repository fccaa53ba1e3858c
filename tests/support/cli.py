"""Running the CLI in-process (the ``cli`` fixture in conftest gives the runner)."""

from __future__ import annotations

from typer.testing import CliRunner

from service.cli.app import app


def run(runner: CliRunner, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr
