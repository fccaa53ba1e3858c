"""A source's size hint (crawlers.size): heard by the reader listening on the thread that
makes the records, while it makes them, and by no one else."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from crawlers.platforms.skypilot import collapse
from crawlers.size import announce, heard_while


def announcing(counts: list[int]) -> Iterator[int]:
    for count in counts:
        announce(count)
        yield count


def test_what_sources_announce_while_their_records_are_made_is_heard() -> None:
    heard: list[int] = []
    assert list(heard_while(announcing([3, 4]), heard)) == [3, 4]
    assert heard == [3, 4]


def test_nobody_listening_hears_nothing_and_nothing_breaks() -> None:
    assert list(announcing([5])) == [5]
    heard: list[int] = []
    reading = heard_while(announcing([1, 2]), heard)
    assert next(reading) == 1
    announce(99)  # between two records: the reader is not listening
    assert list(reading) == [2]
    assert heard == [1, 2]


def test_nested_readers_hear_their_own_sources() -> None:
    outer: list[int] = []
    inner: list[int] = []

    def mixed() -> Iterator[int]:
        announce(10)
        yield from heard_while(announcing([1]), inner)
        announce(20)
        yield 2

    assert list(heard_while(mixed(), outer)) == [1, 2]
    assert (outer, inner) == ([10, 20], [1])


def test_another_threads_reading_is_not_heard() -> None:
    heard: list[int] = []
    reading = heard_while(announcing([1, 2]), heard)
    other = threading.Thread(target=lambda: list(announcing([7])))
    assert next(reading) == 1
    other.start()
    other.join()
    assert list(reading) == [2]
    assert heard == [1, 2]


def test_a_peer_collapse_announces_its_offers_before_the_first() -> None:
    rows = [
        {"sku": "a", "region": "r", "price_kind": "spot", "amount": "1"},
        {"sku": "a", "region": "r", "price_kind": "spot", "amount": "1"},  # another zone
        {"sku": "b", "region": "r", "price_kind": "spot", "amount": "2"},
    ]
    heard: list[int] = []
    reading = heard_while(iter(collapse(rows)), heard)
    assert heard == []  # collapse() read them whole, outside the reading
    heard_inside: list[int] = []
    first = next(heard_while(_collapsing(rows), heard_inside))
    assert first["sku"] == "a" and heard_inside == [2]
    assert len(list(reading)) == 2


def _collapsing(rows: list[dict[str, str]]) -> Iterator[dict[str, str]]:
    yield from collapse(rows)
