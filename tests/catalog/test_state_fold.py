"""``service.catalog.state.folded``: the current state's chunks folded on a thread of their
own while the next is read. In order, each chunk once; an error on either side stops both,
is raised to the caller and leaves no thread behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from service.catalog.state import RECORD_SEP, folded


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name == "gpuatlas-state"}


def test_chunks_are_folded_in_order_each_once() -> None:
    chunks = [RECORD_SEP.join(f"{c}.{i}" for i in range(3)) for c in range(50)]
    seen: list[list[str]] = []
    folded(iter(chunks), seen.append)
    assert seen == [chunk.split(RECORD_SEP) for chunk in chunks]
    assert not _threads()


def test_nothing_to_fold() -> None:
    seen: list[list[str]] = []
    folded(iter(()), seen.append)
    assert seen == [] and not _threads()


def test_a_failing_fold_stops_the_reading_and_is_raised() -> None:
    read: list[int] = []

    def chunks() -> Iterator[str]:
        for n in range(1_000):
            read.append(n)
            yield str(n)

    def fold(texts: list[str]) -> None:
        if texts == ["3"]:
            raise ValueError("chunk 3 is bad")

    with pytest.raises(ValueError, match="chunk 3 is bad"):
        folded(chunks(), fold)
    assert len(read) < 10  # stopped within a chunk or two of the failure
    assert not _threads()


def test_a_failing_read_is_raised_after_the_fold_stops() -> None:
    folded_so_far: list[list[str]] = []

    def chunks() -> Iterator[str]:
        yield "a"
        yield "b"
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        folded(chunks(), folded_so_far.append)
    assert folded_so_far == [["a"], ["b"]]  # what was read before it, and nothing more
    assert not _threads()


def test_the_first_fold_error_wins_over_a_later_read_error() -> None:
    def chunks() -> Iterator[str]:
        yield "a"
        yield "b"
        raise OSError("later")

    def fold(texts: list[str]) -> None:
        raise KeyError(texts[0])

    with pytest.raises(KeyError, match="a") as caught:
        folded(chunks(), fold)
    assert caught.value.__context__ is None or isinstance(caught.value.__context__, OSError)
    assert not _threads()
