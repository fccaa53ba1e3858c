"""A function of the code under test, still run, with the result of each call kept."""

from __future__ import annotations

from typing import Any

import pytest


def results_of(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[Any]:
    """``owner.name`` replaced, for the test, by itself recording what each call returned
    (in call order): the list filled as the code under test runs."""
    results: list[Any] = []
    real = getattr(owner, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        results.append(result)
        return result

    monkeypatch.setattr(owner, name, recorded)
    return results
