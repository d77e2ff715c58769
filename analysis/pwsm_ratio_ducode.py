"""001 Section 6.5: does the authors' code's PBA drop at a high share o of E = 1.0 (or w = 40) users?

Claim. 001 Section 6.5, Figures 11-12 (budgets {0.6, 1.0}, windows {40, 120}): AMRE "remains
relatively stable" as the share o of E = 1.0 users (all w = 120; Figure 11) or of w = 40 users
(all E = 0.6; Figure 12) grows, and drops "for PBD and PBA" once o exceeds about 0.8, because OBS
(001 Algorithm 1) then picks the higher budget. At N = 10,000 users wevent's PBA (the `sound`
variant, 001 Algorithm 5 as printed) rises at o = 0.9 in the budget sweep and does not move at all
in the window sweep (`wevent reproduce pwsm-ratio`; `analysis/pwsm_ratio_users.py` finds that it
drops at N = 5,000).

This script tests the settings of the authors' public code (DynamicWEventCode; facts in
docs/peers.md and analysis/pwsm_absolute.py), run on wevent's own kernels and data path:

* ``du-code``: the kernel variant of that code (`wevent.mechanisms.allocators.fixed`): PBA's last
  publication is set once, before slot 1, and never updated, so nothing is ever nullified and
  slot t publishes min(t, w) shares of E / (2w), the whole E / 2 from slot w on (more than
  w-event privacy allows, docs/peers.md);
* the code's runner: every mechanism restarts every 250 slots (a fresh kernel, release reset
  to 0) and p_t is rounded to two decimals (for TLNS at every step of the walk).

Settings (each runs wevent's `CentralRunner` with the kernel `kernel_for(MECHANISM, ...,
variant)`, MECHANISM pba or pbd):

  sound    wevent's PBA (PBD) as `reproduce` runs it (001 Algorithm 5 (4), one run, exact p_t);
  runner   the sound kernel with the code's runner (restarts every 250 slots, p_t rounded);
  du-code  the du-code kernel, one run, exact p_t;
  authors  the du-code kernel with the code's runner (restarts, rounding): the code's setting.

The sound and runner settings charge wevent's `Guard` (one guard for the whole stream; a
restarted segment's slots are shifted to their stream slots, so the guard checks every window,
across restarts too). A restarted kernel forgets what it spent in the window before the
restart, so the runner setting is not w-event private in general: the guard accepted every
charge of PBA's runs below and refuses PBD's first publication after a restart (a row saying
so). The du-code settings' charges go to a spender that accepts everything (`Unchecked`), so
their numbers are reported unchecked: the du-code PBA kernel overspends (the guard refuses it
within the first window); the du-code PBD kernel is conservative (wevent.mechanisms.allocators
.fixed) and the guard accepts it unrestarted, but restarted (the `authors` setting) it overspends
at each restart as the `runner` setting does, so the authors' PBD is not w-event private either
(``--guard-all`` charges the du-code settings to the guard too: the last commands below). A
refusal in the `sound` setting would be a fault of wevent and stops the script. The sound runs
are the same computation as `reproduce` (check (a)).

What it prints:

(a) A check: the script's runner in the `sound` setting against `harness.execute` (the code
    path of `wevent reproduce pwsm-ratio`, guard in the loop): identical AMRE.
(b) For each sweep (eps:o, w:o), stream and setting: PBA's AMRE (mean over seeds) and mean
    publications at each o, and the drop from o = 0.7 to 0.9 paired per seed, 1 - PBA(0.9) /
    PBA(0.7) (positive: a drop): its mean, 95% Student-t interval over the seeds
    (`wevent.experiments.stats.interval`) and its smallest and largest value.
(c) The mechanics at o = 0.7 and 0.9 for each setting: the share of slots whose dissimilarity
    step (001 Algorithm 3, DC) samples (OBS picked a threshold above the lowest dissimilarity
    budget, so the E = 0.6 (w = 120) users are kept with p < 1 and the unscaled sample biases
    the dissimilarity upwards), publications, the mean publication budget of the (120, 0.6)
    class in shares of 0.6 / 240 at the published slots, and the share of publications whose
    threshold is above the lowest live budget (some class kept with p < 1).
(d) With ``--ablation`` (instead of (a)-(c)): the du-code kernel in the budget sweep at o = 0.7
    and at o = 0.9 with DC's sample as is, rescaled by the keep probability (Horvitz-Thompson)
    and not sampled at all (both with the switched threshold's noise): AMRE and publications.
(e) Options for (b)-(c): ``--mechanisms pba,pbd`` adds wevent's PBD (its kernels in the same
    variants; rows named "PBA ..." and "PBD ..."), ``--settings`` keeps some of the four settings
    and ``--shuffle 1,2`` runs each setting once more for each shuffle SEED given, with the
    slots in `pwsm_absolute.slot_order(slots, SEED)` (a random stand-in for the authors'
    runner's order: it reads its per-slot files in unsorted `File.listFiles` order,
    DatasetSegmentRunUtils.java lines 26 and 91; one order for every data seed, as one directory
    listing would give; rows "SETTING, shuffled SEED"). The change column then compares the last
    two ratios given, 1 - X(o_last) / X(o_before). A run the guard refuses (the sound PBD kernel
    restarted, setting ``runner``; with ``--guard-all`` also du-code PBA and the authors' PBD) is
    one row naming the refused slot.
(f) With ``--split S``: each row's change again over slots 1..S and over S+1..T separately (the
    mean AMRE of each part at the two ratios and its paired change), to tell the start-up window
    (S = 120, the w = 120 class's window) from the rest of the stream.

Sizes. N = 10,000 users (001's synthetic N per analysis/pwsm_absolute.py), default 2,000 slots
(001 has 10,000), seeds 0-1, Sin and Log, o in {0.1, 0.7, 0.9}: 96 runs.

Expected outcome (measured; wall times on the 2-core machine under ``nice -n 10`` beside other
jobs). At 10,000 slots, seeds 0-4, all three streams (the second command), 1 - PBA(0.9) /
PBA(0.7) is negative (a rise) for the sound kernel with or without the authors' runner and
positive (a drop) for the du-code kernel with or without it; means over the seeds on TLNS, Sin,
Log: sound -29.7%, -38.1%, -18.0%; runner -25.8%, -30.8%, -20.2%; du-code 68.1%, 67.7%, 66.9%;
authors 36.1%, 20.9%, 33.5%; every 95% interval excludes 0. At o = 0.9 DC samples at every
slot and publications rise (TLNS: sound 1,709 -> 2,104, du-code 5,840 -> 9,045 of 10,000). In
the window sweep no setting changes anything at N = 10,000 (DC never switches: n_lo = 1,000 >
798); at N = 5,000 PBA's mean drops there in every setting.

With the slots scrambled (the last command below: the authors' setting, PBA and PBD, in order
and in `slot_order` seeds 1 and 2, 3,000 slots, seeds 0-2, o in {0.1, 0.5, 0.9}; 18 min 30 s
wall, 613 s CPU, at a load average of 1.8 rising to 8.3 beside other jobs), 1 - X(0.9)/X(0.5)
paired per seed: in the window sweep PBA's AMRE is the same number at every o on every stream in
every order (DC samples and sampled publications 0%: OBS never leaves the lowest budget), so no
order can make it drop; PBD's mean drops on every stream in every order (19-55% in order,
33-59% shuffled; the interval excludes 0 on Log in order and in 5 of the 6 shuffled rows), its
publication threshold above the lowest budget at 20-24% (in order) and 33-49% (shuffled) of
publications at o = 0.9, none at 0.5. In the budget sweep PBA is the same at o = 0.1 and 0.5
and its mean drops at 0.9, by 5-45% in order (decided on Log only) and 45-63% shuffled (decided
in all 6 rows); PBD's mean goes either way (-45% to 61%; decided only on Log in order and TLNS
shuffled 1, both drops). Three seeds decide little. PBD in the `runner` setting (the sound
kernel restarted) is refused by the guard at its first publication after a restart (slot 251
or 252): the table prints that row as "not w-event private". The authors' PBD, charged to the
guard (``--guard-all``, the last two commands), is refused the same way: at slot 251 in all 8
runs of those commands; the unrestarted du-code PBD is accepted in all 8 (Sin, 1,000 users, 300
slots, both sweeps, o = 0.1 or 0.9, in order and in `slot_order` seed 1). The authors' PBD
numbers above are therefore unchecked, like the du-code PBA's.

Commands (from the repository root):

    .venv/bin/python analysis/pwsm_ratio_ducode.py                  # 2 min
    .venv/bin/python analysis/pwsm_ratio_ducode.py --slots 10000 --seeds 5 \
        --datasets lns,sin,log --sweeps eps --ratios 0.7,0.9 --no-check   # 9 min 32 s
    .venv/bin/python analysis/pwsm_ratio_ducode.py --slots 10000 --seeds 3 \
        --datasets lns,sin,log                                          # 14 min
    .venv/bin/python analysis/pwsm_ratio_ducode.py --users 5000 --sweeps w,eps --no-check  # 108 s
    .venv/bin/python analysis/pwsm_ratio_ducode.py --ablation       # (d) only: 14 s
    .venv/bin/python analysis/pwsm_ratio_ducode.py --slots 3000 --seeds 3 \
        --datasets lns,sin,log --sweeps w,eps --ratios 0.1,0.5,0.9 --no-check \
        --mechanisms pba,pbd --settings authors --shuffle 1,2   # scrambled: 18 min 30 s
    .venv/bin/python analysis/pwsm_ratio_ducode.py --users 1000 --slots 300 --seeds 1 \
        --datasets sin --sweeps w,eps --ratios 0.1 --no-check --mechanisms pbd \
        --settings runner,du-code,authors --guard-all --shuffle 1   # refusals: 25 s
    (the same with --ratios 0.9)
    .venv/bin/python analysis/pwsm_ratio_ducode.py --users 5000 --slots 3000 --seeds 10 \
        --datasets lns,sin,log --sweeps w,eps --ratios 0.7,0.9 --no-check \
        --settings sound,authors --split 120   # N = 5,000: 47 min 22 s at a load of 8.9
    (the same with --users 7000 --slots 2000: 39 min 11 s at a load of 9.3; with --slots 300:
    3 min 43 s at 7.3)

At N = 5,000 and 7,000 the switch falls between o = 0.7 and 0.9 in both sweeps. Window sweep,
1 - PBA(0.9)/PBA(0.7) paired over seeds 0-9, TLNS / Sin / Log: at N = 5,000 (3,000 slots) the
sound PBA 3.0% [-4.7, 10.7] / -3.4% [-11.5, 4.7] / 12.9% [7.8, 18.0] (a drop decided on Log
only), the authors' setting 38.7% / 36.9% / 53.7% (every interval above 0); at N = 7,000 (2,000
slots) the sound PBA rises (-50.5%, -47.6%, -31.9%, decided), the authors' drops on Log only
(39.5% [26.4, 52.6]). At 300 slots nothing in the window sweep is decided; ``--split 120``
finds the change over slots 1-120 undecided for the sound PBA on every stream.

It imports `pwsm_absolute` (the authors' S5 settings and the rounded TLNS walk) from its own
directory.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt
from pwsm_absolute import SETTINGS as ABSOLUTE_SETTINGS  # run from analysis/ (see its docstring)
from pwsm_absolute import probabilities, slot_order

from wevent.accounting.budget import Budget
from wevent.accounting.evidence import Evidence
from wevent.accounting.ledger import Charge
from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.accounting.spending import BudgetExceeded, ForwardingSpender
from wevent.experiments import metrics
from wevent.experiments.harness import execute
from wevent.experiments.populations import budget_ratio_population, window_ratio_population
from wevent.experiments.stats import interval
from wevent.mechanisms.allocators import algebra_for, classes_of
from wevent.mechanisms.allocators.kernel import Plan
from wevent.mechanisms.allocators.registry import kernel_for
from wevent.mechanisms.central import _SM, CentralRunner, SlotRecord, _sm
from wevent.mechanisms.sampling import obs
from wevent.mechanisms.streams import SyntheticStream
from wevent.verifier.guard import Guard
from wevent.verifier.tracing import class_groups

IntArray = npt.NDArray[np.int64]

MECHANISM: Final = "pba"
AUTHORS: Final = ABSOLUTE_SETTINGS[5]  # pwsm_absolute's S5: the authors' code's settings
assert AUTHORS.segment is not None and AUTHORS.rounded
SEGMENT: Final = AUTHORS.segment  # the authors' runner restarts every mechanism every 250 slots
DC_MODES: Final = ("as is", "rescaled", "no sampling")
DEFAULT_CLASS: Final = Fixed(120, Budget("0.6"))  # 001 Section 6.5's default type
DEFAULT_SHARE: Final = Fraction(3, 5) / 240  # one share of the default type: E / (2w)
DATASETS: Final = ("lns", "sin", "log")
NAMES: Final = {"lns": "TLNS", "sin": "Sin", "log": "Log"}
SWEEPS: Final = {"eps": budget_ratio_population, "w": window_ratio_population}


@dataclass(frozen=True)
class Setting:
    name: str
    variant: str  # the kernel variant
    runner: bool  # the authors' runner: restarts every SEGMENT slots, p_t rounded to 0.01


SETTINGS: Final = (
    Setting("sound", "sound", False),
    Setting("runner", "sound", True),
    Setting("du-code", "du-code", False),
    Setting("authors", "du-code", True),
)


class Unchecked:
    """A spender that accepts every charge and records nothing (the du-code kernel overspends;
    the guard would stop it within the first window, docs/peers.md)."""

    def __init__(self) -> None:
        self._groups: dict[str, tuple[str, ...]] = {}

    def spend(
        self,
        slot: int,
        amount: Budget,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "",
        evidence: Evidence | None = None,
    ) -> None:
        return None

    def define_group(self, name: str, members: tuple[str, ...]) -> None:
        self._groups[name] = members

    def define_group_by_index(
        self, name: str, table: Sequence[str], indices: npt.NDArray[np.int64]
    ) -> None:
        self._groups[name] = tuple(table[int(i)] for i in indices)

    def members(self, group: str) -> tuple[str, ...]:
        return self._groups[group]

    def group_size(self, group: str) -> int:
        return len(self._groups[group])


class RoundedStream(SyntheticStream):
    """wevent's synthetic stream with p_t rounded to two decimals, as the authors' generator
    does (Sin and Log: each p_t; TLNS: the walk rounded at every step, from the same normal
    draws as wevent's walk: `pwsm_absolute.probabilities` on wevent's walk generator)."""

    def __init__(self, kind: str, slots: int, class_sizes: Sequence[int], seed: int) -> None:
        super().__init__(kind, slots, class_sizes, seed)
        if kind == "lns":
            p = probabilities(kind, slots, np.random.default_rng(seed), rounded=True)
        else:
            p = np.asarray(np.round(self.probabilities, 2), dtype=np.float64)
        p.setflags(write=False)
        self._p = p


class Window:
    """Slots ``offset + 1 .. offset + length`` of ``base`` as slots 1..length (a restarted
    mechanism sees its segment from its own slot 1)."""

    def __init__(self, base: SyntheticStream | Reordered, offset: int, length: int) -> None:
        self.base, self.offset, self.length = base, offset, length

    @property
    def domain(self) -> int:
        return self.base.domain

    @property
    def slots(self) -> int:
        return self.length

    def histograms(self, slot: int, rng: np.random.Generator) -> IntArray:
        return self.base.histograms(self.offset + slot, rng)


class Reordered:
    """``base`` with its slots in ``order`` (0-based stream slots): slot t shows base slot
    ``order[t - 1] + 1``. The histograms are drawn from the caller's generator slot by slot, so
    this is the stream whose p sequence is ``base``'s permuted by ``order``, as
    `pwsm_absolute.personal_run` builds it (the authors' runner reads its per-slot files in
    `File.listFiles` order, `pwsm_absolute.slot_order`)."""

    def __init__(self, base: SyntheticStream, order: IntArray) -> None:
        if sorted(order.tolist()) != list(range(base.slots)):
            raise ValueError("the order is not a permutation of the stream's slots")
        self.base, self.order = base, order

    @property
    def domain(self) -> int:
        return self.base.domain

    @property
    def slots(self) -> int:
        return self.base.slots

    @property
    def probabilities(self) -> npt.NDArray[np.float64]:
        return np.asarray(self.base.probabilities[self.order], dtype=np.float64)

    def histograms(self, slot: int, rng: np.random.Generator) -> IntArray:
        return self.base.histograms(int(self.order[slot - 1]) + 1, rng)


class Shifted(ForwardingSpender):
    """Passes every charge to ``guard`` at ``slot + offset``: a mechanism restarted at stream
    slot ``offset + 1`` counts its slots from 1, the guard checks the stream's windows."""

    def __init__(self, guard: Guard, offset: int) -> None:
        super().__init__(guard)
        self.offset = offset

    def spend(
        self,
        slot: int,
        amount: Budget,
        *,
        user: str | None = None,
        group: str | None = None,
        part: str = "",
        mechanism: str = "",
        evidence: Evidence | None = None,
    ) -> None:
        super().spend(
            slot + self.offset,
            amount,
            user=user,
            group=group,
            part=part,
            mechanism=mechanism,
            evidence=evidence,
        )

    def spend_many(self, charges: Sequence[Charge]) -> None:
        super().spend_many([dataclasses.replace(c, slot=c.slot + self.offset) for c in charges])


@dataclass
class Probe(CentralRunner):
    """`CentralRunner` that notes, for every charge, the step, whether SM samples (some class
    kept with p < 1: the threshold is above the lowest live budget) and the default class's
    budget; ``dc_mode`` replaces DC's sample for the ablation (d): ``rescaled`` divides each
    budget's sampled counts by its keep probability (Horvitz-Thompson), ``no sampling`` keeps
    every user; both keep the switched threshold's noise."""

    default: int = -1  # index of the (120, 0.6) class, -1 if the population has none
    dc_mode: str = "as is"
    notes: list[tuple[str, bool, Fraction]] = field(default_factory=list)

    def _dissimilarity(self, t: int, plan: Plan[Fraction, bool], hist: IntArray) -> float | None:
        if self.dc_mode == "as is":
            return super()._dissimilarity(t, plan, hist)
        sm = _sm(plan.dissimilarity, self.sizes, Fraction(1, self.stream.domain))
        if sm is None:
            return None
        self._charge(t, sm, "dissimilarity")
        counts: dict[Budget, IntArray] = {}
        for c, b in zip(sm.classes, sm.budgets, strict=True):
            counts[b] = counts[b] + hist[c] if b in counts else hist[c].astype(np.int64)
        if self.dc_mode == "rescaled":
            parts = [
                sm.mech.sample_counts({b: h}, self.noise_rng) / sm.mech.keep[b]
                for b, h in counts.items()
            ]
        else:
            parts = [h.astype(np.float64) for h in counts.values()]
        estimate = np.sum(parts, axis=0)
        mean_abs = float(np.mean(np.abs(estimate - self.last_release)))
        return mean_abs + float(self.noise_rng.laplace(0.0, sm.mech.laplace.scale))

    def _charge(self, t: int, sm: _SM, part: str) -> None:
        sampled = min(sm.mech.keep.values()) < 1.0
        budget = Fraction(0)
        for c, b in zip(sm.classes, sm.budgets, strict=True):
            if c == self.default:
                budget = Fraction(b)
        self.notes.append((part, sampled, budget))
        super()._charge(t, sm, part)


@dataclass(frozen=True)
class Run:
    amre: float
    publications: int
    dc_sampled: float  # share of slots whose dissimilarity step samples
    pub_shares: float  # mean publication budget of the default class, in its shares
    pub_sampled: float  # share of publications whose threshold is above the lowest budget
    split: tuple[float, float] | None = None  # AMRE over slots 1..S and S+1..T (``--split S``)


def run(
    population: Population,
    kind: str,
    slots: int,
    seed: int,
    setting: Setting,
    dc_mode: str = "as is",
    mechanism: str = MECHANISM,
    shuffle: int | None = None,
    guard_all: bool = False,
    split: int = 0,
) -> Run:
    """``mechanism`` (PBA or PBD) under ``setting``: the data and noise generators of
    `wevent.experiments.running`. The sound kernel's charges go through wevent's `Guard` (one
    guard for the whole stream, restarted segments shifted to their stream slots), the du-code
    kernel's to `Unchecked` (with ``guard_all``, to the guard too: a check of which settings
    overspend). ``shuffle``: the slots in `slot_order(slots, shuffle)` (a random stand-in for
    the authors' unsorted file order), the same order for every seed. ``split`` S (0 < S <
    slots): also the AMRE over slots 1..S and over S+1..slots (001 Eq. 5 on each part), to
    separate the start-up window from the rest."""
    if split and not 0 < split < slots:
        raise ValueError(f"split must lie in 1..{slots - 1}, got {split}")
    sizes = [c.count for c in population.classes]
    data_seed, noise_seed, _, _ = np.random.SeedSequence(seed).spawn(4)
    data_rng = np.random.default_rng(data_seed)
    noise_rng = np.random.default_rng(noise_seed)
    base = (
        RoundedStream(kind, slots, sizes, seed)
        if setting.runner
        else SyntheticStream(kind, slots, sizes, seed)
    )
    stream = base if shuffle is None else Reordered(base, slot_order(slots, shuffle))
    classes = classes_of(population, mechanism)
    default = next((c.index for c in population.classes if c.requirement == DEFAULT_CLASS), -1)
    guard = Guard(population) if setting.variant == "sound" or guard_all else None
    unchecked = Unchecked()
    groups = class_groups(population, guard if guard is not None else unchecked)
    segment = SEGMENT if setting.runner else slots
    records: list[SlotRecord] = []
    notes: list[tuple[str, bool, Fraction]] = []
    for start in range(0, slots, segment):
        length = min(segment, slots - start)
        runner = Probe(
            kernel=kernel_for(mechanism, algebra_for("exact"), classes, setting.variant),
            spender=Shifted(guard, start) if guard is not None else unchecked,
            groups=groups,
            sizes=sizes,
            stream=Window(stream, start, length),
            data_rng=data_rng,
            noise_rng=noise_rng,
            mechanism=mechanism,
            default=default,
            dc_mode=dc_mode,
        )
        for _ in range(length):
            records.append(runner.step())
        notes += runner.notes
    release = np.stack([r.release for r in records]).astype(np.float64)
    truth = np.stack([r.truth for r in records]).astype(np.int64)
    dis = [n for n in notes if n[0] == "dissimilarity"]
    pub = [n for n in notes if n[0] == "publication"]
    published = sum(1 for r in records if r.status == "published")
    if (published and not pub) or not dis:
        raise RuntimeError("the probe recorded no charges: table (c) would be empty (stop)")
    parts = None
    if split:
        head = metrics.amre(release[:split], truth[:split])
        parts = (head, metrics.amre(release[split:], truth[split:]))
    return Run(
        amre=metrics.amre(release, truth),
        publications=published,
        dc_sampled=sum(1 for n in dis if n[1]) / max(len(dis), 1),
        pub_shares=float(statistics.mean(n[2] / DEFAULT_SHARE for n in pub)) if pub else 0.0,
        pub_sampled=sum(1 for n in pub if n[1]) / max(len(pub), 1),
        split=parts,
    )


def dc_switch(users: int) -> None:
    """(a'): the largest n_lo for which DC's OBS leaves the lowest dissimilarity budget."""
    print(
        "\n## (a') DC's threshold (wevent's `obs` on the classes' dissimilarity shares): "
        "the largest number n_lo of default-type users for which OBS picks the higher budget"
    )
    print(f"| sweep | shares (lo, hi) | switches iff n_lo <= | at N = {users:,}: from o = |")
    print("|---|---|---:|---:|")
    pairs = {
        "eps": (Fraction(3, 5) / 240, Fraction(1) / 240),
        "w": (Fraction(3, 5) / 240, Fraction(3, 5) / 80),
    }
    for sweep, (lo, hi) in pairs.items():
        n = 0
        while obs({Budget(lo): n + 1, Budget(hi): 1})[0] == Budget(hi):
            n += 1
        print(f"| {sweep}:o | {lo}, {hi} | {n:,} | {1 - n / users:.3f} |")


def check(users: int) -> None:
    """(a): the sound setting equals `harness.execute` (the reproduce path, guard in the loop)."""
    print("\n## (a) Check: this script's `sound` run against `harness.execute` (guard in the loop)")
    print("| sweep | data | o | seed | execute AMRE | script AMRE |")
    print("|---|---|---:|---:|---:|---:|")
    for sweep, o in (("eps", Fraction(9, 10)), ("w", Fraction(7, 10))):
        pop = SWEEPS[sweep](users, o, 0)
        ref = execute(MECHANISM, pop, "sin", 300, 0)
        ours = run(pop, "sin", 300, 0, SETTINGS[0])
        a = metrics.amre(ref.release, ref.truth)
        print(f"| {sweep}:o | Sin | {float(o):g} | 0 | {a:,.3f} | {ours.amre:,.3f} |")
        if a != ours.amre:
            raise SystemExit("the script's sound run differs from wevent's: stop")


def sweep_table(
    sweep: str,
    kinds: Sequence[str],
    users: int,
    slots: int,
    seeds: int,
    ratios: Sequence[Fraction],
    mechanisms: Sequence[str] = (MECHANISM,),
    settings: Sequence[Setting] = SETTINGS,
    shuffles: Sequence[int] = (),
    guard_all: bool = False,
    split: int = 0,
) -> None:
    """(b) and (c) for one sweep (and (f) with ``split`` S > 0: the change column's paired
    change over slots 1..S and over S+1..slots separately); each setting runs in order and then with the slots in
    `slot_order(slots, seed)` for each seed of ``shuffles`` (rows "SETTING, shuffled SEED").
    The change column compares the last two ratios given, paired per seed. A run the guard
    refuses is one row saying so, except in the `sound` setting (wevent's kernel, never
    restarted), where a refusal is a fault of wevent and propagates."""
    make = SWEEPS[sweep]
    label = "E = 1.0" if sweep == "eps" else "w = 40"
    start = time.time()
    names = ", ".join(m.upper() for m in mechanisms)
    print(
        f"\n## (b) {names}, {sweep}:o sweep (share o of {label} users), {users:,} users, "
        f"{slots:,} slots, seeds 0-{seeds - 1}: AMRE mean [publications]"
    )
    head = " | ".join(f"o = {float(o):g}" for o in ratios)
    compared = list(ratios[-2:]) if len(ratios) > 1 else []  # the change column's two ratios
    versus = f"1 - X({float(compared[1]):g})/X({float(compared[0]):g})" if compared else "change"
    print(f"| data | setting | {head} | {versus}: mean [95% interval], seeds min .. max |")
    print("|---|---|" + "---:|" * len(ratios) + "---|")
    mech: list[str] = []
    parts: list[str] = []
    orders: tuple[int | None, ...] = (None, *shuffles)
    for kind in kinds:
        for mechanism in mechanisms:
            for setting in settings:
                for order in orders:
                    name = setting.name if order is None else f"{setting.name}, shuffled {order}"
                    if list(mechanisms) != [MECHANISM]:
                        name = f"{mechanism.upper()} {name}"
                    by_o: dict[Fraction, list[Run]] = {}
                    try:
                        for o in ratios:
                            by_o[o] = []
                            for s in range(seeds):
                                pop = make(users, o, s)
                                by_o[o].append(
                                    run(
                                        pop,
                                        *(kind, slots, s, setting, "as is", mechanism, order),
                                        guard_all=guard_all,
                                        split=split,
                                    )
                                )
                    except BudgetExceeded as refused:  # a restarted or du-code kernel overspent
                        if setting.variant == "sound" and not setting.runner:
                            raise  # wevent's own kernel, never restarted: a fault of wevent
                        print(
                            f"| {NAMES[kind]} | {name} | not w-event private: wevent's guard "
                            f"refused a charge at slot {refused.slot} (o = {float(o):g}, "
                            f"seed {s}) |",
                            flush=True,
                        )
                        continue
                    cells = [
                        f"{statistics.mean(r.amre for r in by_o[o]):,.0f} "
                        f"[{statistics.mean(r.publications for r in by_o[o]):.0f}]"
                        for o in ratios
                    ]
                    change = ""
                    if compared:
                        mid, hi = compared
                        drop = [
                            1 - a.amre / b.amre for a, b in zip(by_o[hi], by_o[mid], strict=True)
                        ]
                        iv = interval(drop)
                        bounds = "" if iv.n < 2 else f" [{iv.low:.1%}, {iv.high:.1%}]"
                        change = f"{iv.mean:.1%}{bounds}, {min(drop):.0%} .. {max(drop):.0%}"
                    print(
                        f"| {NAMES[kind]} | {name} | " + " | ".join(cells) + f" | {change} |",
                        flush=True,
                    )
                    if compared and split:
                        parts.append(f"| {NAMES[kind]} | {name} | " + split_cells(by_o, *compared))
                    for o in compared:
                        rs = by_o[o]
                        mech.append(
                            f"| {NAMES[kind]} | {name} | {float(o):g} | "
                            f"{statistics.mean(r.dc_sampled for r in rs):.0%} | "
                            f"{statistics.mean(r.publications for r in rs):.0f} | "
                            f"{statistics.mean(r.pub_shares for r in rs):.1f} | "
                            f"{statistics.mean(r.pub_sampled for r in rs):.0%} |"
                        )
    print(f"\n(b) {sweep}:o took {time.time() - start:.0f} s")
    print(
        f"\n## (c) Mechanics, {sweep}:o sweep (means over seeds): DC samples = share of slots "
        "whose dissimilarity threshold is above the lowest budget; shares = the (120, 0.6) "
        "class's mean publication budget at published slots in units of 0.6 / 240; "
        "pub. sampled = share of publications whose threshold is above the lowest live budget "
        "(some class kept with p < 1)"
    )
    print("| data | setting | o | DC samples | publications | shares | pub. sampled |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for line in mech:
        print(line)
    if parts:
        low, high = (f"{float(o):g}" for o in compared)
        print(
            f"\n## (f) Start-up window, {sweep}:o sweep: AMRE mean over seeds at o = {low} -> "
            f"{high} over slots 1..{split} and {split + 1}..{slots}, and 1 - X({high})/X({low}) "
            "on each part, paired per seed: mean [95% interval]"
        )
        print(
            f"| data | setting | slots 1..{split} | change | slots {split + 1}..{slots} | change |"
        )
        print("|---|---|---:|---|---:|---|")
        for line in parts:
            print(line)


def split_cells(by_o: dict[Fraction, list[Run]], low: Fraction, high: Fraction) -> str:
    """(f)'s cells for one row: per part (slots 1..S, S+1..T) the mean AMRE at ``low`` and
    ``high`` and the paired change 1 - X(high) / X(low)."""
    cells = []
    for part in (0, 1):
        lo = [r.split[part] for r in by_o[low] if r.split is not None]
        hi = [r.split[part] for r in by_o[high] if r.split is not None]
        if len(lo) != len(by_o[low]) or len(hi) != len(by_o[high]):
            raise ValueError("a run without its split AMRE")
        iv = interval([1 - a / b for a, b in zip(hi, lo, strict=True)])
        bounds = "" if iv.n < 2 else f" [{iv.low:.1%}, {iv.high:.1%}]"
        cells.append(f"{statistics.mean(lo):,.0f} -> {statistics.mean(hi):,.0f}")
        cells.append(f"{iv.mean:.1%}{bounds}")
    return " | ".join(cells) + " |"


def ablation(kinds: Sequence[str], users: int, slots: int, seeds: int) -> None:
    """(d): the du-code kernel in the budget sweep with DC's sample replaced at o = 0.9."""
    start = time.time()
    setting = SETTINGS[2]
    print(
        f"\n## (d) DC ablation, du-code kernel, eps:o sweep, {users:,} users, {slots:,} slots, "
        f"seeds 0-{seeds - 1}: AMRE mean [publications]; at o = 0.9 DC's sample as is, "
        "rescaled by the keep probability (Horvitz-Thompson) and not sampled at all "
        "(the switched threshold's noise kept)"
    )
    print("| data | o = 0.7 as is | o = 0.9 as is | o = 0.9 rescaled | o = 0.9 no sampling |")
    print("|---|---:|---:|---:|---:|")
    cases = [(Fraction(7, 10), "as is")] + [(Fraction(9, 10), m) for m in DC_MODES]
    for kind in kinds:
        cells = []
        for o, mode in cases:
            rs = [
                run(budget_ratio_population(users, o, s), kind, slots, s, setting, mode)
                for s in range(seeds)
            ]
            cells.append(
                f"{statistics.mean(r.amre for r in rs):,.0f} "
                f"[{statistics.mean(r.publications for r in rs):,.0f}]"
            )
        print(f"| {NAMES[kind]} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n(d) took {time.time() - start:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0..SEEDS-1")
    parser.add_argument("--datasets", default="sin,log")
    parser.add_argument("--sweeps", default="eps,w", help="eps, w or both")
    parser.add_argument("--ratios", default="0.1,0.7,0.9")
    parser.add_argument("--no-check", action="store_true", help="skip the check (a)")
    parser.add_argument(
        "--mechanisms", default=MECHANISM, help="pba, pbd or both (comma-separated)"
    )
    parser.add_argument(
        "--settings",
        default=",".join(x.name for x in SETTINGS),
        help="a subset of " + ", ".join(x.name for x in SETTINGS),
    )
    parser.add_argument(
        "--shuffle",
        default="",
        metavar="SEEDS",
        help="also run each setting with the slots in `pwsm_absolute.slot_order(slots, SEED)` "
        "for each SEED (comma-separated; a random stand-in for the authors' unsorted file "
        "order)",
    )
    parser.add_argument(
        "--guard-all",
        action="store_true",
        help="charge the du-code settings to wevent's guard too (a check: which overspend)",
    )
    parser.add_argument(
        "--split",
        type=int,
        default=0,
        metavar="S",
        help="also (f): the change over slots 1..S and S+1..SLOTS separately (the start-up "
        "window: S = 120)",
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="only (d): the du-code kernel at o = 0.9 with DC's sample as is, rescaled, unsampled",
    )
    args = parser.parse_args()
    kinds = [k for k in args.datasets.split(",") if k]
    for k in kinds:
        if k not in DATASETS:
            parser.error(f"unknown dataset {k!r} (expected {', '.join(DATASETS)})")
    sweeps = [s for s in args.sweeps.split(",") if s]
    for s in sweeps:
        if s not in SWEEPS:
            parser.error(f"unknown sweep {s!r} (expected eps, w)")
    try:
        ratios = [Fraction(x) for x in args.ratios.split(",") if x]
    except ValueError:
        parser.error(f"--ratios: numbers between 0 and 1, got {args.ratios!r}")
    if not ratios or any(not 0 < o < 1 for o in ratios):
        parser.error(f"--ratios: numbers between 0 and 1, got {args.ratios!r}")
    mechanisms = [m for m in args.mechanisms.split(",") if m]
    if not mechanisms or any(m not in ("pba", "pbd") for m in mechanisms):
        parser.error(f"--mechanisms: pba, pbd or both, got {args.mechanisms!r}")
    by_name = {x.name: x for x in SETTINGS}
    chosen = [x for x in args.settings.split(",") if x]
    if not chosen or any(x not in by_name for x in chosen):
        parser.error(f"--settings: a subset of {', '.join(by_name)}, got {args.settings!r}")
    settings = [by_name[x] for x in chosen]
    try:
        shuffles = [int(x) for x in args.shuffle.split(",") if x]
    except ValueError:
        parser.error(f"--shuffle: comma-separated integer seeds, got {args.shuffle!r}")
    if args.users < 10 or args.slots < 1 or args.seeds < 1:
        parser.error("--users >= 10, --slots >= 1 and --seeds >= 1")
    if args.split and not 0 < args.split < args.slots:
        parser.error(f"--split: a slot in 1..{args.slots - 1} (below --slots), got {args.split}")
    start = time.time()
    names = "PBA" if args.ablation else ", ".join(m.upper() for m in mechanisms)
    print(f"# 001 Section 6.5 (Figures 11-12): {names} over the share o, the authors' settings")
    if args.ablation:
        ablation(kinds, args.users, args.slots, args.seeds)
        print(f"\ntotal {time.time() - start:.0f} s")
        return
    dc_switch(args.users)
    if not args.no_check:
        check(args.users)
    for s in sweeps:
        sweep_table(
            *(s, kinds, args.users, args.slots, args.seeds, ratios, mechanisms, settings),
            shuffles,
            args.guard_all,
            args.split,
        )
    print(f"\ntotal {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
