"""Ledgers exactly on their bounds and one tiny step above: every checker says COMPLIANT on the
bound and NOT COMPLIANT one step over it, the guard accepts exactly its headroom and refuses
1/10**30 more, and the text never shows a rounded number unmarked. Each property has a negative
control: a mutant that compares in doubles, or with ``<`` for ``<=``, fails it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.strategies import ledgers, populations
from wevent.accounting.budget import Budget, format_exact
from wevent.accounting.evidence import GRR, Laplace, certify_cost
from wevent.accounting.formats import write_ledger
from wevent.accounting.ledger import Ledger
from wevent.accounting.population import Population
from wevent.accounting.requirements import Declaration, Dynamic, Fixed, WholeStream
from wevent.accounting.spending import BudgetExceeded
from wevent.verifier.check import check
from wevent.verifier.engines import make_engine
from wevent.verifier.guard import Guard
from wevent.verifier.reference import reference_check
from wevent.verifier.verdict import EvidenceFailure, Verdict, breaks, cost_text

TINY = Fraction(1, 10**30)
BIG = 2**62 - 1  # the largest slot

Checker = Callable[[Ledger, Population], bool]  # ok?


def _windows(ledger: Ledger, population: Population) -> list[tuple[Fraction, ...]]:
    """Every fixed window of every user: the amounts inside it and the bound (for the mutants)."""
    out: list[tuple[Fraction, ...]] = []
    spends: dict[str, list[tuple[int, Fraction]]] = {}
    for user, charge in ledger.expanded():
        spends.setdefault(user, []).append((charge.slot, Fraction(charge.amount)))
    for user, rows in spends.items():
        req = population.get(user)
        assert isinstance(req, Fixed)
        for _, end in rows:
            inside = [a for s, a in rows if end - req.w < s <= end]
            out.append((*inside, req.eps))
    return out


def _float_checker(ledger: Ledger, population: Population) -> bool:
    """Mutant: window sums in doubles."""
    return all(sum(float(a) for a in w[:-1]) <= float(w[-1]) for w in _windows(ledger, population))


def _strict_checker(ledger: Ledger, population: Population) -> bool:
    """Mutant: ``<`` where the bound allows ``<=``."""
    return all(sum(w[:-1], Fraction(0)) < w[-1] for w in _windows(ledger, population))


CHECKERS: dict[str, Checker] = {
    "check": lambda led, pop: check(led, pop).ok,
    "check-sparse": lambda led, pop: check(led, pop, dense_limit=0).ok,
    "reference": lambda led, pop: reference_check(led, pop).ok,
}


def _fixed_pair(amounts: list[str], bump: str) -> tuple[Population, Ledger, Ledger]:
    """A user with w = 3 at eps = sum(amounts), charged ``amounts`` at slots 1..; the second
    ledger writes the last amount as ``bump`` (a hair larger)."""
    eps = sum((Fraction(Budget(a)) for a in amounts), Fraction(0))
    population = Population({"a": Fixed(3, Budget(eps))})
    on, over = Ledger(), Ledger()
    for slot, amount in enumerate(amounts, start=1):
        on.append(slot, amount, user="a")
        over.append(slot, bump if slot == len(amounts) else amount, user="a")
    return population, on, over


PAIRS = [
    (["0.1", "0.1", "0.1"], "0.100000000000000000000000000001"),  # + 1/10**30
    (["0.1", "0.1", "0.1"], "0.100000000000000001"),  # + 1e-18, as a decimal string
    (["1/3", "1/3", "1/3"], "0.333333333333333333333333333334"),  # a third, and just above
    (["1e-300", "1e-300"], "1.000000000000000000000000000001e-300"),
]


def _agrees(checker: Checker) -> bool:
    return all(
        checker(on, pop) and not checker(over, pop)
        for pop, on, over in (_fixed_pair(a, b) for a, b in PAIRS)
    )


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_on_the_bound_is_compliant_and_one_step_over_is_not(name: str) -> None:
    assert _agrees(CHECKERS[name])


def test_the_boundary_pairs_catch_a_float_or_strict_checker() -> None:
    assert not _agrees(_float_checker)
    assert not _agrees(_strict_checker)


def _cases() -> list[tuple[str, Population, Ledger, Ledger]]:
    """Every requirement kind, group and user charges, a partial (sampled) group, slot gaps,
    slots near 2**62 and a window straddling a dynamic declaration change: (name, population,
    ledger on the bound, ledger one step over)."""
    out = []
    users = [f"u{i}" for i in range(12)]
    pop = Population({u: Fixed(4, Budget("1/7")) for u in users})
    on, over = Ledger(), Ledger()
    for led, last in ((on, Fraction(1, 28)), (over, Fraction(1, 28) + TINY)):
        led.define_group("all", users)
        led.define_group("half", users[::2])
        for slot in (1, 2, 3):
            led.append(slot, "1/28", group="all")
        led.append(4, last, group="half")  # the partial charge is the one over
    out.append(("partial-group", pop, on, over))

    pop = Population({"w": WholeStream(Budget(1)), "z": Fixed(2, Budget(0))})
    on, over = Ledger(), Ledger()
    for led, third in ((on, "1/3"), (over, "0.333333333333333333333333333334")):
        led.append(1, "0", user="z")
        for slot, amount in ((1, "1/3"), (10, "1/3"), (BIG, third)):
            led.append(slot, amount, user="w")
    out.append(("whole-stream-gaps-huge-slots", pop, on, over))

    pop = Population({"a": Fixed(2**61, Budget(1)), "c": Fixed(3, Budget(1))})
    on, over = Ledger(), Ledger()
    for led, half in ((on, Fraction(1, 2)), (over, Fraction(1, 2) + TINY)):
        led.append(1, "1/2", user="a")
        led.append(2**61, half, user="a")  # slots 1 and 2**61: one window of 2**61
        led.append(BIG - 2, "1/2", user="c")
        led.append(BIG, "1/2", user="c")
    out.append(("fixed-huge-window", pop, on, over))

    dynamic = Dynamic(
        (
            Declaration(1, 2, Budget("1/2"), 3, Budget(1)),
            Declaration(3, 3, Budget("3/5"), 2, Budget("2/5")),
        )
    )
    pop = Population({"d": dynamic})
    on, over = Ledger(), Ledger()
    for led, last in ((on, Fraction(1, 10)), (over, Fraction(1, 10) + TINY)):
        led.append(1, "1/4", user="d")
        led.append(2, "1/4", user="d")
        led.append(3, last, user="d")  # backward window of slot 3 (second declaration)
    out.append(("dynamic-straddle", pop, on, over))
    return out


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_engine_and_the_guard_agree_at_the_boundary(
    case: tuple[str, Population, Ledger, Ledger], tmp_path: Path
) -> None:
    _, pop, on, over = case
    horizon = max(c.slot for c in on) + 4
    over_verdict = check(over, pop, horizon=horizon)
    (excess,) = {v.excess for v in over_verdict.violations}
    for led, ok in ((on, True), (over, False)):
        assert check(led, pop, horizon=horizon).ok is ok
        assert (
            check(led, pop, horizon=horizon, dense_limit=0).to_json()
            == check(led, pop, horizon=horizon).to_json()
        )
        path = tmp_path / f"{ok}.parquet"
        write_ledger(led, path)
        for engine in ("numpy", "duckdb"):
            verdict, _ = make_engine(engine).audit([path], pop, horizon=horizon)
            assert verdict.to_json() == check(led, pop, horizon=horizon).to_json()
        for engine in ("auto", "accounts"):
            guard = Guard(pop, engine=engine)
            try:
                for name, members in led.groups.items():
                    guard.define_group(name, members)
                for charge in led:
                    guard.spend_charge(charge)
                accepted = True
            except BudgetExceeded as refusal:
                accepted = False
                assert refusal.excess == excess  # exactly the step over the bound
                assert f"excess {format_exact(excess)}" in str(refusal)
                assert _names_what_it_breaks(str(refusal), over_verdict, pop)
            assert accepted is ok
    for v in over_verdict.violations:  # the window, the requirement and the exact excess
        assert f"excess {format_exact(excess)}" in v.describe()
        assert v.requirement in v.describe() and f"[{v.first}, {v.last}]" in v.describe()


def _names_what_it_breaks(message: str, verdict: Verdict, pop: Population) -> bool:
    """A refusal names the requirement the batch checker says the ledger breaks: for a dynamic
    user, the declaration in force at the broken window's anchor."""
    return all(
        (f"breaks {breaks(v, pop)}" if v.kind in ("backward", "forward") else v.requirement)
        in message
        for v in verdict.violations
    )


def test_a_dynamic_refusal_names_its_declaration() -> None:
    """Found here: the guard refused with '[dynamic, 2 declaration(s) from slot 1]' only, where
    the batch checker names the declaration the window breaks."""
    _, pop, _, over = next(c for c in CASES if c[0] == "dynamic-straddle")
    verdict = check(over, pop)
    guard = Guard(pop)
    with pytest.raises(BudgetExceeded) as caught:
        for charge in over:
            guard.spend_charge(charge)
    assert "breaks declaration B:(3, 0.6) F:(2, 0.4) from slot 3" in str(caught.value)
    assert _names_what_it_breaks(str(caught.value), verdict, pop)
    # negative control: the message as it was
    old = str(caught.value).replace("; breaks declaration B:(3, 0.6) F:(2, 0.4) from slot 3", "")
    assert not _names_what_it_breaks(old, verdict, pop)


def _guard_accepts(guard: Guard, slot: int, amount: Fraction, user: str) -> bool:
    try:
        guard.spend(slot, amount, user=user)
    except BudgetExceeded:
        return False
    return True


def _float_guard_accepts(guard: Guard, slot: int, amount: Fraction, user: str) -> bool:
    """Mutant: compares the headroom with the amount in doubles."""
    return float(amount) <= float(guard.headroom(slot, user=user))


def _headroom_is_exact(
    pop: Population,
    plan: list[tuple[int, str]],
    accepts: Callable[[Guard, int, Fraction, str], bool],
    engine: str,
) -> bool:
    """At each step the guard takes exactly its headroom and refuses 1/10**30 more."""
    guard = Guard(pop, engine=engine)
    for slot, user in plan:
        room = guard.headroom(slot, user=user)
        if accepts(guard, slot, room + TINY, user):
            return False
        if not accepts(guard, slot, room, user):
            return False
    return check(guard.ledger, pop).ok


plans = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(["u0", "u1", "u2"])), min_size=1, max_size=8
)


@pytest.mark.parametrize("engine", ["auto", "accounts"])
@settings(max_examples=60, deadline=None)
@given(pop=populations(min_users=3, max_users=3), steps=plans)
def test_the_guard_takes_exactly_its_headroom(
    engine: str, pop: Population, steps: list[tuple[int, str]]
) -> None:
    slot, plan = 1, []
    for gap, user in steps:
        slot += gap
        plan.append((slot, user))
    if engine == "auto" or all(not isinstance(pop.get(u), Dynamic) for u in pop):
        assert _headroom_is_exact(pop, plan, _guard_accepts, engine)


def test_the_headroom_property_catches_a_float_guard() -> None:
    pop = Population({"u0": Fixed(3, Budget("0.3"))})
    plan = [(1, "u0"), (1, "u0")]
    assert _headroom_is_exact(pop, plan, _guard_accepts, "auto")
    assert not _headroom_is_exact(pop, plan, _float_guard_accepts, "auto")


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_scaled_onto_the_bound_every_checker_agrees(data: st.DataObject) -> None:
    """A random ledger scaled so that its tightest window sits exactly on its bound is
    compliant for every checker; one more 1/10**30 in that window is not."""
    pop = data.draw(populations())
    led = data.draw(ledgers(pop))
    ref = reference_check(led, pop)
    shares = list(ref.user_utilization.values())
    if None in shares:  # a positive spend where the bound is 0: no scaling puts it on a bound
        return
    top = max((u for u in shares if u is not None), default=Fraction(0))
    if top == 0:
        return
    scaled = Ledger()
    for name, members in led.groups.items():
        scaled.define_group(name, members)
    for c in led:
        scaled.append(c.slot, Fraction(c.amount) / top, user=c.user, group=c.group, part=c.part)
    on = reference_check(scaled, pop)
    assert on.ok and max(u for u in on.user_utilization.values() if u is not None) == 1
    assert check(scaled, pop).to_json() == check(scaled, pop, dense_limit=0).to_json()
    assert check(scaled, pop).ok
    tight = next(u for u, x in on.user_utilization.items() if x == 1)
    slots = sorted({c.slot for u, c in scaled.expanded() if u == tight and c.amount > 0})
    for slot in slots:
        bumped = Ledger()
        for name, members in scaled.groups.items():
            bumped.define_group(name, members)
        for c in scaled:
            bumped.append(c.slot, c.amount, user=c.user, group=c.group, part=c.part)
        bumped.append(slot, TINY, user=tight, part="bump")
        over = reference_check(bumped, pop)
        fast = check(bumped, pop)
        assert fast.ok == over.ok
        assert {(v.kind, v.first, v.last, v.total, v.bound) for v in fast.violations} == {
            (v.kind, v.first, v.last, v.total, v.bound) for v in over.violations
        }
        if not over.ok:
            assert any(v.excess == TINY for v in fast.violations)
            return
    raise AssertionError("no slot of the tightest user's spends breaks its bound by 1/10**30")


# ---------------------------------------------------------------------------- wording

_NUMBER = re.compile(r"(~?)(-?\d+(?:\.\d+)?(?:E[+-]?\d+)?(?:/\d+)?)")


def _claims_hold(failure: EvidenceFailure, described: str | None = None) -> bool:
    """The text of an evidence failure claims only what holds: an exact cost is the cost, a
    lower bound shown is at most the certified lower bound and above the amount, an interval
    shown contains the certified one, and every rounded number is marked ``~``."""
    text = (described or failure.describe()).split(" whose cost ", 1)[1]
    lower, upper, amount = failure.cost_lower, failure.cost_upper, failure.amount
    numbers = [(m.group(1) == "~", Fraction(m.group(2))) for m in _NUMBER.finditer(text)]
    (marked, shown), *rest = numbers
    if text.startswith("is more than the amount by at least "):  # the excess, rounded down
        return marked and 0 < shown <= lower - amount
    if not marked and shown != lower:  # an unmarked number must be exact
        return False
    if text.startswith("is at least "):
        return amount < shown <= lower
    if text.startswith("is "):
        return lower == upper == shown
    (marked_hi, hi) = rest[0]
    return shown <= lower and hi >= upper and (marked_hi or hi == upper)


def _failure(evidence: Laplace | GRR, amount: Fraction) -> EvidenceFailure | None:
    result = certify_cost(evidence, amount)
    if result.ok:
        return None
    return EvidenceFailure(evidence, amount, result.lower, result.upper, 1, 0, 1)


def _old_describe(self: EvidenceFailure) -> str:
    """The text before the fix (negative control): round-to-nearest to 6 digits, unmarked."""
    from wevent.accounting.budget import approx

    return (
        f"... whose cost is in [{approx(self.cost_lower)}, {approx(self.cost_upper)}], "
        "not <= the amount"
    )


def test_evidence_text_on_the_boundary() -> None:
    """Found here: the text printed 'charge(s) of 0.3333333 ... whose cost is in [0.333333,
    0.333333], not <= the amount' for a cost of exactly 1/3 (the rounded cost read as below
    the amount, unmarked)."""
    failure = _failure(Laplace(Fraction(1), Fraction(3)), Fraction("0.3333333"))
    assert failure is not None
    assert "whose cost is 1/3, more than the amount" in failure.describe()
    assert _claims_hold(failure)
    grr = GRR(2, Fraction("0.525"), Fraction("0.475"))  # ln(21/19) = 0.10008345...
    failure = _failure(grr, Fraction("0.1000834"))
    assert failure is not None and _claims_hold(failure)
    assert "at least ~0.1000834" in failure.describe()  # enough digits to read as above


def test_the_wording_check_catches_the_old_text(monkeypatch: pytest.MonkeyPatch) -> None:
    failure = _failure(Laplace(Fraction(1), Fraction(3)), Fraction("0.3333333"))
    assert failure is not None
    monkeypatch.setattr(EvidenceFailure, "describe", _old_describe)
    assert not _claims_hold(failure)


@settings(max_examples=80, deadline=None)
@given(
    scale=st.integers(1, 10**6),
    p=st.fractions(Fraction(51, 100), Fraction(99, 100)),
    shave=st.integers(0, 40),
)
def test_evidence_text_claims_only_what_holds(scale: int, p: Fraction, shave: int) -> None:
    """Amounts a hair under the certified cost (down to 1/10**40 under): the text of each
    failure holds, for an exact cost (Laplace) and a certified interval (GRR)."""
    for evidence in (Laplace(Fraction(1), Fraction(scale, 7)), GRR(2, p, 1 - p)):
        lower = certify_cost(evidence, Fraction(0)).lower
        amount = max(Fraction(0), lower - Fraction(1, 10**shave))
        failure = _failure(evidence, amount)
        if failure is not None:
            assert _claims_hold(failure), failure.describe()


def test_cost_text_undecided_interval_is_outward() -> None:
    third = Fraction(1, 3)
    text = cost_text(third - TINY, third + TINY, third)
    assert text.startswith("could not be certified at most the amount")
    assert "[~0.333333, ~0.333334]" in text


def test_a_forward_refusal_names_the_declaration_at_its_anchor() -> None:
    """A forward window is anchored at its first slot: the spend at slot 3 breaks slot 1's
    forward window [1, 4] (1/4 + 1/2 > 1/2), so slot 1's declaration is named, not slot 3's
    (which is in force at the window's last slot)."""
    pop = Population(
        {
            "u": Dynamic(
                (
                    Declaration(1, 1, Budget(5), 4, Budget("1/2")),
                    Declaration(3, 1, Budget(5), 5, Budget(5)),
                )
            )
        }
    )
    guard = Guard(pop)
    guard.spend(1, Budget("1/4"), user="u")
    with pytest.raises(BudgetExceeded) as caught:
        guard.spend(3, Budget("1/2"), user="u")
    message = str(caught.value)
    assert "forward window [1, 4]" in message, message
    assert "breaks declaration B:(1, 5) F:(4, 0.5) from slot 1" in message, message
    assert "from slot 3]" not in message
    # ... and as a field of its own (the requirement field holds the requirement only), which
    # survives a pickle (refusals cross processes) and reaches the trace's JSON
    import pickle

    from wevent.verifier.tracing import refusal_json

    refused = caught.value
    assert refused.declaration == "B:(1, 5) F:(4, 0.5) from slot 1"
    assert "breaks" not in refused.requirement
    assert pickle.loads(pickle.dumps(refused)).declaration == refused.declaration
    assert refusal_json(refused)["declaration"] == refused.declaration


def test_a_group_refusal_names_the_members_declaration() -> None:
    """The same straddling ledger as `dynamic-straddle`, charged to a group of the user: the
    refusal names the member and the declaration (the path population allocators take)."""
    _, pop, _, over = next(c for c in CASES if c[0] == "dynamic-straddle")
    (user,) = {c.user for c in over}
    assert user is not None
    guard = Guard(pop)
    guard.define_group("g", [user])
    with pytest.raises(BudgetExceeded) as caught:
        for c in over:
            guard.spend(c.slot, c.amount, group="g")
    message = str(caught.value)
    assert f"member {user!r}" in message
    assert "breaks declaration B:(3, 0.6) F:(2, 0.4) from slot 3" in message, message


def test_a_cost_above_the_amount_by_less_than_60_digits_shows_the_excess() -> None:
    """An amount within 10**-70 under the cost: no rounding to 60 digits reads as above it, so
    the text gives the excess, rounded down (it printed the exact ratio of the certified lower
    bound, hundreds of digits long)."""
    import decimal

    grr = GRR(2, Fraction(21, 40), Fraction(19, 40))  # cost ln(21/19)
    with decimal.localcontext() as ctx:
        ctx.prec = 100
        truncated = int((decimal.Decimal(21) / 19).ln().scaleb(70))  # 70 decimals, down
    amount = Fraction(truncated, 10**70)
    failure = _failure(grr, amount)
    assert failure is not None
    text = failure.describe()
    cost = text.split(" whose cost ", 1)[1]
    assert cost.startswith("is more than the amount by at least ~") and len(cost) < 80, text
    assert _claims_hold(failure), text
    # the check of that claim can fail: the same text for a cost nearer the amount than shown
    shown = Fraction(text.split("by at least ~", 1)[1].split(" ", 1)[0])
    nearer = dataclasses.replace(failure, cost_lower=amount + shown / 2)
    assert not _claims_hold(nearer, text)


def test_an_undecided_evidence_refusal_does_not_say_more_than() -> None:
    """A cost the finest precision could not separate from the amount is refused (fail closed),
    and the refusal says so; 'at least X, more than the amount' only when X is more."""
    from wevent.accounting.spending import EvidenceRejected

    third = Fraction(1, 3)
    undecided = EvidenceRejected(
        subject="user 'u'", slot=1, amount=third, lower=third - TINY, upper=third + TINY
    )
    assert "cost could not be certified at most the 1/3 charged" in str(undecided)
    assert "[~0.333333, ~0.333334] (rounded outward" in str(undecided)
    assert "more than" not in str(undecided)
    above = EvidenceRejected(subject="user 'u'", slot=1, amount=third, lower=Fraction(1, 2))
    assert "the evidence's cost is at least 0.5, more than the 1/3 charged" in str(above)
    # a long certified bound is rounded (down, marked, to as many digits as it takes to read as
    # above the amount), as in the checker's verdict
    long = EvidenceRejected(
        subject="user 'u'", slot=1, amount=third, lower=third + Fraction(1, 3**40)
    )
    assert "is at least ~0.3333333333333333334 (rounded down), more than the 1/3 charged" in str(
        long
    )
