"""Large raw payloads are compressed on a thread of their own while the ingest goes on
(service.catalog.results.compress_ahead): what is stored is the same, a payload the
catalog holds is not compressed again, a failure reaches the ingest, and the ingest writes
its batches meanwhile (the body written in before it commits)."""

from __future__ import annotations

import random
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from schema.crawl import RawPayload
from service.catalog import results
from service.catalog.ingest import ingest
from service.catalog.results import AHEAD_MIN_BYTES, CrawlResult, Payload, compress_ahead
from service.catalog.writer import Writer
from service.core.config import Settings
from tests.support.factories import records

PAYLOAD = RawPayload.__table__  # type: ignore[attr-defined]


def large_file(path: Path) -> Path:
    """A body zlib has work on: 1.5 MiB of text with random numbers in it."""
    rng = random.Random(7)
    lines = (f'{{"sku": "x{i}", "price": {rng.random():.9f}}}\n' for i in range(40_000))
    path.write_bytes(b"".join(line.encode() for line in lines))
    assert path.stat().st_size >= AHEAD_MIN_BYTES
    return path


def test_a_large_payload_is_compressed_ahead_and_stored_whole(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    body = large_file(tmp_path / "prices.jsonl")
    payload = Payload("file:prices.jsonl", None, datetime.now(UTC), path=body)
    ingest(engine, settings, CrawlResult("acme", records(3), payloads=[payload]))
    assert payload.compressed_ahead  # on its thread
    assert payload._ahead is None  # its result not held past its use
    with engine.connect() as conn:
        stored = conn.execute(select(PAYLOAD).where(PAYLOAD.c.sha256 == payload.sha256)).one()
    assert zlib.decompress(stored.compressed) == body.read_bytes()
    assert stored.size == body.stat().st_size

    again = Payload("file:prices.jsonl", None, datetime.now(UTC), path=body)
    ingest(engine, settings, CrawlResult("acme", records(3, bump_every=1), payloads=[again]))
    assert not again.compressed_ahead  # held already: not compressed again


def test_a_small_payload_is_compressed_when_stored(engine: Engine, settings: Settings) -> None:
    payload = Payload("https://example.test/p", b"page" * 100, datetime.now(UTC))
    ingest(engine, settings, CrawlResult("acme", records(2), payloads=[payload]))
    assert not payload.compressed_ahead
    with engine.connect() as conn:
        stored = conn.execute(select(PAYLOAD.c.compressed)).scalar_one()
    assert zlib.decompress(stored) == b"page" * 100


def test_the_same_bytes_ahead_or_not(tmp_path: Path) -> None:
    body = large_file(tmp_path / "big.jsonl")
    ahead = Payload("file:big", None, datetime.now(UTC), path=body)
    inline = Payload("file:big", None, datetime.now(UTC), path=body)
    compress_ahead([ahead])
    assert ahead.compressed_ahead and not inline.compressed_ahead
    assert ahead.compressed() == inline.compressed()
    assert zlib.decompress(ahead.compressed()) == body.read_bytes()


def test_a_failed_compression_fails_the_ingest_and_stores_nothing(
    engine: Engine, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread's error is raised where the payload is stored, and the ingest's
    transaction is rolled back with it."""
    unreadable = tmp_path / "a-directory"
    unreadable.mkdir()  # stat() works, open() fails on the compression's thread
    monkeypatch.setattr(results, "AHEAD_MIN_BYTES", 0)
    monkeypatch.setattr("service.catalog.ingest.AHEAD_MIN_BYTES", 0)
    payload = Payload("file:a-directory", None, datetime.now(UTC), path=unreadable)
    payload._digest = "0" * 64  # its hash, as a crawl would have taken it
    with pytest.raises(IsADirectoryError):
        ingest(engine, settings, CrawlResult("acme", records(2), payloads=[payload]))
    assert payload.compressed_ahead
    with engine.connect() as conn:
        assert conn.execute(select(PAYLOAD.c.sha256)).all() == []


@contextmanager
def compression_held_until_a_batch_is_written(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[tuple[bool, int]]]:
    """The compression of a payload waits (5 s at most) until the ingest has written its
    first batch; yields, per compression, whether that happened and how many bodies of
    that payload another session could read when the batch was written."""
    written = threading.Event()
    seen: list[int] = []
    waits: list[tuple[bool, int]] = []
    real_compress, real_write = Payload._compress, Writer.write

    def compress(payload: Payload) -> bytearray:
        waits.append((written.wait(5), seen[0] if seen else -1))
        return real_compress(payload)

    def write(writer: Writer, *args: Any, **kwargs: Any) -> None:
        real_write(writer, *args, **kwargs)
        if not written.is_set():
            with engine.connect() as conn:  # another session: the empty body is not there
                seen.append(conn.execute(select(func.count()).select_from(PAYLOAD)).scalar_one())
            written.set()

    monkeypatch.setattr(Payload, "_compress", compress)
    monkeypatch.setattr(Writer, "write", write)
    yield waits


def test_the_batches_are_written_while_a_large_payload_is_compressed(
    engine: Engine, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest does not wait for a large body's compression before its batches: the
    body's row is stored empty and the body written in before the commit, so no other
    session sees the empty one, and the body stored is whole."""
    body = large_file(tmp_path / "prices.jsonl")
    payload = Payload("file:prices.jsonl", None, datetime.now(UTC), path=body)
    with compression_held_until_a_batch_is_written(engine, monkeypatch) as waits:
        result = ingest(engine, settings, CrawlResult("acme", records(3), payloads=[payload]))
    assert result.status.value == "ok"
    assert waits == [(True, 0)]  # written first; the uncommitted row unseen
    with engine.connect() as conn:
        stored = conn.execute(select(PAYLOAD).where(PAYLOAD.c.sha256 == payload.sha256)).one()
    assert zlib.decompress(stored.compressed) == body.read_bytes()
    assert stored.size == body.stat().st_size


def test_a_quarantined_crawl_keeps_the_whole_body_compressed_meanwhile(
    engine: Engine, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crawl quarantined (its writes rolled back) keeps its payload, body and all."""
    ingest(engine, settings, CrawlResult("acme", records(20)))
    body = large_file(tmp_path / "prices.jsonl")
    payload = Payload("file:prices.jsonl", None, datetime.now(UTC), path=body)
    with compression_held_until_a_batch_is_written(engine, monkeypatch) as waits:
        crawl = CrawlResult("acme", records(4, bump_every=1), payloads=[payload])  # repriced
        result = ingest(engine, settings, crawl)
    assert result.status.value == "quarantined"
    assert waits == [(True, 0)]
    with engine.connect() as conn:
        stored = conn.execute(select(PAYLOAD.c.compressed)).scalar_one()
    assert zlib.decompress(stored) == body.read_bytes()
