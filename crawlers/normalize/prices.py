"""Price strings as pricing pages print them -> amount, currency, billing unit, basis.

Pure functions, no I/O. Every spider passes its price cells through :func:`parse_price`
so "$2.49/hr", "$2.49 per GPU/hour", "€1,80 HT / heure", "from $1,299/mo" and
"¥12.5/小时" are read one way everywhere.

Decisions (tested in ``tests/schema/test_prices.py``):

- **No price is not an error.** "Contact sales", "Contact us", "––", "n/a", "Coming soon"
  and an empty cell return ``None``: the row has no public price, so no offer is emitted
  (the spider counts it). Text with digits that cannot be read raises
  :class:`UnparseablePrice`: that is a page we do not understand, never a silent skip.
- **Floors**: "from $1.55", "starting at", "as low as", "à partir de", "ab", "起" and a
  trailing "+" set ``floor=True``; the amount is the published lower bound.
- **Ranges** ("$2.49 - $3.10/hr") are kept, not rejected: the amount is the lower bound,
  ``floor=True`` and ``upper`` holds the upper bound. A buyer pays at least the lower
  bound; flagging it as a floor keeps queries honest ("from $2.49").
- **Separators**: when both "," and "." occur, the last one is the decimal mark. A single
  "," followed by exactly three digits after a non-zero integer part is a thousands
  separator ("$1,299"); otherwise it is a decimal comma ("€1,80", "0,125"). A single "."
  is a decimal point unless the caller says the page uses decimal commas
  (``decimal_comma=True``: "1.299 €"). Spaces, no-break spaces and apostrophes group
  thousands ("1 299,50 €", "1'299.50").
- **Currency**: a symbol or ISO code next to the amount wins; otherwise ``currency`` (the
  page's currency) is used. "$" means ``currency`` when that is a dollar currency, else
  USD. "¥" is CNY with Chinese unit words (小时, 元, 月, 天) and JPY with Japanese ones
  (円, 時間); a bare "¥" follows ``currency`` when that is CNY or JPY and is otherwise
  ambiguous (:class:`UnparseablePrice`).
- **Basis**: "GPU" (or a GPU model such as "H100") in the unit part means per GPU;
  "instance", "server", "node", "machine" mean per instance; otherwise ``per_gpu`` is
  ``None`` (unknown: the caller decides, usually from the column header).
- Money is :class:`~decimal.Decimal` built from the text, never a float.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from schema.codes import currency_codes
from schema.enums import Unit


class UnparseablePrice(ValueError):
    """The text looks like a price (it has digits) but cannot be read unambiguously."""


@dataclass(frozen=True)
class Price:
    amount: Decimal
    currency: str | None
    """ISO 4217 code, or None when neither the text nor the caller names one."""
    unit: Unit | None
    """Billing unit named by the text ("/hr", "per month"), or the caller's default."""
    per_gpu: bool | None = None
    """True: per GPU; False: per instance; None: the text does not say."""
    floor: bool = False
    """The published amount is a lower bound ("from $x", or a range)."""
    upper: Decimal | None = None
    """Upper bound of a published range."""
    text: str = ""


# ---------------------------------------------------------------- no-price markers

_NO_PRICE = re.compile(
    r"^(?:contact(?:\s+(?:us|sales|our\s+sales(?:\s+team)?))?(?:\s+for\s+pric(?:e|ing))?"
    r"|talk\s+to\s+(?:us|sales)|call\s+us|ask\s+us|get\s+(?:a\s+)?quote|request\s+(?:a\s+)?quote"
    r"|on\s+request|upon\s+request|price\s+on\s+request|sur\s+(?:demande|devis)|nous\s+contacter"
    r"|auf\s+anfrage|kontakt|coming\s+soon|soon|sold\s+out|unavailable|not\s+available"
    r"|n/?a|none|tbd|tba|free\s+trial|custom|custom\s+pricing|bientôt|联系我们|询价|お問い合わせ"
    r"|[-–—‒―−_~.·•*x✕✗×]+|🔜)$",
    re.IGNORECASE,
)

# ---------------------------------------------------------------- currencies

_SYMBOLS: tuple[tuple[str, str], ...] = (
    # longest first: "US$" before "$"
    ("US$", "USD"),
    ("USD$", "USD"),
    ("CA$", "CAD"),
    ("C$", "CAD"),
    ("AU$", "AUD"),
    ("A$", "AUD"),
    ("NZ$", "NZD"),
    ("HK$", "HKD"),
    ("S$", "SGD"),
    ("R$", "BRL"),
    ("MX$", "MXN"),
    ("€", "EUR"),
    ("£", "GBP"),
    ("₹", "INR"),
    ("₩", "KRW"),
    ("₽", "RUB"),
    ("₺", "TRY"),
    ("₪", "ILS"),
    ("zł", "PLN"),
    ("元", "CNY"),
    ("円", "JPY"),
    ("¥", "¥"),
    ("$", "$"),
)
_HAS_SYMBOL = re.compile("|".join(re.escape(printed) for printed, _ in _SYMBOLS))
_DOLLAR_CURRENCIES = frozenset({"USD", "CAD", "AUD", "NZD", "HKD", "SGD", "MXN", "TWD"})
_CHINESE_HINT = re.compile(r"小时|小時|元|月|天|起|人民币")
_JAPANESE_HINT = re.compile(r"円|時間|ヶ月|から")

# ---------------------------------------------------------------- numbers

# A number as printed: digits with optional grouping (",", ".", space, apostrophe) and an
# optional decimal part. Spaces group only three-digit blocks, so "16 192" stays "16".
_NUMBER = r"\d{1,3}(?:[ \u00a0\u202f\u2009'’]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)*"
_CURRENCY_TOKEN = "|".join(re.escape(s) for s, _ in _SYMBOLS)
_ISO = r"\b[A-Z]{3}\b"
_AMOUNT = re.compile(
    rf"(?P<pre>{_CURRENCY_TOKEN}|{_ISO})?\s*(?P<num>{_NUMBER})\s*(?P<post>{_CURRENCY_TOKEN}|{_ISO})?"
)
_RANGE_SEP = re.compile(r"^\s*(?:-|–|—|~|to|à|a|bis|até|至|〜|～)\s*", re.IGNORECASE)
_FLOOR = re.compile(
    r"\b(?:from|starting(?:\s+(?:at|from))?|starts?\s+(?:at|from)|as\s+low\s+as|minimum"
    r"|à\s+partir\s+de|a\s+partir\s+de|dès|desde|ab)\b|起|から",
    re.IGNORECASE,
)
_SUPERSCRIPTS = re.compile(r"[\u00b9\u00b2\u00b3\u2070-\u209f]")
_SPACES = re.compile(r"[\s\u00a0\u202f\u2009\u200b]+")

# ---------------------------------------------------------------- units

_UNIT_WORDS: dict[str, Unit] = {}
for _unit, _words in {
    Unit.second: "s sec secs second seconds sekunde seconde 秒",
    Unit.minute: "min mins minute minutes minuto minuten 分 分钟 分鐘",
    Unit.hour: "h hr hrs hour hours hourly heure heures stunde std hora horas ora"
    " 小时 小時 時間 時",
    Unit.day: "d day days daily jour jours tag tage día 天 日",
    Unit.week: "wk week weeks weekly semaine woche 周 週",
    Unit.month: "mo mos mon month months monthly mois monat monate mes 月 ヶ月 个月",
    Unit.year: "yr yrs year years yearly annual annually année jahr año 年",
}.items():
    for _word in _words.split():
        _UNIT_WORDS[_word] = _unit
_GPU_WORDS = frozenset({"gpu", "gpus", "card", "accelerator", "卡"})
_INSTANCE_WORDS = frozenset({"instance", "server", "node", "machine", "vm", "droplet", "pod"})
_MODEL_TOKEN = re.compile(r"^[a-z]{1,3}\d{2,4}[a-z]{0,3}$")
_TOKEN = re.compile(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u9fff]+", re.IGNORECASE)
_CJK_UNIT = re.compile(
    "|".join(sorted((w for w in _UNIT_WORDS if not w.isascii()), key=len, reverse=True))
)


def _clean(text: str) -> str:
    text = _SUPERSCRIPTS.sub("", text)  # footnote markers; NFKC would turn "¹" into "1"
    text = unicodedata.normalize("NFKC", text)
    return _SPACES.sub(" ", text).strip()


def is_no_price(text: str | None) -> bool:
    """True for an empty cell or a known 'no public price' marker ("Contact sales")."""
    if text is None:
        return True
    cleaned = _clean(text).strip(" *†‡:;,.()[]")
    return not cleaned or bool(_NO_PRICE.match(cleaned))


def to_decimal(token: str, *, decimal_comma: bool | None = None) -> Decimal:
    """One printed number ("1,299", "1.299,50", "1 299,50", "0,125") -> Decimal."""
    digits = re.sub(r"[ \u00a0\u202f\u2009'’]", "", token.strip())
    if not digits or not re.fullmatch(r"\d+(?:[.,]\d+)*", digits):
        raise UnparseablePrice(f"not a number: {token!r}")
    commas, dots = digits.count(","), digits.count(".")
    if commas and dots:
        decimal_mark = "," if digits.rfind(",") > digits.rfind(".") else "."
        group_mark = "." if decimal_mark == "," else ","
        if digits.count(decimal_mark) > 1:
            raise UnparseablePrice(f"two decimal marks in {token!r}")
        whole, _, fraction = digits.partition(decimal_mark)
        _check_groups(whole, group_mark, token)
        normalized = f"{whole.replace(group_mark, '')}.{fraction}"
    elif commas or dots:
        mark = "," if commas else "."
        parts = digits.split(mark)
        if len(parts) > 2:  # "1,234,567" / "1.234.567": grouping only
            _check_groups(digits, mark, token)
            normalized = digits.replace(mark, "")
        else:
            whole, fraction = parts
            if mark == ",":
                grouping = len(fraction) == 3 and whole != "0" and decimal_comma is not True
            else:
                grouping = len(fraction) == 3 and whole != "0" and decimal_comma is True
            normalized = whole + fraction if grouping else f"{whole}.{fraction}"
    else:
        normalized = digits
    try:
        value = Decimal(normalized)
    except InvalidOperation:  # pragma: no cover - the regex admits only digits and one "."
        raise UnparseablePrice(f"not a number: {token!r}") from None
    return value


def _check_groups(number: str, mark: str, token: str) -> None:
    head, *groups = number.split(mark)
    if not (1 <= len(head) <= 3) or any(len(g) != 3 for g in groups):
        raise UnparseablePrice(f"odd digit grouping in {token!r}")


def parse_number(text: str | None, *, decimal_comma: bool | None = None) -> Decimal | None:
    """The one number in a spec cell ("1,920 GiB" -> 1920, "208" -> 208), else None.

    Ranges ("16-192") and cells with several numbers return None: a spec we cannot state
    as one figure is better left empty than guessed.
    """
    if text is None:
        return None
    cleaned = _clean(text)
    numbers = re.findall(_NUMBER, cleaned)
    if len(numbers) != 1:
        return None
    try:
        return to_decimal(numbers[0], decimal_comma=decimal_comma)
    except UnparseablePrice:
        return None


def _currency(symbol: str | None, default: str | None, context: str) -> str | None:
    if not symbol:
        return None
    if symbol == "$":
        return default if default in _DOLLAR_CURRENCIES else "USD"
    if symbol == "¥":
        if _CHINESE_HINT.search(context) or default == "CNY":
            return "CNY"
        if _JAPANESE_HINT.search(context) or default == "JPY":
            return "JPY"
        raise UnparseablePrice(f"'¥' is ambiguous (CNY or JPY) in {context!r}")
    for printed, code in _SYMBOLS:
        if symbol == printed:
            return code
    if symbol in currency_codes():
        return symbol
    return None


def _amount_currency(
    match: re.Match[str], default: str | None, context: str
) -> tuple[str | None, int]:
    """The currency a matched amount names (symbol or ISO code), and where the amount ends.

    A word captured next to the number that is not a currency ("HGX 2.49", "2.49 GPU")
    is not consumed: it belongs to the unit text that follows.
    """
    pre = _currency(match.group("pre"), default, context)
    post = _currency(match.group("post"), default, context)
    end = match.end() if post else match.end("num")
    return pre or post, end


def _find_amount(cleaned: str, default: str | None) -> tuple[re.Match[str], str | None, int]:
    """The price in a cell: the first number next to a currency sign or code, else the
    first number. A number glued to a letter or a dot ("H100", "$O.55") is never a price,
    and a cell with a currency sign but no number next to it is unreadable."""
    candidates = []
    for match in _AMOUNT.finditer(cleaned):
        start = match.start("num")
        if (
            not match.group("pre")
            and start
            and (cleaned[start - 1].isalpha() or cleaned[start - 1] in ".,")
        ):
            continue
        code, end = _amount_currency(match, default, cleaned)
        if code:
            return match, code, end
        candidates.append(match)
    if _HAS_SYMBOL.search(cleaned):
        raise UnparseablePrice(f"no amount next to the currency sign in {cleaned[:80]!r}")
    if not candidates:
        raise UnparseablePrice(f"no amount in {cleaned[:80]!r}")
    return candidates[0], None, candidates[0].end("num")


_TERMS = {"1": "reserved_1m", "6": "reserved_6m", "12": "reserved_1y", "36": "reserved_3y"}


def reserved_kind(months: str | None) -> str:
    """The price kind of a commitment of ``months`` ("12" -> ``reserved_1y``); no stated
    term is plain ``reserved``, which the pipeline rejects with its row."""
    if months is None:
        return "reserved"
    return _TERMS.get(months, f"reserved_{months}m")


def parse_unit(text: str | None) -> tuple[Unit | None, bool | None]:
    """The billing unit and basis named by a unit text or a column header.

    "/GPU/hour" -> (hour, True); "PRICE/GPU/HR*" -> (hour, True); "per month" ->
    (month, None); "On-Demand Price (Per Hour)" -> (hour, None); "/H100/hour" -> (hour, True).
    """
    if not text:
        return None, None
    cleaned = _clean(text).lower()
    tokens = _TOKEN.findall(cleaned)
    expanded: list[str] = []
    for token in tokens:
        if token.isascii():
            expanded.append(token)
        else:  # CJK runs have no spaces: "元/小时" is one run after the "/" split
            expanded.extend(m.group(0) for m in _CJK_UNIT.finditer(token))
            expanded.extend(ch for ch in token if ch in _GPU_WORDS)
    unit: Unit | None = None
    per_gpu: bool | None = None
    for token in expanded:
        if unit is None and token in _UNIT_WORDS:
            # a lone "h"/"s"/"d" counts only after a slash or "per": "/h", "per s"
            if (
                len(token) == 1
                and token.isascii()
                and not re.search(rf"(?:/|\bper\s|\bpar\s|\bpro\s|\ba\s)\s*{token}\b", cleaned)
            ):
                continue
            unit = _UNIT_WORDS[token]
        elif token in _GPU_WORDS or token.startswith("gpu"):
            per_gpu = True
        elif token in _INSTANCE_WORDS and per_gpu is None:
            per_gpu = False
    if unit is not None and per_gpu is None:
        # "$1.89/H100/hour": a GPU model in the per-path means per GPU
        path = cleaned.split("/")
        if len(path) > 2 and any(_MODEL_TOKEN.match(p.strip()) for p in path[1:-1]):
            per_gpu = True
    return unit, per_gpu


def parse_price(
    text: str | None,
    *,
    currency: str | None = None,
    unit: Unit | None = None,
    per_gpu: bool | None = None,
    decimal_comma: bool | None = None,
) -> Price | None:
    """Read one price cell. ``None`` means "no public price" (see module docstring).

    ``currency``, ``unit`` and ``per_gpu`` are the page's defaults (usually from the
    column header); what the text itself says wins.
    """
    if is_no_price(text):
        return None
    assert text is not None
    cleaned = _clean(text)
    match, code, end = _find_amount(cleaned, currency)
    number = to_decimal(match.group("num"), decimal_comma=decimal_comma)
    code = code or currency
    rest = cleaned[end:]
    upper: Decimal | None = None
    separator = _RANGE_SEP.match(rest)
    second = _AMOUNT.match(rest, separator.end()) if separator else None
    if second is not None:
        upper = to_decimal(second.group("num"), decimal_comma=decimal_comma)
        other_code, other_end = _amount_currency(second, currency, cleaned)
        if other_code and other_code != code:
            raise UnparseablePrice(f"range in two currencies: {cleaned[:80]!r}")
        rest = rest[other_end:]
        if upper < number:
            number, upper = upper, number
        if upper == number:
            upper = None
    head = cleaned[: match.start()]
    text_unit, text_per_gpu = parse_unit(rest)
    floor = bool(_FLOOR.search(head)) or rest.lstrip().startswith("+") or upper is not None
    if number <= 0:
        # "$0" is a placeholder that scripts fill in later (RunPod), never a real price
        raise UnparseablePrice(f"zero amount in {cleaned[:80]!r}")
    return Price(
        amount=number,
        currency=code,
        unit=text_unit or unit,
        per_gpu=text_per_gpu if text_per_gpu is not None else per_gpu,
        floor=floor,
        upper=upper,
        text=cleaned,
    )
