"""A set of fixed-size digests numbered as they are added, held in arrays: no Python
object per entry (about 24-32 bytes a digest with its slots, against about 100 for a
dictionary of ints or of bytes). Used for a source's current state and the offer keys an
ingest has seen (``service.catalog.state``), and for a peer CSV's offer identities
(``crawlers.platforms.skypilot``)."""

from __future__ import annotations

from array import array

_ZERO = (0,)
"""An empty slot (the slot arrays are built by repeating it: no zeroed bytes copied)."""


class DigestTable:
    """A set of 16-byte digests, each numbered by when it was added (0, 1, ...).

    Open addressing with linear probing: ``slots`` holds row + 1 (0: empty), at most half
    full; the digests are two arrays of 64-bit numbers by row. About 24-32 bytes a digest,
    no Python object per entry."""

    __slots__ = ("his", "los", "mask", "slots")

    def __init__(self, expected: int = 0) -> None:
        size = 1024
        while size < 2 * expected:
            size <<= 1
        self.slots = array("I", _ZERO) * size  # no transient copy
        self.mask = size - 1
        self.his = array("Q")
        self.los = array("Q")

    def __len__(self) -> int:
        return len(self.his)

    def find(self, hi: int, lo: int) -> int:
        """The row of the digest (hi, lo), or -1."""
        slots, his, mask = self.slots, self.his, self.mask
        i = hi & mask
        while row := slots[i]:
            if his[row - 1] == hi and self.los[row - 1] == lo:
                return row - 1
            i = (i + 1) & mask
        return -1

    def insert(self, hi: int, lo: int) -> int:
        """The row of the digest (hi, lo) when it is in the table; else it is added, and
        the result is ``-1 - row`` (one probe for both)."""
        slots, his, mask = self.slots, self.his, self.mask
        i = hi & mask
        while row := slots[i]:
            if his[row - 1] == hi and self.los[row - 1] == lo:
                return row - 1
            i = (i + 1) & mask
        row = len(his)
        his.append(hi)
        self.los.append(lo)
        if 2 * (row + 1) > len(slots):
            self._grow()
        else:
            slots[i] = row + 1
        return -1 - row

    def add(self, hi: int, lo: int) -> int:
        """Add a digest not in the table; its row."""
        row = len(self.his)
        self.his.append(hi)
        self.los.append(lo)
        if 2 * (row + 1) > len(self.slots):
            self._grow()
            return row
        slots, mask = self.slots, self.mask
        i = hi & mask
        while slots[i]:
            i = (i + 1) & mask
        slots[i] = row + 1
        return row

    def extend(self, digests: bytes) -> None:
        """Add the 16-byte digests ``digests`` (concatenated), none in the table yet."""
        first = len(self.his)
        pairs = array("Q", digests)
        self.his += pairs[0::2]
        self.los += pairs[1::2]
        if 2 * len(self.his) > len(self.slots):
            self._grow()
            return
        slots, mask = self.slots, self.mask
        for row, hi in enumerate(pairs[0::2], start=first + 1):
            i = hi & mask
            while slots[i]:
                i = (i + 1) & mask
            slots[i] = row

    def _grow(self) -> None:
        size = len(self.slots)
        while size < 2 * len(self.his):
            size <<= 1
        size <<= 1
        slots = array("I", _ZERO) * size  # no transient copy
        mask = size - 1
        for row, hi in enumerate(self.his, start=1):
            i = hi & mask
            while slots[i]:
                i = (i + 1) & mask
            slots[i] = row
        self.slots, self.mask = slots, mask
