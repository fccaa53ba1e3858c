"""``schema.types.Digest``: hexadecimal text in Python, its bytes in the database."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import insert, select, text

from schema.types import digest_bytes
from tests.schema.conftest import TYPED as TABLE


@given(st.binary(min_size=1, max_size=64))
def test_any_digest_reads_back_as_its_text(raw: bytes) -> None:
    assert digest_bytes(raw.hex()) == raw


def test_stored_as_bytes_read_as_text(sqlite_file) -> None:  # type: ignore[no-untyped-def]
    sha = hashlib.sha256(b"payload").hexdigest()
    with sqlite_file.begin() as conn:
        conn.execute(insert(TABLE), [{"id": 1, "d": sha}, {"id": 2, "d": None}])
        stored = conn.execute(text("SELECT typeof(d), length(d) FROM t ORDER BY id")).all()
        assert conn.execute(select(TABLE.c.d).order_by(TABLE.c.id)).scalars().all() == [sha, None]
        # a query by digest binds the bytes too
        assert conn.execute(select(TABLE.c.id).where(TABLE.c.d == sha)).scalar() == 1
    assert stored == [("blob", 32), ("null", None)]


@pytest.mark.parametrize(
    "bad",
    [
        "",  # empty
        "abc",  # odd length
        "ab cd",  # fromhex would skip the space
        "ABCD",  # not the lowercase text a digest is written as
        "zz",  # not hexadecimal
        "é" * 4,  # not ASCII
        "0" * 63,
    ],
)
def test_what_is_not_a_digest_is_refused(sqlite_file, bad: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="not a lowercase hexadecimal digest"):
        digest_bytes(bad)
    with sqlite_file.begin() as conn, pytest.raises(Exception, match="hexadecimal digest"):
        conn.execute(insert(TABLE), {"id": 1, "d": bad})
    with sqlite_file.connect() as conn:
        assert conn.execute(select(TABLE.c.id)).all() == []


@pytest.mark.parametrize("bad", [b"\x01\x02", 12, 1.5])
def test_only_text_is_bound(sqlite_file, bad: object) -> None:  # type: ignore[no-untyped-def]
    with sqlite_file.begin() as conn, pytest.raises(Exception, match="hexadecimal text"):
        conn.execute(insert(TABLE), {"id": 1, "d": bad})


def test_an_oversized_value_is_named_briefly() -> None:
    with pytest.raises(ValueError) as error:
        digest_bytes("x" * 1_000_000)
    assert len(str(error.value)) < 200
