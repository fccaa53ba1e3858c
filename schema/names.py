"""How names are keyed for lookup: one function, shared by crawlers and the service."""

from __future__ import annotations

import re

_VENDOR_WORDS = re.compile(r"\b(nvidia|amd|intel|tesla|geforce|radeon|instinct|habana)\b")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def gpu_alias_key(name: str) -> str:
    """Normalize a GPU spelling: 'NVIDIA H100 SXM5 80GB' and 'h100-sxm5-80gb' give one key."""
    text = _VENDOR_WORDS.sub(" ", name.lower())
    return _NON_ALNUM.sub(" ", text).strip()
