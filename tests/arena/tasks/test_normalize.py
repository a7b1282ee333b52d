"""Answer normalization: case, whitespace, currency symbols, number formats, whole-number matching."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.tasks.normalize import contains_value, normalize_text


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("$1,200.50", "1200.5"),
        ("1200.50 USD", "1200.5 usd"),
        ("€3.00", "3"),
        ("  Order   CANCELLED\n", "order cancelled"),
        ("ORD-0042", "ord-0042"),
        ("3 100", "3 100"),
        ("1,234,567.890", "1234567.89"),
        ("Ｔｏｔａｌ", "total"),
    ],
)
def test_normalize_text(raw: str, normal: str) -> None:
    assert normalize_text(raw) == normal


@pytest.mark.parametrize(
    ("answer", "expected", "found"),
    [
        ("Refund of $1,200.50 issued.", "1200.5", True),
        ("Refund of 1200.5 dollars", "$1,200.50", True),
        ("Your order was CANCELLED.", "cancel", True),
        ("Total: 12.", "12", True),
        ("You have 120 points", "12", False),
        ("Rate 3.12%", "12", False),
        ("12.5 km", "12", False),
        ("Booked at Casa   Gracia", "casa gracia", True),
        ("nothing here", "316", False),
    ],
)
def test_contains_value(answer: str, expected: str, found: bool) -> None:
    assert contains_value(answer, expected) is found


@given(st.text(min_size=1, max_size=40).filter(lambda s: normalize_text(s) != ""))
def test_a_value_is_always_found_in_itself(value: str) -> None:
    assert contains_value(value, value)
