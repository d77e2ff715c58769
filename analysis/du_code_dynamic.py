"""DynamicWEventCode's DPBA and DPBD (the five-argument step), restated as a budget ledger.

Claim examined. docs/peers.md lists the dynamic allocators of Du et al.'s public code
(github.com/dulei715/DynamicWEventCode, snapshot 286adeaf92e8) among what the `du-code` variant
does not cover: their five-argument step departs from 001 Algorithm 7 (DPBA) and Algorithm 6
(DPBD). This script says what that step spends, per slot and user, for given dynamic
requirements and publish/skip decisions, so that `wevent check` can judge the spends.

The model, restated from reading the Java (no code copied; paths below are under
``src/main/java/ecnu/dll/``, ``DPWSM`` is ``schemes/main_scheme/b_dynamic_windown_size/
DynamicPersonalizedWindowSizeMechanism.java``, ``DPBA`` its subclass
``DynamicPersonalizedBudgetAbsorption.java``, ``DPBD`` ``DynamicPersonalizedBudgetDistribution
.java``, ``struts/direct_stream/`` holds the streams). Slots count from 1 below.

* The clock. The mechanism's ``currentTime`` is 0 when built and incremented first thing in the
  step (DPWSM:176, DPBA:133), so slot t runs with ``currentTime = t``. Each user's forward
  stream starts at -1 and is incremented when its element is added (ForwardImpactStream.java:11,
  34-37), so slot t's forward element carries the slot number ``t - 1``.
* Forward elements. Every slot adds one element per user with that slot's forward requirement
  ``(E_F, w_F)`` (DPWSM:53-64, DPBA:134), then drops the elements whose window ended before the
  slot (ForwardImpactStream.java:19-28). For DPBA an element also keeps a publication usage
  (0), a remainder (``E_F / 2``) and a right border, first its own slot number minus one, i.e.
  ``t - 2`` for slot t (ImpactElementAbsorption.java:9-14).
* Dissimilarity (both): ``min( min over elements of E_F / 2 / w_F, max(E_B / 2 - the last
  w_B - 1 recorded dissimilarity budgets, 0) )`` (DPWSM:85-95, ForwardImpactStreamTools.java:
  26-39, BackwardHistoricalStream.java:41-48). It is computed and spent (DC runs on it) before
  DPBA's nullification test (DPBA:136, 139-144).
* DPBA's nullification: each user's border is the largest right border of its elements (at
  least -1), and the runners' constructor takes the largest over users (DPBA:33-35, 110-128,
  ``MaximalNullifiedBound``; ``--bound average`` or ``min`` for the other two bounds, the
  average being what the repository's JUnit test of the step uses). The slot is nullified iff
  ``currentTime <= bound`` (DPBA:141-144), and then returns at once: neither the dissimilarity
  budget nor a publication is recorded anywhere (no backward entry, no forward usage).
* DPBA's publication: over the elements, ``A = max(0, max (t - border) * E_F / 2 / w_F)`` and
  ``U = min remainder``; the candidate is ``min( min(A, U), E_B / 2 - the last w_B - 1 recorded
  publication budgets )`` (DPBA:52-79), with no clip at zero.
* DPBD's publication: ``min( 0.5 * min over elements (E_F / 2 - the last (t - 1 - slot of the
  element) recorded publication budgets), E_B / 2 - the last w_B - 1 recorded ones )``
  (DPBD:17-36, ForwardImpactStreamTools.java:47-61), no clip at zero, no nullification.
* Publish or skip is the data path's choice (DPWSM:144): the script takes it as input. The
  candidate is spent only when the slot publishes.
* Recording: a slot that is not nullified appends (dissimilarity, candidate) to every user's
  backward history whether it published or not (DPWSM:66-73, 185; DPBA:148), keeping at most
  ``MAX_BACKWARD_WINDOW_SIZE`` entries (BackwardHistoricalStream.java:27-39; the runners' value
  is the largest configured window plus one, ``_config/Constant.java:60``: here the largest
  window of the input, backward or forward, plus one, so it never binds); DPBA then adds the candidate to the usage of every
  element, subtracts it from the remainder and sets the border to ``ceil(usage / (E_F / (2
  w_F))) + slot of the element - 1`` (DPBA:45-49, 149; ForwardImpactStreamAbsorption.java:12-16;
  ImpactElementAbsorption.java:19-23).

Against 001 Algorithm 7: the element's slot counts from 0 while t counts from 1, so slot 1
absorbs two shares where line 17 gives one and a border nullifies one slot less than line 7's;
line 7 has no ceil; a skipped slot's candidate is recorded as spent (lines 19 and 23 sum what
was spent, Algorithm 5's lines 15-22 record 0 for a skipped slot); a nullified slot's
dissimilarity budget is missing from line 4's sum, and the last w_B - 1 entries then reach
further back than the slots ``[t - w_B + 1, t - 1]``.

Arithmetic. ``--arithmetic exact`` (the default) runs the rules in exact rationals from the
requirement file's decimals, which is what the code means; ``--arithmetic double`` runs them in
IEEE doubles in the code's order of operations and logs each double's exact value. A published
slot whose candidate is negative for some user is reported and ends the run (a ledger holds no
negative spend); a skipped slot's negative candidate is recorded, as the code does.

What it prints: per slot its status and, per user, the dissimilarity budget, the candidate
publication budget and what the slot spent; with ``--ledger`` it writes the spends as a CSV
ledger (``slot,user,epsilon,part,mechanism``) for ``wevent check``;
``--check`` prints wevent's verdict on it. ``--search`` looks for the smallest input whose
spends break a window (1 to 3 users, windows up to 4, every decision sequence) and prints it.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Generic, TypeVar

import wevent
from wevent.accounting.budget import format_exact
from wevent.accounting.requirements import Declaration, Dynamic, Fixed
from wevent.verifier.tracing import trace_with_guard

N = TypeVar("N", Fraction, float)

MECHANISM_NAMES = {"dpba": "DPBA (DynamicWEventCode)", "dpbd": "DPBD (DynamicWEventCode)"}


@dataclass
class Element(Generic[N]):
    """One forward element: the slot it was added at, in the code's forward clock (slot - 1)."""

    code_slot: int
    eps: N
    w: int
    usage: N
    remain: N
    border: N


@dataclass
class UserState(Generic[N]):
    forward: list[Element[N]] = field(default_factory=list)
    calc: list[N] = field(default_factory=list)  # oldest first
    pub: list[N] = field(default_factory=list)


@dataclass(frozen=True)
class Slot:
    """What one slot did: status, per user (in the population's order) the dissimilarity
    budget, the candidate publication budget (None when nullified) and the spends."""

    slot: int
    status: str  # published, skipped, nullified or negative
    dissimilarity: tuple[Fraction, ...]
    candidate: tuple[Fraction | None, ...]
    publication: tuple[Fraction, ...]


def _last_sum(history: list[N], count: int, zero: N) -> N:
    """The sum of the newest ``count`` entries, newest first (BackwardHistoricalStream.java:
    41-56): the order matters in doubles."""
    total = zero
    for value in reversed(history[max(len(history) - count, 0) :] if count > 0 else []):
        total = total + value
    return total


def declaration_at(req: wevent.Requirement, t: int, user: str) -> Declaration:
    """The requirement in force at slot ``t`` as the step's four arguments: a fixed (w, eps) is
    B:(w, eps) F:(w, eps)."""
    if isinstance(req, Fixed):
        return Declaration(t, req.w, req.eps, req.w, req.eps)
    if isinstance(req, Dynamic):
        decl = req.in_force(t)
        if decl is None:
            raise SystemExit(f"{user}: no requirement in force at slot {t} (the step needs one)")
        return decl
    raise SystemExit(f"{user}: the step takes fixed or dynamic requirements, not {req.describe()}")


class CodeRun(Generic[N]):
    """The five-argument step of the code's DPBA or DPBD over a population, one slot a call."""

    def __init__(
        self,
        population: wevent.Population,
        mechanism: str,
        num: Callable[[Fraction], N],
        bound: str = "max",
    ) -> None:
        if mechanism not in MECHANISM_NAMES:
            raise SystemExit(f"unknown mechanism {mechanism!r}: dpba or dpbd")
        if bound not in ("max", "average", "min"):
            raise SystemExit(f"unknown bound {bound!r}: max, average or min")
        self.population = population
        self.users = population.users
        self.mechanism = mechanism
        self.num: Callable[[Fraction], N] = num
        self.bound = bound
        self.zero: N = num(Fraction(0))
        self.states: dict[str, UserState[N]] = {u: UserState[N]() for u in self.users}
        self.t = 0
        # Constant.java:60: the largest configured window plus one (the runners draw backward
        # and forward windows from one configured list), so it never binds on this input: the
        # longest sum is w_B - 1 entries back, t - s <= w_F - 1 forward (DPBD).
        windows = [
            max(d.w_back, d.w_fwd)
            for u in self.users
            for d in _declarations(population.requirement_of(u), u)
        ]
        self.max_back = max(windows) + 1

    def _record(self, state: UserState[N], calc: N, cand: N) -> None:
        state.calc.append(calc)
        state.pub.append(cand)
        if len(state.calc) > self.max_back:  # BackwardHistoricalStream.java:27-32
            del state.calc[0]
            del state.pub[0]

    def step(self, decision: bool) -> Slot:
        self.t += 1
        t, num, zero = self.t, self.num, self.zero
        decls = {u: declaration_at(self.population.requirement_of(u), t, u) for u in self.users}
        calcs: dict[str, N] = {}
        for u in self.users:
            st, d = self.states[u], decls[u]
            code_slot = t - 1  # the forward stream's clock (ForwardImpactStream.java:34-37)
            eps_f = num(Fraction(d.eps_fwd))
            st.forward.append(
                Element(code_slot, eps_f, d.w_fwd, zero, eps_f / 2, num(Fraction(code_slot - 1)))
            )
            st.forward = [e for e in st.forward if not e.code_slot + e.w - 1 < code_slot]
            # DPWSM:85-95: the forward share's minimum and the backward remainder, clipped at 0
            fwd = min(e.eps / 2 / e.w for e in st.forward)
            back = num(Fraction(d.eps_back)) / 2 - _last_sum(st.calc, d.w_back - 1, zero)
            calcs[u] = min(fwd, max(back, zero))
        dis = tuple(Fraction(calcs[u]) for u in self.users)
        if self.mechanism == "dpba" and self._nullified():
            none: tuple[Fraction | None, ...] = tuple(None for _ in self.users)
            return Slot(t, "nullified", dis, none, tuple(Fraction(0) for _ in self.users))
        cands = {u: self._candidate(u, decls[u]) for u in self.users}
        cand = tuple(Fraction(cands[u]) for u in self.users)
        if decision and min(cand) < 0:
            return Slot(t, "negative", dis, cand, cand)
        for u in self.users:
            st = self.states[u]
            self._record(st, calcs[u], cands[u])
            if self.mechanism == "dpba":
                for e in st.forward:  # ImpactElementAbsorption.java:19-23
                    e.usage = e.usage + cands[u]
                    e.remain = e.remain - cands[u]
                    e.border = num(Fraction(math.ceil(e.usage / (e.eps / (2 * e.w)))))
                    e.border = e.border + e.code_slot - 1
        spent = cand if decision else tuple(Fraction(0) for _ in self.users)
        return Slot(t, "published" if decision else "skipped", dis, cand, spent)

    def _nullified(self) -> bool:
        """DPBA:110-128, 139-144 and the three NullifiedBound classes."""
        per_user: list[N] = []
        for u in self.users:
            border: N = self.num(Fraction(-1))  # DPBA:120
            for e in self.states[u].forward:
                border = max(border, e.border)
            per_user.append(border)
        bound: N
        if self.bound == "max":
            bound = max(self.zero, *per_user)
        elif self.bound == "min":
            bound = min(per_user)
        else:
            total = self.zero
            for b in per_user:
                total = total + b
            bound = total / len(per_user)
        return self.num(Fraction(self.t)) <= bound

    def _candidate(self, user: str, d: Declaration) -> N:
        st, t, num, zero = self.states[user], self.t, self.num, self.zero
        back = num(Fraction(d.eps_back)) / 2 - _last_sum(st.pub, d.w_back - 1, zero)
        if self.mechanism == "dpba":  # DPBA:60-77
            absorb = zero
            remain = min(e.remain for e in st.forward)
            for e in st.forward:
                absorb = max(absorb, (num(Fraction(t)) - e.border) * e.eps / 2 / e.w)
            return min(min(absorb, remain), back)
        # DPBD:25-35, ForwardImpactStreamTools.java:47-61 (the forward clock is t - 1)
        fwd = min(e.eps / 2 - _last_sum(st.pub, (t - 1) - e.code_slot, zero) for e in st.forward)
        return min(num(Fraction(1, 2)) * fwd, back)


def _declarations(req: wevent.Requirement, user: str) -> tuple[Declaration, ...]:
    if isinstance(req, Fixed):
        return (Declaration(1, req.w, req.eps, req.w, req.eps),)
    if isinstance(req, Dynamic):
        return req.declarations
    raise SystemExit(f"{user}: the step takes fixed or dynamic requirements, not {req.describe()}")


def run(
    population: wevent.Population,
    decisions: Sequence[bool],
    *,
    mechanism: str = "dpba",
    arithmetic: str = "exact",
    bound: str = "max",
) -> list[Slot]:
    """The code's step over ``decisions``; stops after a published slot with a negative
    candidate (status ``negative``)."""
    if arithmetic == "exact":
        code: CodeRun[Fraction] | CodeRun[float] = CodeRun(population, mechanism, Fraction, bound)
    elif arithmetic == "double":
        code = CodeRun(population, mechanism, float, bound)
    else:
        raise SystemExit(f"unknown arithmetic {arithmetic!r}: exact or double")
    out = []
    for decision in decisions:
        out.append(code.step(decision))
        if out[-1].status == "negative":
            break
    return out


def ledger_of(
    population: wevent.Population, slots: Sequence[Slot], mechanism: str = "dpba"
) -> wevent.Ledger:
    """The spends as a ledger: per slot and user a dissimilarity row (0 included, so that the
    ledger's last slot is the run's: a later declaration's backward window can reach back over
    spends) and a publication row when the slot published; a slot with a negative published
    budget ends it."""
    ledger = wevent.Ledger()
    name = MECHANISM_NAMES[mechanism]
    for s in slots:
        if s.status == "negative":
            break
        for user, dis, pub in zip(population.users, s.dissimilarity, s.publication, strict=True):
            ledger.append(s.slot, dis, user=user, part="dissimilarity", mechanism=name)
            if s.status == "published":
                ledger.append(s.slot, pub, user=user, part="publication", mechanism=name)
    return ledger


def _shown(value: Fraction | None, arithmetic: str) -> str:
    if value is None:
        return "-"
    return repr(float(value)) if arithmetic == "double" else format_exact(value)


def report(
    population: wevent.Population, slots: Sequence[Slot], arithmetic: str = "exact"
) -> Iterator[str]:
    """Per slot: status and, per user, dis (spent), cand (the planned publication budget) and
    pub (spent)."""
    for s in slots:
        cells = [
            f"{u} dis={_shown(d, arithmetic)} cand={_shown(c, arithmetic)} "
            f"pub={_shown(p, arithmetic)}"
            for u, d, c, p in zip(
                population.users, s.dissimilarity, s.candidate, s.publication, strict=True
            )
        ]
        yield f"slot {s.slot}: {s.status:<9}  " + " | ".join(cells)
        if s.status == "negative":
            yield "  a published slot with a negative budget: the run stops (no ledger row)"


# ---- the search -------------------------------------------------------------------------------

Schedule = tuple[tuple[int, int, str, int, str], ...]  # (slot, w_B, E_B, w_F, E_F) per declaration


def population_of(schedules: Sequence[Schedule]) -> wevent.Population:
    return wevent.Population(
        {
            f"u{i + 1}": Dynamic(
                tuple(
                    Declaration(s, wb, wevent.Budget(eb), wf, wevent.Budget(ef))
                    for s, wb, eb, wf, ef in sched
                )
            )
            for i, sched in enumerate(schedules)
        }
    )


def feasible_when_declared(
    population: wevent.Population, slots: Sequence[Slot], violation: wevent.Violation
) -> bool:
    """Whether the window a violation names was within its bound when its declaration was made:
    a forward window always is (it starts at its declaration); a backward window is when the
    spends in it before the declaration's slot fit its bound (the test of
    tests/test_allocator_soundness.py). A requirement infeasible when declared is the
    declarer's fault, not the allocator's."""
    if violation.kind != "backward":
        return True
    user = violation.users[0]
    req = population.requirement_of(user)
    assert isinstance(req, Dynamic)
    decl = req.in_force(violation.anchor)
    assert decl is not None
    index = population.users.index(user)
    before = sum(
        (
            s.dissimilarity[index] + s.publication[index]
            for s in slots
            if violation.anchor - decl.w_back < s.slot < decl.slot
        ),
        Fraction(0),
    )
    return before <= decl.eps_back


def violates(
    population: wevent.Population,
    decisions: Sequence[bool],
    mechanism: str,
    arithmetic: str = "exact",
) -> tuple[str, str] | None:
    """(kind, why) when the code's spends fail the input: kind ``negative`` (a published slot
    with a negative budget), ``window`` (a violation, by wevent.check, of a window that was
    feasible when declared) or ``infeasible`` (only windows that were not); else None."""
    slots = run(population, decisions, mechanism=mechanism, arithmetic=arithmetic)
    if slots[-1].status == "negative":
        return "negative", f"slot {slots[-1].slot}: a published slot with a negative budget"
    verdict = wevent.check(ledger_of(population, slots, mechanism), population, horizon=len(slots))
    if verdict.ok:
        return None
    for v in verdict.violations:
        if feasible_when_declared(population, slots, v):
            printed = "hold" if printed_rules_hold(population, decisions, mechanism) else "fail"
            return "window", f"{v.describe()}; the printed rules {printed} on this input"
    return "infeasible", verdict.violations[0].describe()


def printed_rules_hold(
    population: wevent.Population, decisions: Sequence[bool], mechanism: str
) -> bool:
    """Whether 001 Algorithm 7 (or 6) as printed, wevent's ``published`` kernel, passes the
    guard on the same input and decisions (no refusal, no negative budget)."""
    return trace_with_guard(mechanism, population, decisions, variant="published").ok


def _inputs(
    decls: Sequence[tuple[int, str, int, str]], users_max: int, slots_max: int, scope: str
) -> Iterator[tuple[list[Schedule], int]]:
    """Inputs in increasing size: slots first, then users (fixed) or where the second
    declaration falls (re-declared)."""
    for slots in range(1, slots_max + 1):
        if scope == "fixed":
            for users in range(1, users_max + 1):
                for combo in itertools.combinations_with_replacement(decls, users):
                    yield [((1, *d),) for d in combo], slots
        else:  # one user, a second declaration at slot k
            for k in range(2, slots + 1):
                for first, second in itertools.product(decls, repeat=2):
                    if first != second:
                        yield [((1, *first), (k, *second))], slots


def search(
    mechanism: str,
    budgets: Sequence[str],
    w_max: int,
    slots_max: int,
    users_max: int,
    arithmetic: str = "exact",
    scopes: Sequence[str] = ("fixed", "re-declared"),
) -> Iterator[tuple[str, str, list[Schedule], tuple[bool, ...], str]]:
    """For each scope and each kind of failure, the first input (in the order of `_inputs`, every
    decision sequence of its length) whose spends fail: (scope, kind, schedules, decisions, why).

    Scopes: "fixed" (one declaration at slot 1 per user, held to the end), 1..users_max users;
    "re-declared" (one user, declarations at slot 1 and at one later slot)."""
    decls = [
        (wb, eb, wf, ef)
        for wb in range(1, w_max + 1)
        for eb in budgets
        for wf in range(1, w_max + 1)
        for ef in budgets
    ]
    for scope in scopes:
        wanted = ["negative", "window", "window, printed rules hold"]  # not "infeasible"
        for schedules, slots in _inputs(decls, users_max, slots_max, scope):
            pop = population_of(schedules)
            for dec in itertools.product((False, True), repeat=slots):
                failed = violates(pop, dec, mechanism, arithmetic)
                if failed is None:
                    continue
                kinds = [failed[0]]
                if failed[0] == "window" and failed[1].endswith("hold on this input"):
                    kinds.append("window, printed rules hold")
                for kind in kinds:
                    if kind in wanted:
                        wanted.remove(kind)
                        yield scope, kind, schedules, dec, failed[1]
            if not wanted:
                break
        for kind in wanted:
            yield scope, kind, [], (), "none in this scope"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("-r", "--requirements", help="requirements file (wevent's formats)")
    parser.add_argument("--decisions", help="publish (1) or skip (0) per slot, e.g. 1,0,1")
    parser.add_argument("--mechanism", choices=sorted(MECHANISM_NAMES), default="dpba")
    parser.add_argument("--arithmetic", choices=("exact", "double"), default="exact")
    parser.add_argument("--bound", choices=("max", "average", "min"), default="max")
    parser.add_argument("--ledger", help="write the spends to this CSV ledger")
    parser.add_argument("--check", action="store_true", help="print wevent.check's verdict")
    parser.add_argument("--search", action="store_true", help="search small inputs")
    parser.add_argument("--budgets", default="1,2", help="budgets the search declares")
    parser.add_argument("--w-max", type=int, default=2)
    parser.add_argument("--slots-max", type=int, default=4)
    parser.add_argument("--users-max", type=int, default=1)
    parser.add_argument("--scope", choices=("fixed", "re-declared", "both"), default="both")
    args = parser.parse_args(argv)

    if args.search:
        budgets = args.budgets.split(",")
        print(
            f"{args.mechanism} ({args.arithmetic}): budgets {budgets}, w <= {args.w_max}, "
            f"<= {args.slots_max} slots, fixed: <= {args.users_max} users"
        )
        for scope, kind, schedules, dec, why in search(
            args.mechanism,
            budgets,
            args.w_max,
            args.slots_max,
            args.users_max,
            args.arithmetic,
            ("fixed", "re-declared") if args.scope == "both" else (args.scope,),
        ):
            if not schedules:
                print(f"{scope}, {kind}: {why}")
                continue
            print(f"{scope}, {kind}: the first failing input")
            print("  user,slot,w_back,eps_back,w_fwd,eps_fwd")
            for i, sched in enumerate(schedules):
                for s, wb, eb, wf, ef in sched:
                    print(f"  u{i + 1},{s},{wb},{eb},{wf},{ef}")
            print(f"  decisions: {','.join('1' if d else '0' for d in dec)}")
            print(f"  {why}")
        return 0

    if not args.requirements or not args.decisions:
        parser.error("give -r and --decisions (or --search)")
    population = wevent.read_requirements(args.requirements)
    decisions = [part.strip() == "1" for part in args.decisions.split(",")]
    slots = run(
        population,
        decisions,
        mechanism=args.mechanism,
        arithmetic=args.arithmetic,
        bound=args.bound,
    )
    print(
        f"{args.mechanism} as DynamicWEventCode's five-argument step ({args.arithmetic} "
        f"arithmetic, {args.bound} nullification bound): {len(population.users)} users"
    )
    for line in report(population, slots, args.arithmetic):
        print(line)
    ledger = ledger_of(population, slots, args.mechanism)
    if args.ledger:
        wevent.write_ledger(ledger, args.ledger)
        print(f"wrote {len(ledger)} charges to {args.ledger}")
    if args.check:
        verdict = wevent.check(ledger, population)
        print("verdict:", "COMPLIANT" if verdict.ok else "NOT COMPLIANT")
        for v in verdict.violations:
            print(f"  {v.describe()}")
    return 1 if slots and slots[-1].status == "negative" else 0


if __name__ == "__main__":
    sys.exit(main())
