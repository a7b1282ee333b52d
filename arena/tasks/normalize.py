"""Answer normalization for `answer` checks.

Agents write the same value many ways: "$1,200.50", "1200.5 USD", "1 200.50"; "Cancelled" and
"cancelled". Both the expected value and the answer go through `normalize_text`, then
`contains_value` matches the expected value, treating numbers as whole tokens.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_CURRENCY = re.compile(r"[$€£¥₹₩₽₺₪₫฿¢]")
# A number with comma thousands separators (full 3-digit groups) or a plain one, with optional
# decimals. Spaces never join digit groups: "3 100" is two numbers (NFKC turns thin spaces into
# plain ones first).
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\d])")
_SPACE = re.compile(r"\s+")


def _canonical_number(match: re.Match[str]) -> str:
    integer = match.group(1).replace(",", "")
    decimals = match.group(2) or ""
    if decimals:
        decimals = decimals.rstrip("0")
        if decimals == ".":
            decimals = ""
    return integer + decimals


def normalize_text(text: str) -> str:
    """Casefold, unify unicode forms, drop currency symbols, canonicalize numbers, squeeze whitespace.

    Numbers lose thousands separators and trailing decimal zeros ("1,200.50" -> "1200.5",
    "3.00" -> "3"); leading zeros stay because they are part of ids ("0042").
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _CURRENCY.sub(" ", text)
    text = _SPACE.sub(" ", text).strip()
    text = _NUMBER.sub(_canonical_number, text)
    return _SPACE.sub(" ", text).strip()


def distinct_numbers(text: str) -> set[str]:
    """The distinct numbers `text` mentions, canonicalized as `normalize_text` writes them."""
    return {_canonical_number(m) for m in _NUMBER.finditer(unicodedata.normalize("NFKC", text))}


@lru_cache(maxsize=8192)
def value_pattern(expected: str) -> re.Pattern[str] | None:
    """The pattern `contains_value` searches normalized text with (None for a blank value)."""
    needle = normalize_text(expected)
    if not needle:
        return None
    pattern = re.escape(needle)
    if needle[0].isdigit():
        pattern = r"(?<![\d.])" + pattern
    if needle[-1].isdigit():
        pattern = pattern + r"(?!\.?\d)"
    return re.compile(pattern)


def contains_value(answer: str, expected: str) -> bool:
    """Whether normalized `expected` occurs in normalized `answer`.

    A value starting or ending with a digit must not touch further digits there, so "12" does
    not match "120" or "3.12", while words match as substrings ("cancel" matches "cancelled").
    """
    pattern = value_pattern(expected)
    return pattern is not None and pattern.search(normalize_text(answer)) is not None
