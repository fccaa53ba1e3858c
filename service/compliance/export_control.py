"""Export-control classification of GPU models and licence answers per destination and date.

Method (US EAR, ECCN 3A090; see docs/compliance.md for citations):

* **TPP** (Total Processing Performance) = 2 x MacTOPS x bit length, the maximum over the
  precisions the chip supports, on dense (non-sparse) rates. One MAC is two operations, so
  TPP = dense TOPS (or TFLOPS) x bit length.
* **Performance density** (PD) = TPP / applicable die area (mm^2, logic dies only).
* The rule set in force on the date supplies thresholds, the licence country scope, named
  items (is-informed letters), AI-Diffusion tiers and review policies.
* A published classification (``official`` from BIS, ``vendor`` from the manufacturer) wins
  over the one computed from specs.

Everything here is pure: callers pass specs, rule sets, country lists and classifications.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.compliance import NOTICE
from service.compliance.countries import CountryLists

# bit length of each precision column of gpu_model. TF32 is counted as 32 bits (its operands
# are 32-bit words; it has 19 significant bits): the conservative choice, stated in answers.
BIT_LENGTHS: dict[str, int] = {
    "fp64": 64,
    "tf32": 32,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "int8": 8,
    "fp4": 4,
}

Eccn = str  # "3A090.a", "3A090.b", "not 3A090", "unknown" or a published ECCN
NOT_3A090 = "not 3A090"
UNKNOWN = "unknown"


# ----------------------------------------------------------------------------- rule sets


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Thresholds(_Strict):
    a1_tpp: Decimal
    a2_tpp: Decimal
    a2_pd: Decimal
    b1_tpp_min: Decimal
    b1_tpp_max: Decimal
    b1_pd_min: Decimal
    b1_pd_max: Decimal
    b2_tpp: Decimal
    b2_pd_min: Decimal
    b2_pd_max: Decimal
    source: str


class Scope(_Strict):
    """Countries named directly or through country lists, less excluded lists."""

    lists: list[str] = Field(default_factory=list)
    countries: list[str] = Field(default_factory=list)
    exclude_lists: list[str] = Field(default_factory=list)

    def contains(self, country: str, lists: CountryLists) -> bool:
        if any(country in lists.get(name, frozenset()) for name in self.exclude_lists):
            return False
        return country in self.countries or any(
            country in lists.get(name, frozenset()) for name in self.lists
        )

    def list_names(self) -> list[str]:
        return [*self.lists, *self.exclude_lists]


class LicenceScope(Scope):
    eccns: list[str]
    citation: str


class Worldwide(_Strict):
    eccns: list[str]
    except_tier: str
    compliance_date: date | None = None
    citation: str


class NamedItem(Scope):
    gpus: list[str]
    from_: date | None = Field(default=None, alias="from")
    reason: str
    citation: str

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ReviewPolicy(Scope):
    policy: Literal["presumption_of_denial", "case_by_case", "presumption_of_approval"]
    max_tpp: Decimal | None = None
    max_memory_bandwidth_gbps: Decimal | None = None
    note: str | None = None
    citation: str


class Rules(_Strict):
    thresholds: Thresholds
    licence_scope: LicenceScope
    worldwide: Worldwide | None = None
    tiers: dict[str, Scope] = Field(default_factory=dict)
    named_items: list[NamedItem] = Field(default_factory=list)
    review_policies: list[ReviewPolicy] = Field(default_factory=list)
    caveats: list[str] = Field(default_factory=list)

    def scopes(self) -> list[Scope]:
        return [self.licence_scope, *self.tiers.values(), *self.named_items, *self.review_policies]

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


@dataclass(frozen=True)
class RuleSet:
    slug: str
    name: str
    effective_from: date
    effective_to: date | None
    rules: Rules
    source_urls: tuple[str, ...]
    checked: date | None

    def public(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "name": self.name,
            "effective_from": self.effective_from,
            "effective_to": self.effective_to,
            "source_urls": list(self.source_urls),
            "checked": self.checked,
        }


# ----------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class GpuSpecs:
    slug: str
    name: str
    data_center: bool
    dense: dict[str, Decimal | None] = field(default_factory=dict)
    """precision -> dense TFLOPS/TOPS (keys of :data:`BIT_LENGTHS`)."""
    die_area_mm2: Decimal | None = None
    memory_bandwidth_tbps: Decimal | None = None

    @classmethod
    def from_row(cls, row: Any) -> GpuSpecs:
        get = row.__getitem__
        dense = {p: get(f"tflops_{p}") for p in BIT_LENGTHS if p != "int8"}
        dense["int8"] = get("tops_int8")
        return cls(
            slug=get("slug"),
            name=get("name"),
            data_center=bool(get("data_center")),
            dense=dense,
            die_area_mm2=get("die_area_mm2"),
            memory_bandwidth_tbps=get("memory_bandwidth_tbps"),
        )


def tpp(dense: dict[str, Decimal | None]) -> tuple[Decimal, str] | None:
    """(TPP, precision giving it): max over precisions of dense rate x bit length."""
    best: tuple[Decimal, str] | None = None
    for precision, bits in BIT_LENGTHS.items():
        rate = dense.get(precision)
        if rate is None:
            continue
        if rate < 0:
            raise ValueError(f"negative {precision} rate {rate}")
        value = rate * bits
        if best is None or value > best[0]:
            best = (value, precision)
    return best


def performance_density(tpp_value: Decimal | None, die_area_mm2: Decimal | None) -> Decimal | None:
    """TPP / applicable die area; ``None`` when either is unknown (or the area is not > 0)."""
    if tpp_value is None or die_area_mm2 is None or die_area_mm2 <= 0:
        return None
    return tpp_value / die_area_mm2


@dataclass(frozen=True)
class Computed:
    eccn: Eccn
    paragraph: str | None
    reason: str
    nac_eligible: bool = False


def classify(
    tpp_value: Decimal | None, pd: Decimal | None, data_center: bool, t: Thresholds
) -> Computed:
    """3A090 classification from TPP, PD and the data-center criterion under thresholds ``t``."""
    if tpp_value is None:
        return Computed(UNKNOWN, None, "TPP unknown: no dense performance figures recorded")
    if tpp_value >= t.a1_tpp:
        if data_center:
            return Computed("3A090.a", "3A090.a.1", f"TPP {_fmt(tpp_value)} >= {t.a1_tpp}")
        return Computed(
            "3A090.a",
            "3A090.a.1",
            f"TPP {_fmt(tpp_value)} >= {t.a1_tpp}; not designed or marketed for data centres, "
            "so License Exception NAC is available",
            nac_eligible=True,
        )
    if not data_center:
        return Computed(
            NOT_3A090,
            None,
            f"TPP {_fmt(tpp_value)} < {t.a1_tpp} and not a data-center IC",
        )
    if tpp_value < min(t.a2_tpp, t.b2_tpp, t.b1_tpp_min):
        return Computed(NOT_3A090, None, f"TPP {_fmt(tpp_value)} below every 3A090 threshold")
    if pd is None:
        return Computed(
            UNKNOWN,
            None,
            f"TPP {_fmt(tpp_value)} is in the band where performance density decides, "
            "and the die area is unknown",
        )
    where = f"TPP {_fmt(tpp_value)}, performance density {_fmt(pd, 2)}"
    if tpp_value >= t.a2_tpp and pd >= t.a2_pd:
        return Computed("3A090.a", "3A090.a.2", f"{where}: TPP >= {t.a2_tpp} and PD >= {t.a2_pd}")
    if t.b1_tpp_min <= tpp_value < t.b1_tpp_max and t.b1_pd_min <= pd < t.b1_pd_max:
        return Computed(
            "3A090.b",
            "3A090.b.1",
            f"{where}: {t.b1_tpp_min} <= TPP < {t.b1_tpp_max} and {t.b1_pd_min} <= PD < "
            f"{t.b1_pd_max}",
            nac_eligible=True,
        )
    if tpp_value >= t.b2_tpp and t.b2_pd_min <= pd < t.b2_pd_max:
        return Computed(
            "3A090.b",
            "3A090.b.2",
            f"{where}: TPP >= {t.b2_tpp} and {t.b2_pd_min} <= PD < {t.b2_pd_max}",
            nac_eligible=True,
        )
    return Computed(NOT_3A090, None, f"{where}: outside the 3A090.a and .b bands")


# ----------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Published:
    eccn: str
    basis: Literal["official", "vendor"]
    effective_from: date | None
    source_url: str | None
    notes: str | None = None


_BASIS_RANK = {"official": 0, "vendor": 1}


def published_on(rows: list[Published], on: date) -> Published | None:
    """The published classification in effect on ``on``: official beats vendor, latest wins."""
    usable = [r for r in rows if r.effective_from is None or r.effective_from <= on]
    if not usable:
        return None
    return min(
        usable,
        key=lambda r: (_BASIS_RANK[r.basis], -(r.effective_from or date.min).toordinal()),
    )


@dataclass
class ExportAnswer:
    gpu: str
    gpu_name: str
    destination: str
    as_of: date
    eccn: Eccn
    paragraph: str | None
    basis: str
    computed_eccn: Eccn
    tpp: Decimal | None
    tpp_precision: str | None
    performance_density: Decimal | None
    die_area_mm2: Decimal | None
    data_center: bool
    rule_set: RuleSet
    licence_required: bool | None
    licence_exception: str | None
    review_policy: str | None
    ai_diffusion_tier: str | None
    reasons: list[str]
    citations: list[str]
    caveats: list[str]
    classification_source: str | None

    @property
    def licence(self) -> str:
        return {True: "required", False: "not_required", None: "unknown"}[self.licence_required]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: decimals as canonical strings, dates ISO."""
        return {
            "gpu": self.gpu,
            "gpu_name": self.gpu_name,
            "destination": self.destination,
            "as_of": self.as_of.isoformat(),
            "classification": {
                "eccn": self.eccn,
                "paragraph": self.paragraph,
                "basis": self.basis,
                "source_url": self.classification_source,
                "computed_eccn": self.computed_eccn,
            },
            "tpp": _text(self.tpp),
            "tpp_precision": self.tpp_precision,
            "performance_density": _text(_round(self.performance_density)),
            "die_area_mm2": _text(self.die_area_mm2),
            "data_center": self.data_center,
            "rule_set": {
                k: (v.isoformat() if isinstance(v, date) else v)
                for k, v in self.rule_set.public().items()
            },
            "licence_required": self.licence_required,
            "licence": self.licence,
            "licence_exception": self.licence_exception,
            "review_policy": self.review_policy,
            "ai_diffusion_tier": self.ai_diffusion_tier,
            "reasons": self.reasons,
            "citations": self.citations,
            "caveats": self.caveats,
            "notice": NOTICE,
        }


def evaluate(
    gpu: GpuSpecs,
    destination: str,
    on: date,
    rule_set: RuleSet,
    lists: CountryLists,
    published: list[Published] | None = None,
) -> ExportAnswer:
    """Classify ``gpu`` and decide whether exporting it to ``destination`` on ``on`` needs a
    licence under ``rule_set`` (the one in force on ``on``) with ``lists`` as of ``on``."""
    rules = rule_set.rules
    reasons: list[str] = []
    citations: list[str] = []

    def cite(url: str | None) -> None:
        for part in (url or "").split(" ; "):
            if part.strip() and part.strip() not in citations:
                citations.append(part.strip())

    metric = tpp(gpu.dense)
    tpp_value, precision = metric if metric else (None, None)
    pd = performance_density(tpp_value, gpu.die_area_mm2)
    computed = classify(tpp_value, pd, gpu.data_center, rules.thresholds)
    if precision == "tf32":
        reasons.append("TPP is set by TF32, counted as 32-bit (its operand width; 19 bits used)")
    chosen = published_on(published or [], on)
    basis: str
    if chosen is not None:
        eccn, basis = chosen.eccn, chosen.basis
        paragraph = computed.paragraph if computed.eccn == eccn else None
        reasons.append(
            f"Classification {eccn} is {basis} (published; it wins over the computed "
            f"{computed.eccn}: {computed.reason})"
        )
        cite(chosen.source_url)
        nac = computed.nac_eligible and eccn == computed.eccn
    else:
        eccn, paragraph, basis = computed.eccn, computed.paragraph, "computed"
        reasons.append(f"Computed {paragraph or eccn}: {computed.reason}")
        nac = computed.nac_eligible
    cite(rules.thresholds.source)

    target = destination
    if destination in lists.get("us_treated_as_cn", frozenset()):
        target = "CN"
        reasons.append(f"{destination} is treated as China (CN) under the EAR")

    tier: str | None = None
    for name, scope in rules.tiers.items():
        if scope.contains(target, lists):
            tier = name
            break
    if rules.tiers and tier is None:
        tier = "tier2"

    licence: bool | None = False
    exception: str | None = None
    controlled = eccn in rules.licence_scope.eccns
    in_scope = rules.licence_scope.contains(target, lists)
    named = [
        item
        for item in rules.named_items
        if gpu.slug in item.gpus
        and (item.from_ is None or item.from_ <= on)
        and item.contains(target, lists)
    ]
    if named:
        licence = True
        for item in named:
            reasons.append(item.reason)
            cite(item.citation)
    if in_scope and controlled:
        licence = True
        reasons.append(
            f"{eccn} to {target}: the destination is in the rule set's licence scope "
            "(Country Groups D:1, D:4, D:5 or Macau, less A:5/A:6)"
        )
        cite(rules.licence_scope.citation)
        if nac:
            exception = "NAC"
            reasons.append("License Exception NAC (notified advanced computing) may be available")
    elif in_scope and eccn == UNKNOWN and licence is not True:
        licence = None
        reasons.append(
            f"{target} is in the licence scope but the classification is unknown: "
            "a licence may be required"
        )
        cite(rules.licence_scope.citation)
    elif controlled and not named:
        reasons.append(f"{target} is outside the licence scope for {eccn} under this rule set")

    if rules.worldwide is not None and tier != rules.worldwide.except_tier and licence is False:
        ww = rules.worldwide
        affected = eccn in ww.eccns
        if affected or eccn == UNKNOWN:
            due = ww.compliance_date is None or on >= ww.compliance_date
            if due:
                licence = True if affected else None
                reasons.append(f"Worldwide licence requirement for {', '.join(ww.eccns)}")
            else:
                reasons.append(
                    f"The worldwide licence requirement ({tier}) had a compliance date of "
                    f"{ww.compliance_date}, not reached on {on}"
                )
            cite(ww.citation)

    review: str | None = None
    if licence is True:
        for policy in rules.review_policies:
            if not policy.contains(target, lists):
                continue
            bandwidth = (
                gpu.memory_bandwidth_tbps * 1000 if gpu.memory_bandwidth_tbps is not None else None
            )
            if policy.max_tpp is not None and (tpp_value is None or tpp_value >= policy.max_tpp):
                continue
            if policy.max_memory_bandwidth_gbps is not None and (
                bandwidth is None or bandwidth >= policy.max_memory_bandwidth_gbps
            ):
                continue
            review = policy.policy
            reasons.append(
                f"Licence review policy: {policy.policy.replace('_', ' ')}"
                + (f" ({policy.note})" if policy.note else "")
            )
            cite(policy.citation)
            break

    for url in rule_set.source_urls:
        cite(url)
    caveats = list(rules.caveats) if eccn.startswith("3A090") or eccn == UNKNOWN else []
    if not caveats:
        caveats = [c for c in rules.caveats if "Other controls" in c]
    return ExportAnswer(
        gpu=gpu.slug,
        gpu_name=gpu.name,
        destination=destination,
        as_of=on,
        eccn=eccn,
        paragraph=paragraph,
        basis=basis,
        computed_eccn=computed.eccn,
        tpp=tpp_value,
        tpp_precision=precision,
        performance_density=pd,
        die_area_mm2=gpu.die_area_mm2,
        data_center=gpu.data_center,
        rule_set=rule_set,
        licence_required=licence,
        licence_exception=exception,
        review_policy=review,
        ai_diffusion_tier=tier,
        reasons=reasons,
        citations=citations,
        caveats=caveats,
        classification_source=chosen.source_url if chosen else rules.thresholds.source,
    )


def rule_set_on(rule_sets: list[RuleSet], on: date) -> RuleSet | None:
    for rule_set in rule_sets:
        if rule_set.effective_from <= on and (
            rule_set.effective_to is None or on <= rule_set.effective_to
        ):
            return rule_set
    return None


def _round(value: Decimal | None, places: int = 2) -> Decimal | None:
    return None if value is None else value.quantize(Decimal(1).scaleb(-places))


def _text(value: Decimal | None) -> str | None:
    if value is None:
        return None
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _fmt(value: Decimal, places: int | None = None) -> str:
    return _text(_round(value, places) if places is not None else value) or ""
