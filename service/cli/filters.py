"""The listing filters of ``offers``, ``eligible`` and ``export``: one list of options, parsed
by the API's own code.

Every option of :func:`filter_options` is a parameter of ``GET /v1/offers`` under the same
name (``--min-gpus`` is ``min_gpus``), and they are parsed by the API's own
:func:`service.api.params.listing`, so the CLI and the API cannot drift apart.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from service.api.params import Listing

MAX_NUMBER = Decimal(1_000_000)
GDPR_ZONES = ("eu_eea", "adequacy", "any")


@dataclass(frozen=True)
class FilterArgs:
    """The listing filters as typed on the command line (unchecked strings)."""

    gpu: str | None = None
    min_gpus: str | None = None
    max_gpus: str | None = None
    min_gpu_memory_gb: str | None = None
    provider: list[str] | None = None
    price_kind: str | None = None
    region: str | None = None
    country: str | None = None
    not_country: list[str] | None = None
    gdpr: str | None = None
    cert: list[str] | None = None
    provider_hq_not_in: list[str] | None = None
    export_destination: str | None = None
    bare_metal: bool | None = None
    max_price_per_gpu_hour: str | None = None
    interconnect: list[str] | None = None
    network: list[str] | None = None
    min_network_gbps: str | None = None
    source: str | None = None
    include_peers: bool = False
    as_of: str | None = None


_FILTER_OPTIONS: list[tuple[str, Any]] = [
    ("gpu", Annotated[str | None, typer.Option(help="GPU slug or family, e.g. h100")]),
    ("min_gpus", Annotated[str | None, typer.Option("--min-gpus", help="at least N GPUs")]),
    ("max_gpus", Annotated[str | None, typer.Option("--max-gpus", help="at most N GPUs")]),
    (
        "min_gpu_memory_gb",
        Annotated[str | None, typer.Option("--min-gpu-memory-gb", help="GB per GPU")],
    ),
    (
        "provider",
        Annotated[
            list[str] | None, typer.Option(help="provider slug (repeatable or comma-separated)")
        ],
    ),
    ("price_kind", Annotated[str | None, typer.Option("--price-kind", help="e.g. on_demand")]),
    ("region", Annotated[str | None, typer.Option(help="provider region code")]),
    ("country", Annotated[str | None, typer.Option(help="ISO 3166 alpha-2, e.g. DE")]),
    (
        "not_country",
        Annotated[
            list[str] | None,
            typer.Option("--not-country", help="exclude regions in these countries"),
        ],
    ),
    (
        "gdpr",
        Annotated[
            str | None,
            typer.Option(help="eu_eea, adequacy or any: where EU personal data may go"),
        ],
    ),
    (
        "cert",
        Annotated[
            list[str] | None,
            typer.Option(help="certification the provider must hold today (repeatable)"),
        ],
    ),
    (
        "provider_hq_not_in",
        Annotated[
            list[str] | None,
            typer.Option(
                "--provider-hq-not-in", help="exclude providers headquartered in these countries"
            ),
        ],
    ),
    (
        "export_destination",
        Annotated[
            str | None,
            typer.Option(
                "--export-destination",
                help="drop GPUs needing an export licence for this country",
            ),
        ],
    ),
    (
        "bare_metal",
        Annotated[bool | None, typer.Option("--bare-metal/--no-bare-metal", help="bare metal")],
    ),
    (
        "max_price_per_gpu_hour",
        Annotated[str | None, typer.Option("--max-price-per-gpu-hour", help="USD")],
    ),
    (
        "interconnect",
        Annotated[
            list[str] | None,
            typer.Option(
                help="GPU interconnect in the node: nvlink, nvswitch, pcie, infinity_fabric "
                "(repeatable or comma-separated)"
            ),
        ],
    ),
    (
        "network",
        Annotated[
            list[str] | None,
            typer.Option(
                help="network between nodes: infiniband, roce, efa, ethernet "
                "(repeatable or comma-separated)"
            ),
        ],
    ),
    (
        "min_network_gbps",
        Annotated[str | None, typer.Option("--min-network-gbps", help="Gb/s per node, at least")],
    ),
    ("source", Annotated[str | None, typer.Option(help="crawl source name")]),
    (
        "include_peers",
        Annotated[
            bool,
            typer.Option(
                "--include-peers",
                help="every source's copy of an offer, not only the most authoritative one",
            ),
        ],
    ),
    (
        "as_of",
        Annotated[str | None, typer.Option("--as-of", help="catalog version or ISO 8601 time")],
    ),
]


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Give a command every listing filter option; it receives them as ``filters: FilterArgs``.

    One list of options for ``offers``, ``eligible`` and ``export``, so they cannot differ.
    """
    own = inspect.signature(func, eval_str=True)
    params = [p for p in own.parameters.values() if p.name != "filters"]
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=annotation,
            default=getattr(FilterArgs, name),
        )
        for name, annotation in _FILTER_OPTIONS
    ]
    names = {name for name, _ in _FILTER_OPTIONS}

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        picked = {name: kwargs.pop(name) for name in list(kwargs) if name in names}
        return func(*args, filters=FilterArgs(**picked), **kwargs)

    keyword_only = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]
    wrapper.__signature__ = own.replace(parameters=[*keyword_only, *extra])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in (*keyword_only, *extra)}
    del wrapper.__wrapped__  # typer must read the new signature, not the original's
    return wrapper


def _number(name: str, value: str | None, usage: type[Exception]) -> Decimal | None:
    if value is None:
        return None
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        raise usage(f"--{name}: {value!r} is not a number") from None
    if not number.is_finite() or not Decimal(0) <= number <= MAX_NUMBER:
        raise usage(f"--{name}: must be between 0 and {MAX_NUMBER}")
    from schema.types import within_scale

    try:  # as the API's parameters: what the database can compare exactly
        return within_scale(number)
    except ValueError as exc:
        raise usage(f"--{name}: {exc}") from None


def _country(name: str, value: str | None, usage: type[Exception]) -> str | None:
    if value is None:
        return None
    if len(value) != 2 or not value.isascii() or not value.isalpha():
        raise usage(f"--{name}: use an ISO 3166 alpha-2 code, e.g. DE")
    return value


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@contextmanager
def api_problems(usage: type[Exception], error: type[Exception]) -> Iterator[None]:
    """The API's validation errors (RFC 9457 problems) as CLI errors: 422 is a usage error."""
    from service.api.problems import Problem

    try:
        yield
    except Problem as exc:
        message = exc.detail or exc.title
        for param in exc.invalid_params or []:
            name = param.get("name", "")
            if message.startswith(f"{name}:"):
                message = _flag(name) + message[len(name) :]
        raise (usage if exc.status == 422 else error)(message) from None


def build_listing(
    conn: Connection, args: FilterArgs, usage: type[Exception], error: type[Exception]
) -> Listing:
    """Check the options as the API's Query() declarations do, then parse them as it does."""
    from schema.enums import PriceKind
    from service.api.params import listing

    for name, limit in (("gpu", 64), ("region", 100), ("source", 100), ("as_of", 40)):
        value = getattr(args, name)
        if value is not None and len(value) > limit:
            raise usage(f"{_flag(name)}: longer than {limit} characters")
    kind = None
    if args.price_kind is not None:
        if args.price_kind not in PriceKind.__members__:
            known = ", ".join(PriceKind.__members__)
            raise usage(f"--price-kind: unknown {args.price_kind!r} (one of {known})")
        kind = PriceKind(args.price_kind)
    if args.gdpr is not None and args.gdpr not in GDPR_ZONES:
        raise usage(f"--gdpr: one of {', '.join(GDPR_ZONES)}")
    with api_problems(usage, error):
        return listing(
            conn,
            gpu=args.gpu,
            min_gpus=_number("min-gpus", args.min_gpus, usage),
            max_gpus=_number("max-gpus", args.max_gpus, usage),
            min_gpu_memory_gb=_number("min-gpu-memory-gb", args.min_gpu_memory_gb, usage),
            provider=args.provider,
            price_kind=kind,
            region=args.region,
            country=_country("country", args.country, usage),
            not_country=args.not_country,
            gdpr=args.gdpr,  # type: ignore[arg-type]
            cert=args.cert,
            provider_hq_not_in=args.provider_hq_not_in,
            export_destination=_country("export-destination", args.export_destination, usage),
            bare_metal=args.bare_metal,
            max_price_per_gpu_hour=_number(
                "max-price-per-gpu-hour", args.max_price_per_gpu_hour, usage
            ),
            interconnect=args.interconnect,
            network=args.network,
            min_network_gbps=_number("min-network-gbps", args.min_network_gbps, usage),
            source=args.source,
            include_peers=args.include_peers,
            as_of=args.as_of,
        )
