"""Theorem D for every horizon (`wevent.proofs.dynamic`): the induction proves the sound dynamic kernels,
refutes the published ones, and can fail (mutated kernels); its two premises hold on the code:
obligations past T* repeat T*'s, and classes do not interfere."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
import z3

from wevent.errors import AllocatorError
from wevent.mechanisms.allocators import dynamic as dynamic_module
from wevent.mechanisms.allocators.dynamic import DynamicKernel, DynamicState
from wevent.mechanisms.allocators.kernel import DynamicClass, Plan, Prefix
from wevent.proofs import dynamic as dynamic_proofs
from wevent.proofs.algebra import strict_truth
from wevent.proofs.central import Scope, prove_allocator
from wevent.proofs.counterexamples import ProverError
from wevent.proofs.dynamic import (
    Obligation,
    Shape,
    all_shapes,
    budget_cases,
    noninterference,
    prove_shape,
    prove_shapes,
    sample_pairs,
    stationary_slot,
    step_obligation,
)
from wevent.proofs.symbolic import Z3ScopeAlgebra, real


# The default suite proves windows <= 3 (81 shapes); windows <= 4 (256 shapes; dpba about 12 s on
# one core on 2026-11-26, 34-80 s on 2026-11-27's slower machine, measured with `wevent prove
# dpba --w-max 4 --classes 2 --unbounded --jobs 1`) and windows <= 6 with two declarations
# (1,296 shapes, dpba about 45 s on two processes) are `make slow` and the certificates, so that
# `make test` stays near 10 minutes on 2 cores.
@pytest.mark.heavy
@pytest.mark.parametrize("w_max", [3, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
def test_sound_dynamic_kernels_proved_for_every_horizon(mechanism: str, w_max: int) -> None:
    proof = prove_allocator(mechanism, scope=Scope(classes=2, w_max=w_max), unbounded=True)
    assert proof.status == "proved", proof.reason
    assert proof.method == "induction" and proof.scope["horizon"] == "unbounded"
    assert f"{w_max**4} one-class shapes" in proof.notes[0]
    assert "non-interference" in proof.notes[1]
    # every shape, each with T* = 2 + 2 max w obligations per budget case (dpba: 3)
    per_case = sum(stationary_slot(s, (1, 2)) for s in all_shapes(w_max, 2))
    assert proof.cases == per_case * len(budget_cases(mechanism, 2))


@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
def test_published_dynamic_kernels_refuted_and_replayed(mechanism: str) -> None:
    proof = prove_allocator(
        mechanism, variant="published", scope=Scope(classes=1, w_max=2), unbounded=True
    )
    assert proof.status == "counterexample"
    assert proof.method.startswith("induction (refuted")
    assert proof.counterexample is not None and proof.counterexample.replays()


def test_shapes_cover_every_window_pair_once() -> None:
    shapes = all_shapes(3, 2)
    assert len(shapes) == len(set(shapes)) == 9**2
    assert shapes[0] == ((1, 1), (1, 1)) and shapes[-1] == ((3, 3), (3, 3))


def _rename(term: Any, shift: int, slots: range) -> Any:
    pairs = [
        (z3.Real(f"{tag}_{s}"), z3.Real(f"{tag}_{s + shift}"))
        for tag in ("dis", "pub")
        for s in slots
    ]
    return z3.substitute(term, *pairs)


def _is_shift(a: Obligation, b: Obligation, shift: int, slots: range) -> bool:
    """``b`` is ``a`` with every slot moved by ``shift``: the same hypotheses and failure
    conditions (as simplified Z3 terms), and budgets equal as functions of the history (a Z3
    validity check on values, so two different unsat obligations are not confused)."""

    def shapes(terms: list[Any], move: bool) -> list[str]:
        out = (_rename(x, shift, slots) if move else x for x in terms)
        return sorted(z3.simplify(x).sexpr() for x in out)

    if shapes(a.hypotheses, True) != shapes(b.hypotheses, False):
        return False
    if shapes(a.failures, True) != shapes(b.failures, False):
        return False
    s = z3.Solver()
    s.add(*b.hypotheses)
    s.add(
        z3.Or(
            _rename(a.dissimilarity, shift, slots) != b.dissimilarity,
            _rename(a.publication, shift, slots) != b.publication,
        )
    )
    return bool(s.check() == z3.unsat)


@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
@pytest.mark.parametrize("shape", [((1, 3), (2, 1)), ((3, 2), (1, 3)), ((2, 2), (3, 3))])
def test_obligations_past_the_stationary_slot_repeat_it(
    mechanism: str, shape: tuple[tuple[int, int], ...]
) -> None:
    """The premise that makes finitely many steps a proof for every horizon: the obligation at
    T* + 1 (and + 2) is the one at T* with every slot shifted."""
    fwd = budget_cases(mechanism, 2)[-1]
    base = stationary_slot(shape, (1, 2))
    a = step_obligation(mechanism, "sound", shape, (1, 2), base, fwd)
    for shift in (1, 2):
        b = step_obligation(mechanism, "sound", shape, (1, 2), base + shift, fwd)
        assert _is_shift(a, b, shift, range(1, base))


@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
def test_obligations_before_the_stationary_slot_are_not_shifts(mechanism: str) -> None:
    """The check above can fail: while declarations still change, a slot's obligation is not
    the previous one shifted (here slot 2 against 3, with the second declaration at 2)."""
    fwd = budget_cases(mechanism, 2)[-1]
    shape = ((1, 3), (2, 1))
    a = step_obligation(mechanism, "sound", shape, (1, 2), 2, fwd)
    b = step_obligation(mechanism, "sound", shape, (1, 2), 3, fwd)
    assert not _is_shift(a, b, 1, range(1, 2))


def _forgetful_room(
    alg: Any,
    s: Any,
    dis_h: Prefix[Any],
    pub_h: Prefix[Any],
    t: int,
    idx: int,
    cover: list[tuple[int, int, int]],
) -> Any:
    """The sound room without the later declarations' backward windows (a mutant)."""
    d = s.decls[idx]
    spent = alg.add(dis_h.total(t - d.w_back + 1, t - 1), pub_h.total(t - d.w_back + 1, t - 1))
    rooms = [alg.sub(d.eps_back, spent)]
    for j, first, _ in cover:
        used = alg.add(dis_h.total(first, t - 1), pub_h.total(first, t - 1))
        rooms.append(alg.sub(s.decls[j].eps_fwd, used))
    out = rooms[0]
    for r in rooms[1:]:
        out = alg.select(alg.le(out, r), out, r)
    return alg.select(alg.le(out, alg.const(0)), alg.const(0), out)


def test_a_room_that_forgets_later_declarations_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutant: the sound cap ignores declarations ahead of t, whose backward windows reach back
    over t. The induction is no longer inductive, and the run it leads to breaks a window."""
    monkeypatch.setattr(dynamic_module, "_room", _forgetful_room)
    assert prove_shape("dpbd", "sound", ((1, 1), (3, 1)), (1, 2)).status == "not inductive"
    proof = prove_allocator("dpbd", scope=Scope(classes=1, w_max=3), unbounded=True)
    assert proof.status == "counterexample", proof.reason
    assert proof.counterexample is not None and proof.counterexample.replays()


def test_interfering_classes_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutant: class 1's dissimilarity budget copies class 0's. The non-interference premise
    fails and the proof for two classes says so instead of claiming it."""
    original = DynamicKernel.plan

    def coupled(self: DynamicKernel[Any, Any], state: DynamicState[Any], t: int) -> Plan[Any, Any]:
        plan = original(self, state, t)
        if len(plan.dissimilarity) < 2:
            return plan
        dis = (plan.dissimilarity[0], plan.dissimilarity[0], *plan.dissimilarity[2:])
        return Plan(plan.nullified, plan.forced, dis, plan.publication)

    monkeypatch.setattr(DynamicKernel, "plan", coupled)
    shapes = all_shapes(2, 2)
    assert noninterference("dpbd", "sound", sample_pairs(shapes, 3), (1, 2)) is not None
    proof = prove_allocator("dpbd", scope=Scope(classes=2, w_max=2), unbounded=True)
    assert proof.status == "unknown" and "interfere" in proof.reason


def test_unbounded_dynamic_needs_exact_arithmetic() -> None:
    from wevent.accounting.budget import BudgetError

    with pytest.raises(BudgetError, match="exact"):
        prove_allocator("dpbd", arithmetic="float", unbounded=True)


@pytest.mark.heavy
@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
def test_one_declaration_schedules_proved_to_windows_six(mechanism: str) -> None:
    """The w <= 6 scope in the test suite, for schedules of one declaration (every
    w_B, w_F <= 6, 2 classes, every horizon); two declarations at w <= 6 are in the
    certificates (`python -m wevent.proofs.certify --only dpbd,dpba`), at w <= 4 in the test above."""
    scope = Scope(classes=2, w_max=6, decl_slots=(1,))
    proof = prove_allocator(mechanism, scope=scope, unbounded=True)
    assert proof.status == "proved", proof.reason
    assert "36 one-class shapes" in proof.notes[0]
    assert proof.cases == sum(stationary_slot(s, (1,)) for s in all_shapes(6, 1))


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["dpbd", "dpba"])
def test_two_declaration_schedules_proved_to_windows_six(mechanism: str) -> None:
    """The full w <= 6 scope with declarations at slots 1 and 2 (1,296 shapes; dpba about 45 s
    on two processes), as recorded in the certificates."""
    scope = Scope(classes=2, w_max=6)
    proof = prove_allocator(mechanism, scope=scope, unbounded=True, workers=2)
    assert proof.status == "proved", proof.reason
    assert "1296 one-class shapes" in proof.notes[0]


def _placed_differs(shape: Shape, t: int, value: Fraction, fwd: tuple[Fraction, ...]) -> bool:
    """Whether dpba's obligation at t built with a placeholder second E_F, instantiated at
    ``value``, differs anywhere from the one built from the numbers ``fwd``: in a budget term or
    in a hypothesis or failure condition (Z3, over every history and E_B; comparing the closed
    claims would not do: two unsat claims are both simply false)."""
    c, holes = dynamic_proofs._forward_placeholders(shape, (1, 2))
    alg = Z3ScopeAlgebra(c.free, [x > 0 for x in c.free], fold=False)
    kernel = DynamicKernel("dpba", alg, [DynamicClass(c.decls)], "sound")
    placed = dynamic_proofs._obligation(alg, kernel, c, max(max(p) for p in shape), t)
    built = step_obligation("dpba", "sound", shape, (1, 2), t, fwd)

    def terms(ob: Obligation) -> list[Any]:
        return [ob.dissimilarity, ob.publication, *ob.hypotheses, *ob.failures]

    ours = [z3.substitute(x, (holes[0], real(value))) for x in terms(placed)]
    theirs = terms(built)
    assert len(ours) == len(theirs)
    s = z3.Solver()
    s.add(z3.Or(*(a != b for a, b in zip(ours, theirs, strict=True))))
    return bool(s.check() == z3.sat)


@pytest.mark.parametrize("shape", [((2, 3), (1, 2)), ((3, 1), (2, 3))])
def test_one_construction_gives_every_forward_budget_case(shape: Shape) -> None:
    """dpba's obligations are built once with a placeholder second E_F and instantiated per
    case; each instance is the obligation built from the case's numbers, term for term, at
    every slot up to T*."""
    for t in range(1, stationary_slot(shape, (1, 2)) + 1):
        for fwd in budget_cases("dpba", 2):
            assert fwd is not None
            assert not _placed_differs(shape, t, fwd[1], fwd), (t, fwd)


def test_a_changed_forward_budget_changes_the_instance() -> None:
    """Negative control for the check above: an instance for another E_F differs."""
    fwd = (Fraction(1), Fraction(2))
    assert _placed_differs(((2, 3), (1, 2)), 3, Fraction(1), fwd)


def test_the_claim_cache_keeps_only_proved_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim Z3 refuted is never remembered, so a later identical claim is solved again; a
    proved one is answered from the cache without Z3."""
    monkeypatch.setattr(dynamic_proofs, "_UNSAT", {})
    x = z3.Real("cache_probe")
    assert dynamic_proofs._discharge(z3.simplify(x > 1), 0)[::2] == (z3.sat, True)
    assert dynamic_proofs._discharge(z3.simplify(x > 1), 0)[::2] == (z3.sat, True)
    bad = z3.simplify(z3.And(x > 1, x < 0))
    assert dynamic_proofs._discharge(bad, 0)[::2] == (z3.unsat, True)
    assert dynamic_proofs._discharge(z3.simplify(z3.And(x > 1, x < 0)), 0)[::2] == (
        z3.unsat,
        False,
    )


def test_a_mutant_after_the_sound_kernel_is_still_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is per process and shared by every kernel: proving the sound kernel first must
    not let a broken kernel's (different) claims pass."""
    shape = ((1, 1), (3, 1))
    assert prove_shape("dpbd", "sound", shape, (1, 2)).status == "proved"
    monkeypatch.setattr(dynamic_module, "_room", _forgetful_room)
    assert prove_shape("dpbd", "sound", shape, (1, 2)).status == "not inductive"


def test_parallel_shapes_agree_with_one_process() -> None:
    """Two worker processes (each owning the shapes of some last forward windows) give the
    same results in the same order as one process, and stop at the same first failure."""
    shapes = all_shapes(2, 2)
    one = [
        (r.shape, r.status, r.obligations) for r in prove_shapes("dpbd", "sound", shapes, (1, 2))
    ]
    two = [
        (r.shape, r.status, r.obligations)
        for r in prove_shapes("dpbd", "sound", shapes, (1, 2), workers=2)
    ]
    assert one == two and len(one) == len(shapes)
    bad_one = [(r.shape, r.status) for r in prove_shapes("dpbd", "published", shapes, (1, 2))]
    bad_two = [
        (r.shape, r.status) for r in prove_shapes("dpbd", "published", shapes, (1, 2), workers=2)
    ]
    assert bad_one == bad_two and bad_one[-1][1] == "not inductive"
    assert all(status == "proved" for _, status in bad_one[:-1])


def test_a_worker_error_reaches_the_caller() -> None:
    with pytest.raises(AllocatorError, match="unknown dynamic allocator"):
        list(prove_shapes("nope", "sound", all_shapes(2, 1), (1,), workers=2))


def test_partition_keeps_last_forward_windows_together() -> None:
    shapes = all_shapes(4, 2)
    parts = dynamic_proofs._partition(shapes, 3)
    assert sorted(i for p in parts for i in p) == list(range(len(shapes)))
    owner = {shapes[i][-1][1]: k for k, p in enumerate(parts) for i in p}
    assert all(owner[shapes[i][-1][1]] == k for k, p in enumerate(parts) for i in p)
    assert len(dynamic_proofs._partition(all_shapes(1, 2), 4)) == 1


def _branches_on_forward_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutant: the kernel branches in Python on a later E_F being 2 (``==`` on a Z3 term,
    which Z3 answers by structural identity) and overspends there, for forward windows >= 3."""
    original = dynamic_module._class_plan

    def branching(
        alg: Any, name: str, variant: str, s: Any, dis_h: Any, pub_h: Any, t: int
    ) -> tuple[Any, Any, list[Any]]:
        dis, pub, null = original(alg, name, variant, s, dis_h, pub_h, t)
        later = s.decls[1] if len(s.decls) > 1 else None
        if later is not None and later.w_fwd >= 3 and later.eps_fwd == alg.const(2):
            dis = alg.add(dis, alg.const(1))
        return dis, pub, null

    monkeypatch.setattr(dynamic_module, "_class_plan", branching)


def test_a_python_branch_on_a_budget_is_never_proved(monkeypatch: pytest.MonkeyPatch) -> None:
    """Z3's structural ``bool(a == b)`` would let the placeholder E_F take the "not 2" branch
    and the shape be proved; under `strict_truth` the branch raises, and for a built-in the
    proof is a verifier error, never "proved"."""
    _branches_on_forward_budget(monkeypatch)
    with pytest.raises(z3.Z3Exception, match="branched in Python"):
        prove_shape("dpba", "sound", ((1, 1), (1, 3)), (1, 2))
    with pytest.raises(ProverError, match="branched in Python") as raised:
        prove_allocator("dpba", scope=Scope(classes=1, w_max=3), unbounded=True)
    assert "test_dynamic_proofs.py:" in str(raised.value)  # the mutant's line
    # outside a proof, Z3's own behaviour is back
    x = z3.Real("outside")
    assert bool(x == x) and not bool(x == real(2))


def test_strict_truth_is_reentrant_and_restores_z3() -> None:
    x = z3.Real("nested")
    with strict_truth():
        with strict_truth(), pytest.raises(z3.Z3Exception):
            bool(x == x)
        with pytest.raises(z3.Z3Exception):
            bool(x < 1)
        assert bool(z3.BoolVal(True)) and not bool(z3.BoolVal(False))
    assert bool(x == x)


def test_a_nonlinear_claim_falls_back_to_the_general_solver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The linear solver gives up on a division by a variable; the claim then goes to Z3's
    general solver instead of being reported unknown."""
    monkeypatch.setattr(dynamic_proofs, "_UNSAT", {})
    x, y = z3.Reals("nl_x nl_y")
    claim = z3.simplify(z3.And(y > 0, x > 0, x / y < 0))
    assert dynamic_proofs._discharge(claim, 10_000)[0] == z3.unsat
    sat = z3.simplify(z3.And(y > 0, x > 0, x / y > 3))
    assert dynamic_proofs._discharge(sat, 10_000)[0] == z3.sat
