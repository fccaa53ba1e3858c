"""Checks of text that every layer reads from outside (query strings, headers, files)."""

from __future__ import annotations

import re

CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, and bidirectional marks and overrides: never part
of a name (and PostgreSQL's text cannot hold NUL at all)."""


def plain_text(value: str) -> str:
    """``value``, or ``ValueError`` when it holds one of :data:`CONTROL_CHARACTERS`."""
    if CONTROL_CHARACTERS.search(value):
        raise ValueError("contains control or bidirectional-override characters")
    return value


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more of 0-9 and nothing else.

    ``str.isdigit()`` is also true of superscripts and other scripts' digits ("¹", "²",
    "٣"), which ``int()`` refuses or reads as another number: a check followed by
    ``int(text)`` must use this one."""
    return text.isascii() and text.isdigit()
