"""Pure functions of one text remembering their answers: a crawl repeats a few hundred
spellings (providers, regions, SKUs, amounts, counts) over hundreds of thousands of
records, and a parser or validator need not work each one out again."""

from __future__ import annotations

from collections.abc import Callable
from functools import update_wrapper
from typing import Any, TypeVar

MEMO_LIMIT = 1 << 16
"""Entries per memo; a full memo starts again empty."""

F = TypeVar("F", bound=Callable[[Any], Any])

_MISSING = object()


def per_text(function: F) -> F:
    """``function`` (pure, one argument) remembering its result per exact ``str`` input.

    Errors are not remembered (they raise again), and only plain ``str`` inputs are (not a
    ``str`` subclass, nor ``1`` and ``True``, which hash alike), so the answer is always
    the one ``function`` would give. The original stays at ``__wrapped__``."""
    results: dict[str, Any] = {}

    def remembered(value: Any) -> Any:
        if type(value) is not str:
            return function(value)
        found = results.get(value, _MISSING)
        if found is _MISSING:
            found = function(value)
            if len(results) >= MEMO_LIMIT:
                results.clear()
            results[value] = found
        return found

    return update_wrapper(remembered, function)  # type: ignore[return-value]
