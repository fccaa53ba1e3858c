"""``per_text``: a pure function of one text, remembered per exact ``str``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import schema.memo as memo_module
from schema.memo import per_text


def counted() -> tuple[list[Any], Any]:
    calls: list[Any] = []

    def parse(value: Any) -> Decimal:
        calls.append(value)
        if value == "bad":
            raise ValueError("bad")
        return Decimal(int(value)) if isinstance(value, bool) else Decimal(str(value))

    return calls, per_text(parse)


def test_the_answer_is_the_functions_and_computed_once_per_text() -> None:
    calls, parse = counted()
    assert parse("1.50") == Decimal("1.50") and parse("1.50") == Decimal("1.50")
    assert calls == ["1.50"]
    assert str(parse("1.5")) == "1.5"  # another spelling, another entry
    assert parse.__wrapped__("2") == Decimal(2)


def test_only_plain_text_is_remembered() -> None:
    calls, parse = counted()

    class Text(str):
        pass

    for value in (1, 1, True, Text("3"), Text("3")):
        parse(value)
    assert calls == [1, 1, True, "3", "3"]


def test_errors_are_raised_every_time() -> None:
    calls, parse = counted()
    for _ in range(2):
        with pytest.raises(ValueError, match="bad"):
            parse("bad")
    assert calls == ["bad", "bad"]


def test_a_full_memo_starts_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memo_module, "MEMO_LIMIT", 2)
    calls, parse = counted()
    for value in ("1", "2", "3", "1"):
        parse(value)
    assert calls == ["1", "2", "3", "1"]  # "1" was let go when the memo filled
