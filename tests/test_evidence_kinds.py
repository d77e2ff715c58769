"""Evidence kinds through one registry (`wevent.accounting.evidence`): `supports`, the refusal of
an unknown kind, and a third-party kind registered with `register_evidence_kind` (whose cost the
guard and every checker then use: the negative control is that the same ledger is refused before
the kind is registered)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wevent
from wevent.accounting import evidence as ev
from wevent.accounting.budget import BudgetError, format_exact
from wevent.accounting.evidence import (
    GRR,
    OUE,
    DiscreteLaplace,
    EvidenceKind,
    ExSub,
    ExtraEvidence,
    Laplace,
    PostProcessing,
    Sampled,
    cost_bounds,
    evidence_from_json,
    evidence_kind,
    evidence_kinds,
    evidence_to_json,
    kind_of,
    register_evidence_kind,
    supports,
)
from wevent.accounting.formats import FormatError, read_ledger, write_ledger
from wevent.errors import InputError

BUILT_IN = ("laplace", "discrete_laplace", "grr", "oue", "sampled", "exsub", "postprocessing")


@dataclass(frozen=True, slots=True)
class Flat(ExtraEvidence):
    """A made-up primitive whose cost is the number it carries."""

    cost: Fraction


def _flat_kind(cost: Any = None) -> EvidenceKind:
    def flat_cost(e: Flat, _digits: int) -> tuple[Fraction, Fraction]:
        return (e.cost, e.cost)

    def from_json(obj: Mapping[str, Any]) -> Flat:
        return Flat(Fraction(obj["cost"]))

    return EvidenceKind(
        "flat",
        Flat,
        ("cost",),
        cost or flat_cost,
        from_json,
        lambda e: {"cost": format_exact(e.cost)},
        "a test kind: its cost is its field",
    )


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The built-in kinds only, restored afterwards (registration is process-wide)."""
    monkeypatch.setattr(ev, "_KINDS", dict(ev._KINDS))
    monkeypatch.setattr(ev, "_BY_TYPE", dict(ev._BY_TYPE))
    yield


def _ledger(tmp_path: Path, epsilon: str, evidence: str) -> Path:
    path = tmp_path / "ledger.jsonl"
    path.write_text(
        f'{{"slot": 1, "user": "a", "epsilon": "{epsilon}", "evidence": {evidence}}}\n',
        encoding="utf-8",
    )
    return path


POPULATION = wevent.Population({"a": wevent.Fixed(2, wevent.Budget(1))})


# ---------------------------------------------------------------------------- supports


def test_supports_says_which_kinds_are_known() -> None:
    assert evidence_kinds()[: len(BUILT_IN)] == BUILT_IN
    for name in BUILT_IN:
        assert supports(name) and evidence_kind(name).name == name
    for name in ("gauss", "Laplace", "", "flat"):
        assert not supports(name)


@given(
    st.one_of(
        st.builds(
            Laplace,
            st.fractions(0, 5, max_denominator=20),
            st.fractions(Fraction(1, 20), 5, max_denominator=20),
        ),
        st.builds(
            DiscreteLaplace,
            st.integers(0, 5).map(Fraction),
            st.fractions(Fraction(1, 20), 5, max_denominator=20),
        ),
        st.integers(2, 9).map(lambda d: GRR(d, Fraction(2, d + 1), Fraction(1, d + 1))),
        st.just(OUE(Fraction(1, 2), Fraction(1, 5))),
        st.just(ExSub(5, 2, 3, Fraction(1, 3))),
        st.text(max_size=5).map(PostProcessing),
    ),
    st.fractions(0, 1, max_denominator=10),
)
def test_every_built_in_record_has_its_kind_and_round_trips(
    inner: Any, probability: Fraction
) -> None:
    for record in (inner, Sampled(inner, probability)):
        kind = kind_of(record)
        assert kind is evidence_kind(evidence_to_json(record)["kind"]) and supports(kind.name)
        assert isinstance(record, kind.type)
        assert evidence_from_json(evidence_to_json(record)) == record
        lo, hi = cost_bounds(record, 30)
        assert 0 <= lo <= hi


# ---------------------------------------------------------------------------- unknown kinds


def test_an_unknown_kind_is_refused_listing_the_supported_ones() -> None:
    with pytest.raises(BudgetError, match="unknown kind 'lapalce'") as got:
        evidence_from_json({"kind": "lapalce", "sensitivity": "1", "scale": "1"})
    message = str(got.value)
    assert all(name in message for name in BUILT_IN)
    assert message.endswith("did you mean laplace?") or "did you mean laplace" in message
    with pytest.raises(BudgetError, match="unknown kind") as got:
        evidence_from_json({"kind": "zzzzzz"})
    assert "did you mean" not in str(got.value)


def test_a_ledger_with_an_unknown_kind_is_refused_never_counted(tmp_path: Path) -> None:
    path = _ledger(tmp_path, "1", '{"kind": "flat", "cost": "1/2"}')
    with pytest.raises(
        FormatError, match=r"jsonl:1: evidence: unknown kind 'flat' \(supported: laplace"
    ):
        read_ledger(path)
    with pytest.raises(InputError, match="unknown kind 'flat'"):
        wevent.audit([path], POPULATION)


def test_an_object_of_no_registered_kind_is_refused_by_the_guard() -> None:
    guard = wevent.Guard(POPULATION)
    with pytest.raises(TypeError, match="not evidence of a registered kind"):
        guard.spend(1, wevent.Budget(1), user="a", evidence=Flat(Fraction(0)))
    assert len(guard.ledger) == 0  # nothing recorded


# ---------------------------------------------------------------------------- a third-party kind


def test_a_registered_kind_is_read_and_its_cost_used(tmp_path: Path, fresh_registry: None) -> None:
    cheap = _ledger(tmp_path, "1/4", '{"kind": "flat", "cost": "1/2"}')
    with pytest.raises(
        FormatError, match="unknown kind 'flat'"
    ):  # control: before it is registered
        read_ledger(cheap)
    wevent.register_evidence_kind(_flat_kind())  # the facade's name for it
    assert supports("flat") and "flat" in evidence_kinds()
    ledger = read_ledger(cheap)
    (charge,) = list(ledger)
    assert charge.evidence == Flat(Fraction(1, 2))
    # the ledger charges 1/4 for a cost of 1/2: the check uses the registered cost
    verdict = wevent.check(ledger, POPULATION)
    assert not verdict.ok and len(verdict.evidence_failures) == 1
    assert verdict.evidence_failures[0].cost_lower == Fraction(1, 2)
    assert not wevent.audit([cheap], POPULATION).ok
    enough = _ledger(tmp_path, "1/2", '{"kind": "flat", "cost": "1/2"}')
    assert wevent.check(read_ledger(enough), POPULATION).ok
    # written back in its own JSON form
    out = tmp_path / "out.jsonl"
    write_ledger(read_ledger(enough), out)
    assert '"kind":"flat"' in out.read_text().replace(" ", "")
    assert next(iter(read_ledger(out))).evidence == Flat(Fraction(1, 2))


def test_the_guard_checks_a_registered_kind(fresh_registry: None) -> None:
    register_evidence_kind(_flat_kind())
    guard = wevent.Guard(POPULATION)
    with pytest.raises(wevent.EvidenceRejected):
        guard.spend(1, wevent.Budget("1/4"), user="a", evidence=Flat(Fraction(1, 2)))
    assert len(guard.ledger) == 0
    guard.spend(1, wevent.Budget("1/2"), user="a", evidence=Flat(Fraction(1, 2)))
    assert len(guard.ledger) == 1
    # a registered kind nests inside the built-in ones
    sampled = Sampled(Flat(Fraction(1, 2)), Fraction(1))
    assert cost_bounds(sampled) == (Fraction(1, 2), Fraction(1, 2))
    assert evidence_from_json(evidence_to_json(sampled)) == sampled


def test_a_cost_that_is_no_certified_interval_fails_closed(fresh_registry: None) -> None:
    register_evidence_kind(_flat_kind(cost=lambda e, d: (Fraction(1), Fraction(0))))
    guard = wevent.Guard(POPULATION)
    with pytest.raises(TypeError, match="0 <= lo <= hi"):
        guard.spend(1, wevent.Budget(1), user="a", evidence=Flat(Fraction(0)))
    assert len(guard.ledger) == 0


def test_a_kind_cannot_replace_one_already_registered(fresh_registry: None) -> None:
    register_evidence_kind(_flat_kind())
    with pytest.raises(InputError, match="'flat' is already registered"):
        register_evidence_kind(_flat_kind())
    laplace = evidence_kind("laplace")
    free = EvidenceKind("laplace", Flat, (), laplace.cost, laplace.from_json, laplace.to_json)
    with pytest.raises(InputError, match="'laplace' is already registered"):
        register_evidence_kind(free)
    other = EvidenceKind("laplace2", Laplace, (), laplace.cost, laplace.from_json, laplace.to_json)
    with pytest.raises(InputError, match="already the record class of kind 'laplace'"):
        register_evidence_kind(other)
