"""Theorem D for every horizon: induction on the dynamic kernels (dpbd, dpba; 001 Algorithms 6-7).

Theorem D (stated in `wevent.proofs.central`): for every declaration schedule of the scope, every
positive budget and every publish/skip decision sequence, no budget is negative and every
backward window ``[t - w_B + 1, t]`` sums to at most ``E_B`` and every forward window
``[t, t + w_F - 1]`` to at most ``E_F`` (001 Definition 10). The bounded proofs of
`wevent.proofs.central` unroll a whole horizon: their cost grows with every slot and every window shape.
Here the kernel is run for *one* slot from a symbolic state instead.

Invariant I(t), per class: every budget spent in slots ``1..t`` is ``>= 0``, and every declared
window W (the backward and the forward window of every slot, under the declaration in force there)
has ``spent(W ∩ [1, t]) <= bound(W)``. I(0) holds (nothing spent); I(t) for every t is the
theorem (a window's whole sum is its partial sum at its last slot).

Step obligation at slot t (`step_obligation`): the dissimilarity and publication spends of slots
``t - keep .. t - 1`` are fresh variables (``keep`` = the largest window of the schedule; the
kernel's `Prefix` cannot read older slots, which hold 0), each ``>= 0``, and every declared
window starting in ``[t - keep, t - 1]`` is within its bound so far (part of I(t - 1)). One
``plan`` at t, with the publication bit *free* (whatever the data path and nullification decide),
must give non-negative budgets and keep every window containing t within its bound. Unsat of the
negation proves I(t - 1) => I(t) for every state, so the obligations for all t prove the theorem.

Finitely many t suffice: for ``t >= T* = last declaration slot + 2 keep`` the obligation is the
one at T* with slots renamed. Only the last declaration is in force in ``[t - keep, t]``, no
earlier forward window reaches t - keep, no later declaration exists, every hypothesis window
starts after the last declaration, and the kernel uses t only relative to its history (the
`_covering`, `_room` and DPBA absorption-count terms are differences ``t - tau``). So the
obligations for ``t = 1 .. T*`` cover every horizon.

Budgets (`budget_cases`): the kernels are scale-invariant per class
(`tests/test_allocator_proofs.py::test_scale_invariance`). For dpbd the first ``E_B`` of the
class is 1 and every other budget is a symbolic positive real. DPBA's absorption count divides
spends by ``E_F / (2 w_F)``, nonlinear when ``E_F`` is a variable (Z3's nlsat did not get
through 30 shapes with windows 4 in 300 s), so there the first ``E_F`` is 1, each later one is
1/2, 1 or 2 times it, and every ``E_B`` is symbolic, as in the bounded proofs.

Cost. One slot's obligation is built once per shape: for dpba with placeholder variables for
the later E_F, replaced per budget case (`_forward_placeholders`: the kernel decides only through
the algebra, and `strict_truth` makes a Python branch on a term raise, so the instance is
equivalent to the term built from the number). Each claim is simplified
and solved unless this process already proved the very same claim unsat (`_discharge`):
different shapes share most claims (dpba, w <= 6, two declarations: 48,558 obligations, 7,089
distinct claims). Worker processes each own the shapes of some last forward windows
(`_partition`), which share the most claims.

Several classes. Each class's budgets are computed by `wevent.mechanisms.allocators.dynamic._class_plan`,
a module-level function whose only inputs are the algebra, the rule, that class's schedule, that
class's two histories and t; the kernel's `plan` maps it over the classes and ORs their
nullification conditions, so classes share only the slot's publication bit, which the step leaves
free. A k-class run restricted to class i is therefore a one-class run of class i under some
decision sequence, and the one-class theorem covers it, for every pair of shapes: the argument
rests on the function's signature, not on the pairs checked. (A longer kept history, the largest
window over all classes, changes nothing: the one-class proof shows the class never reads older
than its own largest window, where `Prefix` would raise.) `noninterference` guards that
structure against refactoring: on the pairs it is given, the 2-class kernel's plan terms for each
class are the very same Z3 terms (structural equality) as the 1-class kernel's, on symbolic
histories; a mutant that couples classes is caught.
"""

from __future__ import annotations

import itertools
import queue
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from multiprocessing import get_context
from typing import Any

import z3

from wevent.accounting.budget import BudgetError
from wevent.mechanisms.allocators.dynamic import DynamicKernel, DynamicState
from wevent.mechanisms.allocators.kernel import Decl, DynamicClass, Prefix
from wevent.mechanisms.allocators.registry import BUILTIN
from wevent.proofs.algebra import strict_truth
from wevent.proofs.symbolic import WindowSpec, Z3ScopeAlgebra, dynamic_windows, real

# The window bound the dynamic kernels are proved to by default (`wevent prove allocator` and the
# gate): their one-class shapes grow as w^4 (two declarations), 256 at w <= 4; dpbd takes about
# 6 s and dpba 12 s on one core there, w <= 6 about 40 s on two cores.
INDUCTION_DEFAULT_W_MAX = 4

__all__ = [
    "FORWARD_RATIOS",
    "INDUCTION_DEFAULT_W_MAX",
    "Obligation",
    "Shape",
    "ShapeResult",
    "all_shapes",
    "budget_cases",
    "noninterference",
    "prove_shape",
    "prove_shapes",
    "sample_pairs",
    "stationary_slot",
    "step_obligation",
]

# Per declaration (w_B, w_F); a class's shape has one pair per declaration slot.
Shape = tuple[tuple[int, int], ...]

FORWARD_RATIOS: tuple[Fraction, ...] = (Fraction(1, 2), Fraction(1), Fraction(2))


def all_shapes(w_max: int, declarations: int) -> list[Shape]:
    """Every schedule shape: each declaration's ``(w_B, w_F)`` in ``[1, w_max]^2``, smallest first."""
    pairs = [(b, f) for b in range(1, w_max + 1) for f in range(1, w_max + 1)]
    shapes = list(itertools.product(pairs, repeat=declarations))
    shapes.sort(key=lambda s: (max(max(p) for p in s), s))
    return shapes


def _keep(shape: Shape) -> int:
    return max(max(p) for p in shape)


def stationary_slot(shape: Shape, decl_slots: Sequence[int]) -> int:
    """T*: from this slot on, every step obligation is T*'s with slots renamed (module docstring)."""
    return decl_slots[-1] + 2 * _keep(shape)


@dataclass
class _Class:
    """One class of a symbolic kernel: its declarations (budgets as Z3 terms) and windows."""

    decls: tuple[Decl[Any], ...]
    free: list[Any]


def _class(
    shape: Shape, decl_slots: Sequence[int], tag: str, fwd: Sequence[Fraction] | None = None
) -> _Class:
    """Budgets of one class. With ``fwd`` None the first E_B is 1 (per-class scale invariance)
    and every other budget is free; otherwise the E_F are ``fwd`` (the first is 1) and every
    E_B is free."""
    free: list[Any] = []
    decls = []
    for j, (slot, (wb, wf)) in enumerate(zip(decl_slots, shape, strict=True)):
        if fwd is None:
            eb: Any = real(1) if j == 0 else z3.Real(f"eb{tag}_{j}")
            ef: Any = z3.Real(f"ef{tag}_{j}")
            free += [ef] if j == 0 else [eb, ef]
        else:
            eb, ef = z3.Real(f"eb{tag}_{j}"), real(fwd[j])
            free.append(eb)
        decls.append(Decl(slot, wb, eb, wf, ef))
    return _Class(tuple(decls), free)


def _forward_placeholders(shape: Shape, decl_slots: Sequence[int]) -> tuple[_Class, list[Any]]:
    """One class for every dpba budget case at once: the first E_F is 1, each later E_F is a
    placeholder variable (returned) that `prove_shape` substitutes by the case's value, and every
    E_B is free. The kernel decides only through the algebra (with no folding), never in Python
    on a budget (`strict_truth` makes such a branch raise), so the term it builds with a
    placeholder, instantiated, is equivalent to the term it builds from the number (not always
    the same term: Python's operator dispatch depends on an operand's type):
    `tests/test_dynamic_proofs.py` checks that on every slot of two shapes."""
    free: list[Any] = []
    holes: list[Any] = []
    decls = []
    for j, (slot, (wb, wf)) in enumerate(zip(decl_slots, shape, strict=True)):
        eb = z3.Real(f"eb_{j}")
        ef: Any = real(1) if j == 0 else z3.Real(f"efcase_{j}")
        free.append(eb)
        if j:
            holes.append(ef)
        decls.append(Decl(slot, wb, eb, wf, ef))
    return _Class(tuple(decls), free), holes


def budget_cases(
    mechanism: str, declarations: int, ratios: Sequence[Fraction] = FORWARD_RATIOS
) -> list[tuple[Fraction, ...] | None]:
    """The forward budgets each shape is proved for: None (all symbolic) for dpbd; for dpba
    (its spec ``divides``: the t_FN of 001 Algorithm 7 lines 6-25), whose absorption counts divide spends by
    ``E_F / (2 w_F)`` (nonlinear when E_F is a variable: Z3 did not finish 30 shapes with
    windows 4 in 300 s), the first E_F is 1 and each later one ranges over ``ratios`` times it,
    with every E_B symbolic."""
    spec = BUILTIN.get(mechanism)
    if spec is None or not spec.divides:
        return [None]
    rest = itertools.product(ratios, repeat=declarations - 1)
    return [(Fraction(1), *combo) for combo in rest]


def _windows(c: _Class, horizon: int) -> list[WindowSpec]:
    return dynamic_windows(
        0, [(d.slot, d.w_back, d.eps_back, d.w_fwd, d.eps_fwd) for d in c.decls], horizon
    )


def _history(alg: Any, keep: int, t: int, tag: str) -> tuple[Prefix[Any], dict[int, Any]]:
    """A `Prefix` at slot t: fresh variables for slots ``t - keep .. t - 1``, 0 before (the
    kernel cannot read those: `Prefix` keeps ``keep`` slots and raises on older ones)."""
    hist: Prefix[Any] = Prefix(alg, keep)
    values: dict[int, Any] = {}
    for s in range(1, t):
        if s >= t - keep:
            values[s] = z3.Real(f"{tag}_{s}")
            hist = hist.push(values[s])
        else:
            hist = hist.push(alg.const(0))
    return hist, values


@dataclass(frozen=True)
class Obligation:
    """The step at one slot: the hypotheses (budgets positive and I(t - 1) on the symbolic
    history), the kernel's budgets at t as Z3 terms, and the ways I(t) can fail."""

    hypotheses: list[Any]
    dissimilarity: Any
    publication: Any
    failures: list[Any]

    @property
    def violation(self) -> Any:
        return z3.Or(*self.failures)


@strict_truth()
def step_obligation(
    mechanism: str,
    variant: str,
    shape: Shape,
    decl_slots: Sequence[int],
    t: int,
    fwd: Sequence[Fraction] | None = None,
) -> Obligation:
    """The step at slot t for one class of ``shape`` (forward budgets ``fwd``, see
    `budget_cases`): unsat of ``hypotheses + [violation]`` proves I(t - 1) => I(t)."""
    c = _class(shape, decl_slots, "", fwd)
    alg = Z3ScopeAlgebra(c.free, [x > 0 for x in c.free], fold=False)
    kernel = DynamicKernel(mechanism, alg, [DynamicClass(c.decls)], variant)
    return _obligation(alg, kernel, c, _keep(shape), t)


def _obligation(
    alg: Any, kernel: DynamicKernel[Any, Any], c: _Class, keep: int, t: int
) -> Obligation:
    hd, dv = _history(alg, keep, t, "dis")
    hp, pv = _history(alg, keep, t, "pub")
    spend = {s: dv[s] + pv[s] for s in dv}
    assume: list[Any] = [x > 0 for x in c.free]
    assume += [v >= 0 for v in (*dv.values(), *pv.values())]
    windows = _windows(c, t + keep)

    def before(w: WindowSpec) -> list[Any]:
        return [spend[s] for s in range(max(w.first, 1), min(w.last, t - 1) + 1)]

    for w in windows:
        if t - keep <= w.first <= t - 1:
            assume.append(z3.Sum(before(w)) <= w.bound)
    plan = kernel.plan(DynamicState((hd,), (hp,)), t)
    published = z3.Bool("published")
    d, p = plan.dissimilarity[0], plan.publication[0]
    now = d + z3.If(published, p, real(0))
    bad = [d < 0, z3.And(published, p < 0)]
    bad += [z3.Sum([*before(w), now]) > w.bound for w in windows if w.first <= t <= w.last]
    return Obligation(assume, d, p, bad)


@dataclass(frozen=True)
class ShapeResult:
    """The induction for one shape: "proved", "not inductive" (a state in I steps out of it at
    ``slot``) or "unknown" (solver gave up). ``solved`` of the ``obligations`` went to Z3; the
    others were claims this process had already proved (`_discharge`)."""

    shape: Shape
    status: str
    obligations: int
    seconds: float
    slot: int = 0
    reason: str = ""
    solved: int = 0


# Obligations proved unsat in this process, keyed by the AST id of the simplified claim and
# holding the claim: Z3 shares structurally equal terms, so a held claim's id names it alone (an
# id of a freed term can be reused by a different one). Different shapes often give the very same
# claim (at dpba, w <= 6, 2 declarations: 7,089 distinct of 48,558); an unsat claim is unsat
# whatever kernel or shape produced it, so the cache can never prove a claim that is not.
_UNSAT: dict[int, Any] = {}
_UNSAT_MAX = 200_000


def _discharge(claim: Any, timeout_ms: int) -> tuple[Any, str, bool]:
    """Z3 on one simplified claim: (result, reason when unknown, whether Z3 ran); unsat claims
    are remembered."""
    key = claim.get_id()
    if key in _UNSAT:
        return z3.unsat, "", False
    s = z3.SolverFor("QF_LRA")  # the kernels' claims are linear: 15-20% faster than the default
    if timeout_ms > 0:
        s.set("timeout", timeout_ms)
    s.add(claim)
    r = s.check()
    if (
        r == z3.unknown
        and "timeout" not in s.reason_unknown()
        and "canceled" not in s.reason_unknown()
    ):
        # not linear after all (a division by a variable): the general solver, as before
        s = z3.Solver()
        if timeout_ms > 0:
            s.set("timeout", timeout_ms)
        s.add(claim)
        r = s.check()
    if r == z3.unsat:
        if len(_UNSAT) >= _UNSAT_MAX:
            _UNSAT.clear()
        _UNSAT[key] = claim
        return r, "", True
    return r, "" if r == z3.sat else str(s.reason_unknown()), True


@strict_truth()
def prove_shape(
    mechanism: str,
    variant: str,
    shape: Shape,
    decl_slots: Sequence[int],
    timeout_ms: int = 60_000,
    ratios: Sequence[Fraction] = FORWARD_RATIOS,
) -> ShapeResult:
    """Every step obligation ``t = 1 .. T*`` of one class of ``shape``, for every budget case
    (dpba: each later E_F ``ratios`` times the first). Each obligation is built once per slot
    (for dpba with placeholder E_F, instantiated per case), simplified, and solved unless the
    very same claim was already proved unsat in this process."""
    start = time.perf_counter()
    keep = _keep(shape)
    last = stationary_slot(shape, decl_slots)
    cases = budget_cases(mechanism, len(decl_slots), ratios)
    holes: list[Any] = []
    if cases == [None]:
        c = _class(shape, decl_slots, "", None)
    else:
        c, holes = _forward_placeholders(shape, decl_slots)
    alg = Z3ScopeAlgebra(c.free, [x > 0 for x in c.free], fold=False)
    kernel = DynamicKernel(mechanism, alg, [DynamicClass(c.decls)], variant)
    done = solved = 0
    for t in range(1, last + 1):
        ob = _obligation(alg, kernel, c, keep, t)
        claim = z3.And(*ob.hypotheses, ob.violation)
        for fwd in cases:
            case = claim
            if fwd is not None and holes:
                pairs = [(h, real(v)) for h, v in zip(holes, fwd[1:], strict=True)]
                case = z3.substitute(claim, *pairs)
            r, reason, ran = _discharge(z3.simplify(case), timeout_ms)
            done += 1
            solved += ran
            if r == z3.sat:
                seconds = time.perf_counter() - start
                return ShapeResult(shape, "not inductive", done, seconds, t, "", solved)
            if r != z3.unsat:
                seconds = time.perf_counter() - start
                return ShapeResult(shape, "unknown", done, seconds, t, reason, solved)
    return ShapeResult(shape, "proved", done, time.perf_counter() - start, solved=solved)


def _partition(shapes: Sequence[Shape], workers: int) -> list[list[int]]:
    """Shape indices per worker process. Shapes with the same last forward window share most
    of their claims (and a process proves a claim once), so each such group goes to one worker:
    groups largest first (cost: obligations ~ max window) to the least loaded worker."""
    groups: dict[int, list[int]] = {}
    for i, shape in enumerate(shapes):
        groups.setdefault(shape[-1][1], []).append(i)
    parts: list[list[int]] = [[] for _ in range(min(workers, len(groups)))]
    load = [0] * len(parts)
    costs = [(sum(_keep(shapes[i]) for i in m), m) for m in groups.values()]
    for cost, members in sorted(costs, key=lambda c: -c[0]):
        k = load.index(min(load))
        parts[k] += members
        load[k] += cost
    return [sorted(p) for p in parts]


def _worker(
    common: tuple[str, str, tuple[int, ...], int, tuple[Fraction, ...]],
    items: list[tuple[int, Shape]],
    out: Any,
) -> None:
    """One worker process: its shapes in order, each result (or the exception) sent as it
    comes; it stops at its first shape that is not proved (no later one can come first)."""
    mechanism, variant, decl_slots, timeout_ms, ratios = common
    for i, shape in items:
        try:
            r = prove_shape(mechanism, variant, shape, decl_slots, timeout_ms, ratios)
        except Exception as exc:  # sent to the parent, which raises it
            out.put((i, exc))
            return
        out.put((i, r))
        if r.status != "proved":
            return


def prove_shapes(
    mechanism: str,
    variant: str,
    shapes: Sequence[Shape],
    decl_slots: Sequence[int],
    *,
    timeout_ms: int = 60_000,
    workers: int = 1,
    ratios: Sequence[Fraction] = FORWARD_RATIOS,
) -> Iterator[ShapeResult]:
    """`prove_shape` for each shape in order, up to and including the first that is not
    proved, on ``workers`` processes (each owning a fixed part of the shapes, `_partition`)."""
    common = (mechanism, variant, tuple(decl_slots), timeout_ms, tuple(ratios))
    parts = _partition(shapes, workers)
    if len(parts) <= 1:  # each worker process costs a Z3 import
        for shape in shapes:
            r = prove_shape(mechanism, variant, shape, *common[2:])
            yield r
            if r.status != "proved":
                return
        return
    ctx = get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(common, [(i, shapes[i]) for i in part], out), daemon=True)
        for part in parts
    ]
    for p in procs:
        p.start()
    # Results (or a worker's exception) by shape index, taken in shape order: the first shape
    # that is not proved, or that raised, ends the run exactly as in one process.
    ready: dict[int, ShapeResult | BaseException] = {}
    try:
        for index in range(len(shapes)):
            while index not in ready:
                try:
                    i, r = out.get(timeout=1.0)
                except queue.Empty:
                    # Poll the processes first, then look at the queue once more: a result put
                    # just before its worker exited is not lost.
                    dead = any(p.exitcode not in (None, 0) for p in procs)
                    done = all(p.exitcode is not None for p in procs)
                    try:
                        i, r = out.get(timeout=0.5)
                    except queue.Empty:
                        if dead or done:
                            raise BudgetError(
                                "a proof worker process ended without a result (killed, or out "
                                "of memory?)"
                            ) from None
                        continue
                ready[i] = r
            got = ready.pop(index)
            if isinstance(got, BaseException):
                raise got
            yield got
            if got.status != "proved":
                return
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join()


@strict_truth()
def noninterference(
    mechanism: str,
    variant: str,
    pairs: Sequence[tuple[Shape, Shape]],
    decl_slots: Sequence[int],
    ratios: Sequence[Fraction] = FORWARD_RATIOS,
) -> tuple[Shape, Shape, int] | None:
    """The first ``(shape a, shape b, slot)`` where the 2-class kernel's plan for a class differs
    from the 1-class kernel's plan for it (as Z3 terms, on the same symbolic histories), or
    None. Checked at every slot up to the pair's stationary slot."""
    for a, b in pairs:
        if len(a) != len(decl_slots) or len(b) != len(decl_slots):
            raise BudgetError("a shape needs one (w_B, w_F) pair per declaration slot")
        fwd = budget_cases(mechanism, len(decl_slots), ratios)[-1]
        classes = [_class(a, decl_slots, "a", fwd), _class(b, decl_slots, "b", fwd)]
        free = classes[0].free + classes[1].free
        alg = Z3ScopeAlgebra(free, [x > 0 for x in free], fold=False)
        keep = max(_keep(a), _keep(b))
        joint = DynamicKernel(mechanism, alg, [DynamicClass(c.decls) for c in classes], variant)
        alone = [DynamicKernel(mechanism, alg, [DynamicClass(c.decls)], variant) for c in classes]
        last = max(stationary_slot(a, decl_slots), stationary_slot(b, decl_slots))
        for t in range(1, last + 1):
            hists = [
                (_history(alg, keep, t, f"dis{i}")[0], _history(alg, keep, t, f"pub{i}")[0])
                for i in range(2)
            ]
            state = DynamicState((hists[0][0], hists[1][0]), (hists[0][1], hists[1][1]))
            both = joint.plan(state, t)
            for i, kernel in enumerate(alone):
                own = kernel.plan(DynamicState((hists[i][0],), (hists[i][1],)), t)
                if not (
                    both.dissimilarity[i].eq(own.dissimilarity[0])
                    and both.publication[i].eq(own.publication[0])
                ):
                    return a, b, t
    return None


def sample_pairs(shapes: Sequence[Shape], count: int, seed: int = 0) -> list[tuple[Shape, Shape]]:
    """The pairs of the smallest and the largest shape (both orders, and each with itself) and
    ``count`` random pairs of ``shapes``."""
    rng = random.Random(seed)
    ends = (shapes[0], shapes[-1])
    pairs = [(a, b) for a in ends for b in ends]
    pairs += [(rng.choice(shapes), rng.choice(shapes)) for _ in range(count)]
    return pairs
