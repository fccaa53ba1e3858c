"""Data that pricing pages embed as JSON: ``__NEXT_DATA__``, ld+json, inline state.

Many pages render their tables from a JSON blob shipped in the HTML. That blob changes
less often than the markup, so spiders prefer it when present. These helpers find and
decode it; numbers with a fraction become :class:`~decimal.Decimal` (never float), so a
price read from JSON is exact.

All functions take the page's HTML text (``response.text``) and are pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from parsel import Selector

from crawlers.base import LayoutChanged

_DECODER = json.JSONDecoder(parse_float=Decimal)
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = _UPPER.lower()


def loads(text: str) -> Any:
    """``json.loads`` with exact decimals."""
    return json.loads(text, parse_float=Decimal)


def _selector(html: str | Selector) -> Selector:
    return html if isinstance(html, Selector) else Selector(text=html)


def next_data(html: str | Selector) -> Any | None:
    """The Next.js ``<script id="__NEXT_DATA__">`` payload, or None if the page has none.

    A present but undecodable blob raises :class:`LayoutChanged`.
    """
    raw = _selector(html).xpath('//script[@id="__NEXT_DATA__"]/text()').get()
    if raw is None:
        return None
    try:
        return loads(raw)
    except ValueError as exc:
        raise LayoutChanged(f"__NEXT_DATA__ is not JSON: {exc}") from None


def ld_json(html: str | Selector, *, types: set[str] | None = None) -> list[dict[str, Any]]:
    """Every schema.org node in ``application/ld+json`` scripts, ``@graph`` flattened.

    With ``types``, only nodes whose ``@type`` is one of them ("Product", "Offer"…).
    Blocks that are not valid JSON are skipped (pages often carry a broken one among
    good ones); a page whose only block is broken gives an empty list.
    """
    nodes: list[dict[str, Any]] = []
    for raw in (
        _selector(html)
        .xpath(
            f'//script[translate(normalize-space(@type), "{_UPPER}", "{_LOWER}")'
            '="application/ld+json"]/text()'
        )
        .getall()
    ):
        try:
            data = loads(raw)
        except ValueError:
            continue
        stack = data if isinstance(data, list) else [data]
        for node in stack:
            if not isinstance(node, dict):
                continue
            graph = node.get("@graph")
            if isinstance(graph, list):
                nodes.extend(n for n in graph if isinstance(n, dict))
            else:
                nodes.append(node)
    if types is None:
        return nodes
    return [n for n in nodes if _types(n) & types]


def _types(node: dict[str, Any]) -> set[str]:
    value = node.get("@type")
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    return set()


def assigned_json(html: str | Selector, name: str) -> Any | None:
    """The JSON literal assigned to ``name`` in an inline script, or None.

    Finds ``var newIslands = [...]``, ``window.__INITIAL_STATE__ = {...}`` or
    ``self.__data = {...}``: ``name`` is the left-hand side as written (``newIslands``,
    ``window.__INITIAL_STATE__``). The value must be JSON (quoted keys, no
    ``undefined``); a present but undecodable value raises :class:`LayoutChanged`.
    """
    pattern = re.compile(rf"(?:\b(?:var|let|const)\s+)?{re.escape(name)}\s*=\s*(?=[\[{{])")
    for script in _selector(html).xpath("//script[not(@src)]/text()").getall():
        match = pattern.search(script)
        if match is None:
            continue
        try:
            value, _ = _DECODER.raw_decode(script, match.end())
        except ValueError as exc:
            raise LayoutChanged(f"inline {name} is not JSON: {exc}") from None
        return value
    return None


def walk(data: Any) -> Iterator[dict[str, Any]]:
    """Every dict inside a decoded JSON value, depth first (parents before children)."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))


def find_dicts(
    data: Any, predicate: Callable[[dict[str, Any]], bool] | None = None, **match: Any
) -> list[dict[str, Any]]:
    """Dicts anywhere in ``data`` that have every ``key=value`` in ``match`` and pass
    ``predicate``: ``find_dicts(state, moduleName="TabsIsland")``."""
    found = []
    for node in walk(data):
        if all(key in node and node[key] == value for key, value in match.items()) and (
            predicate is None or predicate(node)
        ):
            found.append(node)
    return found
