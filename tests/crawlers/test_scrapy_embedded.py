"""Embedded page data: __NEXT_DATA__, ld+json, inline state (crawlers.normalize.embedded)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from crawlers.base import LayoutChanged
from crawlers.normalize.embedded import assigned_json, find_dicts, ld_json, next_data, walk

NEXT = """<html><body><div id="__next"></div>
<script id="__NEXT_DATA__" type="application/json">
{"props": {"pageProps": {"prices": [{"sku": "h100", "price": 2.49}, {"sku": "b200", "price": 4.99}]}}}
</script></body></html>"""

LD = """<html><head>
<script type="application/ld+json">{"@context": "https://schema.org", "@graph": [
  {"@type": "Product", "name": "H100 SXM", "offers": {"@type": "AggregateOffer", "lowPrice": "2.69"}},
  {"@type": "Organization", "name": "RunPod"}]}</script>
<script type="application/ld+json">{ this is broken </script>
<script type="Application/LD+JSON">[{"@type": ["Product", "Thing"], "name": "A100"}]</script>
</head></html>"""

INLINE = """<script>var other = 1;</script>
<script>
  var newIslands = [{"moduleName": "TabsIsland", "props": {"tabs": [{"label": "4x", "price": 3.09}]}}];
  window.__hsIslands = (window.__hsIslands || []).concat(newIslands);
</script>
<script>window.__INITIAL_STATE__ = {"gpus": {"a": {"name": "L40S", "hourly": 1.57}}};</script>"""


def test_next_data_decodes_decimals() -> None:
    data = next_data(NEXT)
    assert data is not None
    prices = data["props"]["pageProps"]["prices"]
    assert prices[0] == {"sku": "h100", "price": Decimal("2.49")}
    assert isinstance(prices[1]["price"], Decimal)  # never a float
    assert next_data("<html></html>") is None
    with pytest.raises(LayoutChanged, match="__NEXT_DATA__"):
        next_data('<script id="__NEXT_DATA__">{"cut": </script>')


def test_ld_json_flattens_graphs_and_skips_broken_blocks() -> None:
    nodes = ld_json(LD)
    assert [n["name"] for n in nodes] == ["H100 SXM", "RunPod", "A100"]
    products = ld_json(LD, types={"Product"})
    assert [n["name"] for n in products] == ["H100 SXM", "A100"]
    assert products[0]["offers"]["lowPrice"] == "2.69"
    assert ld_json("<p>no data</p>") == []


def test_assigned_json_reads_inline_state() -> None:
    islands = assigned_json(INLINE, "newIslands")
    assert islands is not None
    assert islands[0]["props"]["tabs"][0] == {"label": "4x", "price": Decimal("3.09")}
    state = assigned_json(INLINE, "window.__INITIAL_STATE__")
    assert state is not None
    assert state["gpus"]["a"]["hourly"] == Decimal("1.57")
    assert assigned_json(INLINE, "missing") is None
    with pytest.raises(LayoutChanged, match="not JSON"):
        assigned_json("<script>var s = {name: 'js, not json'};</script>", "s")


def test_walk_and_find() -> None:
    data: dict[str, Any] = {
        "a": [{"moduleName": "TabsIsland", "x": {"moduleName": "TabsIsland"}}, 3],
        "b": {},
    }
    assert len(list(walk(data))) == 4
    assert len(find_dicts(data, moduleName="TabsIsland")) == 2
    assert find_dicts(data, predicate=lambda d: "x" in d) == [data["a"][0]]
