"""Atom 1.0 (RFC 4287) documents built with xml.etree: every string escaped, and the
characters XML 1.0 cannot carry at all (NUL, most C0 controls) removed."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

ATOM_NS = "http://www.w3.org/2005/Atom"
MEDIA_TYPE = "application/atom+xml; charset=utf-8"
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
TAG_AUTHORITY = "tag:gpuatlas.dev,2025:"


def clean(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    updated: datetime
    link: str
    content: str
    category: str | None = None


def _text(parent: ET.Element, tag: str, value: str, **attrs: str) -> ET.Element:
    node = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", {k: clean(v) for k, v in attrs.items()})
    node.text = clean(value)
    return node


def build_feed(
    *,
    feed_id: str,
    title: str,
    self_url: str,
    alternate_url: str,
    updated: datetime,
    entries: Iterable[Entry],
    subtitle: str | None = None,
) -> bytes:
    ET.register_namespace("", ATOM_NS)
    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    _text(feed, "id", feed_id)
    _text(feed, "title", title)
    if subtitle:
        _text(feed, "subtitle", subtitle)
    _text(feed, "updated", stamp(updated))
    ET.SubElement(
        feed,
        f"{{{ATOM_NS}}}link",
        {"rel": "self", "type": "application/atom+xml", "href": clean(self_url)},
    )
    ET.SubElement(feed, f"{{{ATOM_NS}}}link", {"rel": "alternate", "href": clean(alternate_url)})
    author = ET.SubElement(feed, f"{{{ATOM_NS}}}author")
    _text(author, "name", "gpuatlas")
    _text(feed, "generator", "gpuatlas")
    for item in entries:
        entry = ET.SubElement(feed, f"{{{ATOM_NS}}}entry")
        _text(entry, "id", item.id)
        _text(entry, "title", item.title, type="text")
        _text(entry, "updated", stamp(item.updated))
        ET.SubElement(entry, f"{{{ATOM_NS}}}link", {"rel": "alternate", "href": clean(item.link)})
        if item.category:
            ET.SubElement(entry, f"{{{ATOM_NS}}}category", {"term": clean(item.category)})
        _text(entry, "content", item.content, type="text")
    return ET.tostring(feed, encoding="utf-8", xml_declaration=True)
