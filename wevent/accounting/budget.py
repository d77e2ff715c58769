"""Exact privacy budgets.

A `Budget` is a non-negative rational number. Decimal strings parse exactly (``"0.1"`` is 1/10),
``"a/b"`` parses, and floats only enter through `Budget.round_float`, which names the direction in
which the float's value is rounded. No verdict in wevent depends on a float tolerance.
"""

from __future__ import annotations

import functools
import math
import os
import re
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Final

from wevent.errors import InputError, LimitError

__all__ = [
    "MAX_SLOT",
    "Budget",
    "BudgetError",
    "Rounding",
    "approx",
    "check_common_denominator",
    "check_slot",
    "format_exact",
    "parse_exact",
    "parse_slot",
    "parse_window",
    "ratio_text",
    "shown",
]

# A decimal (optionally with exponent) or a fraction of two integers; no underscores, no "inf".
# ASCII digits only ([0-9], not \d, which also takes Arabic-Indic or fullwidth digits).
_DECIMAL: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?")
_RATIO: Final = re.compile(r"([+-]?[0-9]+)[ \t]*/[ \t]*([0-9]+)")
_PAD: Final = " \t"  # what a number may be padded with (not NBSP, vertical tab, ...)
_MAX_EXPONENT: Final = 400  # 10**400 is already far outside any meaningful budget
_MAX_LENGTH: Final = 1000  # characters of one exact number (guards against absurd inputs)
MAX_SLOT: Final = 2**62 - 1  # slot numbers stay clear of int64 limits in every engine
DIGITS_VARIABLE: Final = "WEVENT_MAX_DIGITS"
DEFAULT_MAX_DIGITS: Final = 10_000


@functools.cache
def max_digits() -> int:
    """The most decimal digits the common denominator of a ledger's amounts and bounds may have
    (`DEFAULT_MAX_DIGITS`, or the environment variable ``WEVENT_MAX_DIGITS``). One number is at
    most 1,000 characters, but exact arithmetic over many distinct large denominators is
    unbounded work (their common denominator grows with each), so the common one is bounded:
    `check_common_denominator`."""
    return env_limit(DIGITS_VARIABLE, DEFAULT_MAX_DIGITS, "digits")


def env_limit(variable: str, default: int, unit: str) -> int:
    """A limit set by the environment variable ``variable`` (``default`` when unset or empty):
    a whole number from 1 to 999,999,999, else `LimitError` naming the variable."""
    text = os.environ.get(variable, "")
    if not text:
        return default
    if not re.fullmatch(r"[0-9]{1,9}", text) or int(text) < 1:
        raise LimitError(
            f"{variable}={shown(text)}: give a whole number of {unit} from 1 to 999,999,999"
        )
    return int(text)


@functools.lru_cache(maxsize=4)
def _power_of_ten(digits: int) -> int:
    """10**digits: the least integer of ``digits + 1`` digits (no str() of a huge integer,
    which Python limits to 4,300 digits)."""
    return int(10**digits)


def check_common_denominator(value: int, what: str) -> int:
    """``value`` (a common denominator being built) if it has at most `max_digits` digits, else
    `BudgetError` naming the limit and how to raise it."""
    limit = max_digits()
    # log2(10) = 3.3219...: a quick integer pre-check before the exact comparison
    if value.bit_length() > limit * 33219 // 10000 - 4 and value >= _power_of_ten(limit):
        raise BudgetError(
            f"{what}: the common denominator of the amounts and bounds has more than {limit:,} "
            f"digits (many distinct large denominators; set {DIGITS_VARIABLE} to raise the limit)"
        )
    return value


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)`` for a message, cut to ``limit`` characters with the full length named (a
    5,000-digit slot is not echoed whole)."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:  # str() of huge ints is slow
        return f"an integer of about {value.bit_length() * 30103 // 100000 + 1} digits"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}\u2026 ({len(text)} characters)"


class BudgetError(InputError):
    """A value that cannot be used as an exact budget, window or evidence parameter."""


class Rounding(Enum):
    """Direction in which an inexact value is rounded to a rational."""

    UP = "up"
    DOWN = "down"


def parse_exact(text: str, *, what: str = "value") -> Fraction:
    """Parse a decimal string (``"0.1"``, ``"1e-18"``) or a ratio (``"1/3"``) exactly.

    Raises `BudgetError` with a one-line message naming `what` for anything else (NaN, infinities,
    empty strings, zero denominators, absurd exponents).
    """
    if not isinstance(text, str):
        raise BudgetError(f"{what}: expected an exact number as text, got {type(text).__name__}")
    s = text.strip(_PAD)
    if not s:
        raise BudgetError(f"{what}: empty value (expected a decimal like 0.1 or a ratio like 1/3)")
    if len(s) > _MAX_LENGTH:
        raise BudgetError(
            f"{what}: a number of {len(s)} characters is too long (max {_MAX_LENGTH})"
        )
    ratio = _RATIO.fullmatch(s)
    if ratio is not None:
        den = int(ratio.group(2))
        if den == 0:
            raise BudgetError(f"{what}: {shown(text)} has a zero denominator")
        return Fraction(int(ratio.group(1)), den)
    dec = _DECIMAL.fullmatch(s)
    if dec is None:
        lowered = s.lower().lstrip("+-")
        if lowered in {"nan", "inf", "infinity"}:
            raise BudgetError(f"{what}: {shown(text)} is not a finite number")
        raise BudgetError(
            f"{what}: {shown(text)} is not an exact number (use a decimal like 0.1 or a ratio "
            "like 1/3, in ASCII digits)"
        )
    exponent = dec.group(1)
    if exponent is not None and abs(int(exponent)) > _MAX_EXPONENT:
        raise BudgetError(f"{what}: exponent of {shown(text)} is out of range")
    return Fraction(s)


def parse_window(text: str, *, what: str = "w", allow_infinite: bool = False) -> int | None:
    """Parse a window size: a positive integer, or ``inf`` (returned as None) where allowed."""
    s = text.strip(_PAD) if isinstance(text, str) else str(text)
    if len(s) > _MAX_LENGTH:
        raise BudgetError(f"{what}: a window of {len(s)} digits is too long")
    if allow_infinite and s.lower() in {"inf", "infinity"}:
        return None
    if not re.fullmatch(r"\+?[0-9]+", s):
        hint = " or inf" if allow_infinite else ""
        raise BudgetError(
            f"{what}: {shown(text)} is not a positive whole number of slots{hint} (ASCII digits)"
        )
    value = int(s)
    if value <= 0:
        raise BudgetError(f"{what}: window size must be at least 1 slot, got {value}")
    return value


def parse_slot(text: str, *, what: str = "slot") -> int:
    """Parse a slot number: slots are numbered from 1."""
    s = text.strip(_PAD) if isinstance(text, str) else str(text)
    if len(s) > 30 or not re.fullmatch(r"[+-]?[0-9]+", s):
        raise BudgetError(f"{what}: {shown(text)} is not a whole slot number (ASCII digits)")
    return check_slot(int(s), what=what)


def check_slot(value: object, *, what: str = "slot") -> int:
    """Validate a slot number: an integer from 1 to MAX_SLOT."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(f"{what}: slots are whole numbers, got {shown(value)}")
    if value < 1:
        raise BudgetError(f"{what}: slots are numbered from 1, got {shown(value)}")
    if value > MAX_SLOT:
        raise BudgetError(f"{what}: {shown(value)} is beyond the largest slot 2^62 - 1")
    return value


def directed_decimal(x: Fraction, digits: int, *, up: bool) -> Decimal:
    """``x`` rounded to about ``digits`` significant decimal digits, down (toward -inf) or up
    (toward +inf): an exact decimal, so the direction holds whatever its size."""
    if x == 0:
        return Decimal(0)
    size = abs(x)
    if size >= 1:
        exponent = len(str(size.numerator // size.denominator))
    else:  # the first significant digit's place below the point, give or take one
        exponent = 1 - len(str(size.denominator // size.numerator))
    places = digits - exponent
    scaled = x * Fraction(10) ** places
    whole = (
        -(-scaled.numerator // scaled.denominator) if up else scaled.numerator // scaled.denominator
    )
    return Decimal(f"{whole}E{-places}")  # exact (scaleb would round to the context)


def short_exact(x: Fraction) -> str | None:
    """``x`` exactly (a decimal or a ratio) in at most 24 characters, else None."""
    text = format_exact(x)
    return text if len(text) <= 24 else None


def cost_phrase(
    lower: Fraction, upper: Fraction | None, amount: Fraction, amount_text: str = "the amount"
) -> str:
    """What certified bounds ``[lower, upper]`` of an evidence cost say against the ``amount``
    charged (named ``amount_text``), completing "the cost ...": the checker's verdicts and the
    guard's refusals word it alike. A cost known exactly is printed exactly; every rounded bound
    is rounded outward (a lower bound down, an upper bound up) and marked ``~``, a lower bound
    above the amount with as many digits as it takes to read as above it (up to 60; closer
    than that, the excess itself, rounded down, is shown). ``upper`` None: not known."""
    if lower == upper and short_exact(lower) is not None:
        return f"is {short_exact(lower)}, more than {amount_text}"
    if lower > amount:
        exact = short_exact(lower)
        if exact is not None:
            return f"is at least {exact}, more than {amount_text}"
        for digits in range(6, 61):
            shown = directed_decimal(lower, digits, up=False)
            if Fraction(shown) > amount:
                return f"is at least ~{shown} (rounded down), more than {amount_text}"
        excess = directed_decimal(lower - amount, 6, up=False)  # positive: lower > amount
        return f"is more than {amount_text} by at least ~{excess} (rounded down)"

    def bound(x: Fraction, *, up: bool) -> str:
        exact = short_exact(x)
        return exact if exact is not None else f"~{directed_decimal(x, 6, up=up)}"

    if upper is None:
        return f"could not be certified at most {amount_text}"
    return (
        f"could not be certified at most {amount_text}: it lies in [{bound(lower, up=False)}, "
        f"{bound(upper, up=True)}] (rounded outward where marked ~)"
    )


def approx(value: Fraction | int, digits: int = 6) -> str:
    """A short decimal rendering for display only (never for a verdict); any magnitude."""
    frac = Fraction(value)
    if frac == 0:
        return "0"
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = digits
        ctx.Emax, ctx.Emin = 999_999_999, -999_999_999
        text = str(+(Decimal(frac.numerator) / Decimal(frac.denominator)))
    return text


def float_display(value: float, digits: int = 6) -> str:
    """A float metric for display only: ``digits`` significant digits, marked ``~`` when that
    rounds the value (the text does not read back as the same float), unmarked when it is the
    value itself ("2.5", "0.025")."""
    text = f"{value:.{digits}g}"
    if value != value or value in (float("inf"), float("-inf")) or float(text) == value:
        return text
    return f"~{text}"


class Budget(Fraction):
    """An exact, non-negative privacy budget (a `fractions.Fraction` that is never negative).

    Arithmetic on budgets gives plain `Fraction` values (a difference may be negative); wrap a
    result in `Budget(...)` to assert it is a budget again.
    """

    __slots__ = ("_hash",)
    _hash: int

    def __new__(cls, value: Fraction | int | str = 0, *, what: str = "epsilon") -> Budget:
        if type(value) is cls:  # already this exact, non-negative budget (immutable): no copy
            return value
        if isinstance(value, bool):
            raise BudgetError(f"{what}: a boolean is not a budget")
        if isinstance(value, float):
            raise BudgetError(
                f"{what}: floats are not exact; use Budget.round_float(x, Rounding.UP or DOWN)"
            )
        if isinstance(value, str):
            frac = parse_exact(value, what=what)
        elif isinstance(value, int | Fraction):
            frac = Fraction(value)
        else:
            raise BudgetError(f"{what}: cannot make a budget from {type(value).__name__}")
        if frac < 0:
            raise BudgetError(f"{what}: a budget cannot be negative, got {format_exact(frac)}")
        return super().__new__(cls, frac.numerator, frac.denominator)

    @classmethod
    def from_float(cls, f: float) -> Budget:
        """Refused: a float has no rounding direction. Use `Budget.round_float`."""
        raise BudgetError(
            "epsilon: floats are not exact; use Budget.round_float(x, Rounding.UP or DOWN)"
        )

    @classmethod
    def round_float(
        cls, x: float, rounding: Rounding, *, places: int | None = 12, what: str = "epsilon"
    ) -> Budget:
        """Convert a float explicitly, rounding its exact binary value in the given direction.

        With ``places`` set, the result is the nearest multiple of ``10**-places`` on the chosen side
        of the float's exact value (so ``round_float(0.1, Rounding.DOWN)`` is 1/10). With
        ``places=None`` the float's exact binary value is kept, whatever the direction.
        """
        if isinstance(x, bool) or not isinstance(x, float | int):
            raise BudgetError(f"{what}: round_float expects a float, got {type(x).__name__}")
        if not math.isfinite(x):
            raise BudgetError(f"{what}: {x!r} is not a finite number")
        exact = Fraction(x)
        if places is not None:
            if places < 0:
                raise BudgetError("places must be >= 0")
            scale = 10**places
            scaled = exact * scale
            n = math.ceil(scaled) if rounding is Rounding.UP else math.floor(scaled)
            exact = Fraction(n, scale)
        return cls(exact, what=what)

    def __hash__(self) -> int:  # type: ignore[override]
        # Budgets key the ledger's dictionary encoding on every charge: hash once (equal to the
        # hash of the equal Fraction, so Budget and Fraction keys stay interchangeable).
        try:
            return self._hash
        except AttributeError:
            self._hash = super().__hash__()
            return self._hash

    def __copy__(self) -> Budget:
        return self  # immutable

    def __deepcopy__(self, memo: object) -> Budget:
        return self

    def __reduce__(self) -> tuple[type[Budget], tuple[str]]:
        return (Budget, (format_exact(self),))

    def __repr__(self) -> str:
        return f"Budget('{format_exact(self)}')"

    def __str__(self) -> str:
        return format_exact(self)


def ratio_text(value: Fraction | int) -> str:
    """A rational for JSON: ``"a/b"``, or an integer string."""
    frac = Fraction(value)
    return str(frac.numerator) if frac.denominator == 1 else f"{frac.numerator}/{frac.denominator}"


def format_exact(value: Fraction | int) -> str:
    """Render a rational exactly: a terminating decimal where one exists, else ``a/b``."""
    frac = Fraction(value)
    den = frac.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1 or max(twos, fives) > 30:
        return f"{frac.numerator}/{frac.denominator}"
    places = max(twos, fives)
    if places == 0:
        return str(frac.numerator)
    scaled = abs(frac.numerator) * (10**places // frac.denominator)
    digits = str(scaled).rjust(places + 1, "0")
    sign = "-" if frac < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"
