"""Checks of text that every layer reads from outside (query strings, headers, files)."""

from __future__ import annotations


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more of 0-9 and nothing else.

    ``str.isdigit()`` is also true of superscripts and other scripts' digits ("¹", "²",
    "٣"), which ``int()`` refuses or reads as another number: a check followed by
    ``int(text)`` must use this one."""
    return text.isascii() and text.isdigit()
