"""``gpuatlas export-control``: the export-control answer for one GPU and destination.

Exit codes as in docs/cli.md: 0 ok, 1 error (unknown GPU, no rule set in force), 2 usage
(malformed or unknown country, bad date).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated

import typer

from service.cli.common import CliError, UsageProblem, engine, handle_errors
from service.cli.output import Format, dumps, emit


@handle_errors
def export_control_cmd(
    gpu: Annotated[str, typer.Argument(help="GPU slug or any alias, e.g. 'H100 SXM5 80GB'")],
    destination: Annotated[
        str, typer.Option("--destination", "-d", help="ISO 3166-1 alpha-2 country, e.g. CN")
    ],
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="day to answer for, YYYY-MM-DD (UTC)")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="table or json")] = Format.table,
) -> None:
    """Classification, TPP, rule set in force and licence answer (not legal advice)."""
    from service.compliance.countries import InvalidCountry, parse_country
    from service.compliance.queries import BadCountry, ComplianceError, export_control

    try:
        country = parse_country(destination)
    except InvalidCountry as exc:
        raise UsageProblem(f"--destination: {exc}") from None
    day = _parse_day(as_of, UsageProblem)
    try:
        with engine().connect() as conn:
            answer = export_control(conn, gpu, country, day)
    except BadCountry as exc:
        raise UsageProblem(str(exc)) from None
    except ComplianceError as exc:
        raise CliError(str(exc)) from None
    body = answer.to_dict()
    if fmt is Format.json:
        typer.echo(dumps(body).decode())
        return
    if fmt is not Format.table:
        raise UsageProblem("--format: use table or json")
    cls = body["classification"]
    eccn = f"{cls['paragraph'] or cls['eccn']} ({cls['basis']})"
    rows = [
        {"field": "gpu", "value": f"{body['gpu']} ({body['gpu_name']})"},
        {"field": "destination", "value": body["destination"]},
        {"field": "as of", "value": body["as_of"]},
        {"field": "rule set", "value": body["rule_set"]["slug"]},
        {"field": "classification", "value": eccn},
        {"field": "TPP", "value": body["tpp"] or "unknown"},
        {"field": "performance density", "value": body["performance_density"] or "unknown"},
        {"field": "licence", "value": body["licence"]},
        {"field": "licence exception", "value": body["licence_exception"] or ""},
        {"field": "review policy", "value": body["review_policy"] or ""},
    ]
    if body["ai_diffusion_tier"]:
        rows.append({"field": "AI diffusion tier", "value": body["ai_diffusion_tier"]})
    rows += [{"field": "reason", "value": r} for r in body["reasons"]]
    rows += [{"field": "citation", "value": c} for c in body["citations"]]
    emit(rows, Format.table, ["field", "value"], title="export control")
    typer.echo(body["notice"])


def _parse_day(value: str | None, error: type[Exception]) -> date:
    if value is None:
        return datetime.now(UTC).date()
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise error(f"--as-of: {value!r} is not a date (YYYY-MM-DD)") from None
