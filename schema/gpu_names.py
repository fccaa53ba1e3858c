"""GPU names read by a parser: any provider spelling -> one catalog model, or a reason.

Providers spell one part many ways ("H100 80GB HBM3", "NVIDIA H100 SXM5",
"H100-80G-SXM5", "Tesla H100"). :func:`parse_gpu_name` reads a raw name into its parts:

* the **designation**, the model number with its letters ("h100", "a6000", "mi300x",
  "v5p", "4090"); words that only brand it (NVIDIA, Tesla, GeForce, Radeon, Instinct,
  RTX, GTX, TPU…) are dropped, so "GeForce RTX 4090" and "RTX4090" read the same;
* **suffixes** that name another part and must match exactly: Ti, SUPER (also "4080S"),
  SFF, and the TPU / chip letters that are part of the designation anyway;
* **qualifiers** that only narrow when the catalog has parts that differ by them:
  Quadro, Ada, Blackwell, PRO, Workstation, Server, Max-Q;
* the **memory** per GPU ("80G", "80GB", "80 GB", "81920 MiB", "(48 GB)");
* the **form factor** (SXM2-6, HGX/DGX -> sxm; PCIe; NVL; OAM; superchip).

:class:`GpuNameIndex` holds the catalog's models read the same way (from each model's
own name and slug) and picks the model a raw name means: same designation and suffixes,
the qualifiers it states, memory within 7 % (the nearest if several), the form factor it
states. One candidate left: resolved. Several: the one with the lowest ``default``
(documented per family in fixtures/reference/gpus.yaml) when the name leaves out what
tells them apart, marked *inferred*; none has a default: unmapped, never a guess.
Irregular spellings (codenames, marketing names) are explicit aliases.

Pure and dependency-free: shared by the crawlers (reading fixtures/reference) and the
service (reading the gpu_model and gpu_alias tables).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from schema.names import gpu_alias_key

MAX_NAME = 200
"""Longer raw names are refused (no provider's GPU name comes near it)."""

MEMORY_TOLERANCE = Decimal("0.07")
"""Stated memory matches a model within 7 %: 81559 MiB is an 80 GB part, 192 GB a
180 GB B200 as some catalogs round it; 40 vs 48 or 12 vs 16 GB never match."""

_DROP = frozenset(
    [
        "nvidia",
        "amd",
        "intel",
        "habana",
        "tesla",
        "geforce",
        "radeon",
        "instinct",
        "aws",
        "amazon",
        "google",
        "cloud",
        "gpu",
        "gpus",
        "graphics",
        "card",
        "accelerator",
        "accelerators",
        "generation",
        "gen",
        "edition",
        "tensor",
        "core",
        "cores",
        "datacenter",
        "data",
        "center",
        "hbm",
        "hbm2",
        "hbm2e",
        "hbm3",
        "hbm3e",
        "gddr",
        "gddr5",
        "gddr5x",
        "gddr6",
        "gddr6x",
        "gddr7",
        "ddr",
        "vram",
        "memory",
        "ram",
        "with",
        "in",
        "of",
        "the",
        "and",
        "for",
        "per",
        "one",
        "two",
        "four",
        "eight",
        "grace",
        "hopper",
        "ampere",
        "volta",
        "pascal",
        "turing",
        "kepler",
        "maxwell",
        "mega",
        "rtx",
        "gtx",
        "tpu",
        "chip",
        "chips",
        "module",
        "superpod",
        "pod",
        "slice",
        "podslice",
        "accelerated",
        "computing",
    ]
)
"""Words that brand or describe a part without telling two parts apart."""

_QUALIFIERS = {
    "quadro": "quadro",
    "ada": "ada",
    "lovelace": "ada",
    "blackwell": "blackwell",
    "pro": "pro",
    "workstation": "workstation",
    "server": "server",
    "maxq": "maxq",
}
"""Words that narrow the candidates only where the catalog has parts differing by them."""

_SUFFIXES = {"ti": "ti", "super": "super", "sff": "sff"}
"""Words that name a different part: "RTX 4070" is not "RTX 4070 Ti"."""

_FORM_FACTORS = {
    "sxm": "sxm",
    "hgx": "sxm",
    "dgx": "sxm",
    "pcie": "pcie",
    "nvl": "nvl",
    "oam": "oam",
    "superchip": "superchip",
    "mezzanine": "mezzanine",
}
_GLUE = frozenset(
    [
        "rtx",
        "gtx",
        "pro",
        "quadro",
        "tesla",
        "nvidia",
        "geforce",
        "radeon",
        "instinct",
        "amd",
        "aws",
        "tpu",
        "hgx",
        "dgx",
    ]
)
"""Words providers glue onto the next one ("RTXPRO6000", "QuadroRTX", "TPUv5p")."""

_SYMBOLS = str.maketrans({"®": " ", "™": " ", "©": " ", "×": "x", "–": "-", "—": "-"})
_MIG = re.compile(r"(?<![a-z0-9])\d+g\.\d+gb\b")
_COUNT_PREFIX = re.compile(r"^\s*\d{1,3}\s*x(?![a-z0-9])|^\s*\d{1,3}\s*x(?=[\s\-_]*[a-z])")
_SPACE = re.compile(r"\s+")
_COUNT_SUFFIX = re.compile(
    r"(?<=[0-9)\s\-_])x\s*\d{1,2}(?![0-9a-z.])|(?<=\dg)x\d{1,2}(?![0-9a-z.])"
)
_TPU_SLICE = re.compile(r"\b(v[2-7][a-z]{0,4})[\-_ ]\d+\b")
_MEMORY = re.compile(
    r"(?<![a-z0-9.])(\d+(?:\.\d+)?)[\s\-_]?(gib|gb|g|mib|mb|tib|tb)(?![a-z0-9])", re.IGNORECASE
)
_TOKENS = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_PLAIN = re.compile(r"[ -~]*")

_MEMORY_SCALE = {
    "gib": Decimal(1),
    "gb": Decimal(1),
    "g": Decimal(1),
    "tib": Decimal(1024),
    "tb": Decimal(1024),
    "mib": Decimal(1) / Decimal(1024),
    "mb": Decimal(1) / Decimal(1024),
}


@dataclass(frozen=True, slots=True)
class ParsedName:
    """A raw GPU name read into its parts (see the module docstring)."""

    designation: str
    suffixes: frozenset[str] = frozenset()
    qualifiers: frozenset[str] = frozenset()
    memory_gb: Decimal | None = None
    form_factors: frozenset[str] = frozenset()


class NameProblem(ValueError):
    """The raw name cannot name a GPU; the message says why."""


def _split_run(run: str) -> list[str]:
    """A letter run glued from known words ("rtxpro", "quadrortx", "tpuv") split apart;
    a run that is not such a glue is kept whole ("mi", "gh", "inferentia")."""
    if run in _GLUE or len(run) < 4:
        return [run]
    for end in range(len(run) - 1, 2, -1):
        if run[:end] in _GLUE:
            return [run[:end], *_split_run(run[end:])]
    return [run]


def parse_gpu_name(raw: str) -> ParsedName:
    """Read ``raw`` into its parts; :class:`NameProblem` says why it names no GPU."""
    if not raw or not raw.strip():
        raise NameProblem("empty name")
    if len(raw) > MAX_NAME:
        raise NameProblem(f"name longer than {MAX_NAME} characters")
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", raw.translate(_SYMBOLS)).lower())
    if not _PLAIN.fullmatch(text):
        raise NameProblem("name has characters outside printable ASCII (mixed scripts?)")
    text = _MIG.sub(" ", text)
    text = _COUNT_PREFIX.sub(" ", text)
    text = _COUNT_SUFFIX.sub(" ", text)
    memory: Decimal | None = None
    for match in _MEMORY.finditer(text):
        if memory is None:
            memory = Decimal(match.group(1)) * _MEMORY_SCALE[match.group(2).lower()]
    text = _TPU_SLICE.sub(r" \1 ", _MEMORY.sub(" ", text))
    words: list[str] = []
    for word in _TOKENS.findall(text):
        words.extend(_split_run(word) if word.isalpha() else [word])
    core: list[str] = []
    suffixes: set[str] = set()
    qualifiers: set[str] = set()
    forms: set[str] = set()
    previous = ""
    for word in words:
        if word in _FORM_FACTORS:
            forms.add(_FORM_FACTORS[word])
        elif word == "pci" or (word == "e" and previous == "pci"):
            forms.add("pcie")
        elif word == "nvlink":
            forms.add("nvlink")
        elif word in _SUFFIXES:
            suffixes.add(_SUFFIXES[word])
        elif word == "s" and previous.isdigit() and len(previous) == 4:
            suffixes.add("super")  # "RTX 4080S"
        elif word in _QUALIFIERS:
            qualifiers.add(_QUALIFIERS[word])
        elif word == "q":
            qualifiers.add("maxq" if previous == "max" else "quadro")  # "Q RTX 8000"
        elif word == "max":
            pass  # "Max-Q": read with the q
        elif word.isdigit() and len(word) == 1 and previous in ("sxm", "pcie", "gen", "hbm"):
            pass  # SXM5, PCIe 4, Gen4: generation numbers, not the model
        elif word.isdigit() and previous == "nvl":
            pass  # NVL72, NVL4: how many GPUs one NVLink domain joins
        elif word not in _DROP:
            core.append(word)
        previous = word
    if "nvlink" in forms:
        forms.discard("nvlink")
        if not forms:
            forms = {"sxm", "nvl"}  # an "NVLink" part is the SXM or the NVL board
    designation = "".join(core)
    if not designation or (not any(c.isdigit() for c in designation) and len(designation) < 3):
        raise NameProblem("no model designation in the name")
    return ParsedName(
        designation, frozenset(suffixes), frozenset(qualifiers), memory, frozenset(forms)
    )


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What the parser needs of one catalog model."""

    slug: str
    name: str
    memory_gb: Decimal | None = None
    form_factor: str | None = None
    default: int | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Resolution:
    """A raw name's model (or None) and how it was reached."""

    slug: str | None
    inferred: bool = False
    """Picked by a family default: the name left out memory or form factor."""
    reason: str | None = None
    """Why ``slug`` is None: no such model, two or more possible, or a bad name."""
    candidates: tuple[str, ...] = ()
    """The models an ambiguous name could be (then ``slug`` is None)."""


@dataclass(slots=True)
class _Model:
    facts: GpuFacts
    parsed: ParsedName


def _near(a: Decimal, b: Decimal) -> bool:
    return abs(a - b) <= MEMORY_TOLERANCE * max(a, b)


@dataclass
class GpuNameIndex:
    """The catalog's models by designation, and the aliases of irregular spellings."""

    models: dict[str, list[_Model]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    slugs: frozenset[str] = frozenset()
    _cache: dict[tuple[str, Decimal | None], Resolution] = field(default_factory=dict)

    @classmethod
    def build(cls, gpus: Iterable[GpuFacts], aliases: Mapping[str, str] = {}) -> GpuNameIndex:
        """``aliases``: normalized key (:func:`gpu_alias_key`) -> slug, for irregular names."""
        index = cls(aliases=dict(aliases))
        slugs = set()
        for facts in gpus:
            slugs.add(facts.slug)
            seen: set[ParsedName] = set()
            for spelling in (facts.name, facts.slug):
                try:
                    parsed = parse_gpu_name(spelling)
                except NameProblem:
                    continue
                parsed = ParsedName(
                    parsed.designation,
                    parsed.suffixes,
                    parsed.qualifiers,
                    facts.memory_gb if facts.memory_gb is not None else parsed.memory_gb,
                    frozenset({facts.form_factor}) if facts.form_factor else parsed.form_factors,
                )
                if parsed in seen:
                    continue
                seen.add(parsed)
                index.models.setdefault(parsed.designation, []).append(_Model(facts, parsed))
        index.slugs = frozenset(slugs)
        return index

    def resolve(self, raw: str | None, memory_hint: Decimal | None = None) -> Resolution:
        """The model ``raw`` names. ``memory_hint``: the source's GB per GPU, used when the
        name states none (and only if it leaves a candidate)."""
        if raw is None:
            return Resolution(None, reason="no GPU name")
        if memory_hint is not None and not memory_hint.is_finite():
            memory_hint = None  # NaN or infinity says nothing (and sNaN cannot be a key)
        key = (raw, memory_hint)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._resolve(raw, memory_hint)
        return found

    def _resolve(self, raw: str, memory_hint: Decimal | None) -> Resolution:
        stripped = raw.strip()
        if stripped in self.slugs:
            return Resolution(stripped)
        try:
            parsed = parse_gpu_name(raw)
        except NameProblem as problem:
            return Resolution(None, reason=str(problem))
        found = self._match(parsed, memory_hint)
        if found.slug is None and not found.candidates:
            # an irregular spelling (a codename) may be an alias; an alias never settles
            # an ambiguity, nor reads a name the parser refused
            return self._alias(raw) or found
        return found

    def by_parser(self, raw: str, memory_hint: Decimal | None = None) -> Resolution:
        """What the parser alone reads ``raw`` as (no slug or alias lookup, no cache)."""
        try:
            parsed = parse_gpu_name(raw)
        except NameProblem as problem:
            return Resolution(None, reason=str(problem))
        return self._match(parsed, memory_hint)

    def _alias(self, raw: str) -> Resolution | None:
        slug = self.aliases.get(gpu_alias_key(raw))
        return Resolution(slug) if slug else None

    def _match(self, parsed: ParsedName, memory_hint: Decimal | None) -> Resolution:
        candidates = [
            m
            for m in self.models.get(parsed.designation, ())
            if m.parsed.suffixes == parsed.suffixes
        ]
        if not candidates:
            return Resolution(None, reason=f"no catalog model {parsed.designation!r}")
        for word in parsed.qualifiers:
            narrowed = [m for m in candidates if word in m.parsed.qualifiers]
            if narrowed:
                candidates = narrowed
        if parsed.form_factors:
            candidates = [
                m
                for m in candidates
                if not m.parsed.form_factors or m.parsed.form_factors & parsed.form_factors
            ]
        memory = parsed.memory_gb
        if memory is not None:
            candidates = _by_memory(candidates, memory)
        elif memory_hint is not None and memory_hint > 0:
            hinted = _by_memory(candidates, memory_hint)
            candidates = hinted or candidates
        slugs = sorted({m.facts.slug for m in candidates})
        if len(slugs) == 1:
            return Resolution(slugs[0])
        if not slugs:
            return Resolution(None, reason="no catalog model with that memory or form factor")
        ranked = sorted(
            (m.facts.default, m.facts.slug) for m in candidates if m.facts.default is not None
        )
        # a default stands in for what the name leaves out, never for what it states
        # ambiguously ("NVLink": the SXM or the NVL part)
        silent = len(parsed.form_factors) <= 1
        if silent and ranked and (len(ranked) == 1 or ranked[0][0] < ranked[1][0]):
            return Resolution(ranked[0][1], inferred=True)
        return Resolution(None, reason="ambiguous: " + " or ".join(slugs), candidates=tuple(slugs))


def _by_memory(candidates: list[_Model], memory: Decimal) -> list[_Model]:
    """The candidates whose memory is nearest ``memory`` (within the tolerance); models of
    unknown memory stay only when no model of known memory matches."""
    known = [(abs(m.parsed.memory_gb - memory), m) for m in candidates if m.parsed.memory_gb]
    near = [(d, m) for d, m in known if _near(m.parsed.memory_gb or Decimal(0), memory)]
    if near:
        best = min(d for d, _ in near)
        return [m for d, m in near if d == best]
    return [m for m in candidates if m.parsed.memory_gb is None]
