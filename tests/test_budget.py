from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wevent.accounting.budget import (
    Budget,
    BudgetError,
    Rounding,
    format_exact,
    parse_exact,
    parse_window,
)


def test_decimal_strings_parse_exactly() -> None:
    assert Budget("0.1") == Fraction(1, 10)
    assert Budget("0.1") + Budget("0.2") == Budget("0.3")
    assert Budget("1/3") * 3 == 1
    assert Budget("1e-18") == Fraction(1, 10**18)
    assert Budget(" 2.50 ") == Fraction(5, 2)
    assert Budget(3) == 3


@pytest.mark.parametrize(
    "text",
    ["nan", "NaN", "inf", "-inf", "Infinity", "", "   ", "abc", "1/0", "0x10", "1_000", "1e999999"],
)
def test_malformed_numbers_are_rejected_with_a_message(text: str) -> None:
    with pytest.raises(BudgetError) as info:
        Budget(text)
    assert "epsilon" in str(info.value)
    assert "\n" not in str(info.value)


def test_negative_budgets_are_rejected() -> None:
    with pytest.raises(BudgetError, match="negative"):
        Budget("-0.1")
    with pytest.raises(BudgetError, match="negative"):
        Budget(Fraction(-1, 3))


def test_floats_need_an_explicit_rounding_direction() -> None:
    with pytest.raises(BudgetError, match="round_float"):
        Budget(0.1)  # type: ignore[arg-type]
    with pytest.raises(BudgetError, match="round_float"):
        Budget.from_float(0.1)
    # The float 0.1 lies just above 1/10: rounding down to 12 places gives 1/10, up gives more.
    assert Budget.round_float(0.1, Rounding.DOWN) == Fraction(1, 10)
    assert Budget.round_float(0.1, Rounding.UP) == Fraction(1, 10) + Fraction(1, 10**12)
    assert Budget.round_float(0.1, Rounding.UP, places=None) == Fraction(0.1)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(BudgetError, match="finite"):
            Budget.round_float(bad, Rounding.UP)


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False), st.integers(0, 15))
def test_round_float_rounds_in_the_named_direction(x: float, places: int) -> None:
    up = Budget.round_float(x, Rounding.UP, places=places)
    down = Budget.round_float(x, Rounding.DOWN, places=places)
    assert down <= Fraction(x) <= up
    assert up - down <= Fraction(1, 10**places)


def test_windows() -> None:
    assert parse_window("3") == 3
    assert parse_window("inf", allow_infinite=True) is None
    for bad in ("0", "-1", "1.5", "inf", "w"):
        with pytest.raises(BudgetError):
            parse_window(bad)


@given(st.fractions())
def test_format_exact_round_trips(x: Fraction) -> None:
    assert parse_exact(format_exact(x)) == x


def test_format_exact_prefers_decimals() -> None:
    assert format_exact(Fraction(3, 10)) == "0.3"
    assert format_exact(Fraction(1, 3)) == "1/3"
    assert format_exact(Fraction(-5, 4)) == "-1.25"
    assert format_exact(Fraction(7)) == "7"
    assert str(Budget("0.30")) == "0.3"


def test_budgets_copy_pickle_and_hash_like_fractions() -> None:
    import copy
    import pickle

    b = Budget("1/3")
    assert copy.copy(b) is b and copy.deepcopy(b) is b
    back = pickle.loads(pickle.dumps(b))
    assert isinstance(back, Budget) and back == b
    assert hash(b) == hash(Fraction(1, 3)) == hash(back)
    table: dict[Fraction, str] = {b: "x"}
    assert table[Fraction(1, 3)] == "x"
