"""Batch research runs: many runs of a central allocator in one vectorized pass, for utility sweeps.

What a batch is, and what it is not. A batch runs R runs of one central allocator on one stream
at once: the allocator's own budget kernel (the code `wevent run` runs and `wevent prove`
proves) computes every run's budgets in one call per slot on `BatchAlgebra`, whose values are
numpy arrays over the runs, and the data path (001 Algorithms 2-4: DC's dissimilarity, the
decision, the Laplace release, the approximation; or a streamdp mechanism's own, "Mechanisms
with data paths of their own" below) is vectorized over the runs the same way.
Budgets are **double precision**, there is **no guard and no ledger**: nothing checks what a
batch spends, and its releases are for measuring utility (AMRE, AMSE, publication counts over
seeds and settings). The privacy of the allocator rests on its proved kernel; the exact, guarded
run (`wevent run`, `wevent.experiments.running.run_mechanism`) is the one to audit.

* **The stream.** One stream for every run of a batch: the histograms are drawn once, from the
  data generator of ``seed`` (as `run_mechanism` draws them at that seed); the runs differ in
  their noise only, drawn from one generator seeded by ``seed`` (its noise child, as in
  `run_mechanism`). A batch of one run draws exactly what `run_mechanism` draws at that seed
  (tests/test_batch.py compares them slot by slot). With that one shared generator a run's
  noise depends on the rest of the batch: a slot's draws are taken for the runs together, so a
  run's noise changes with the number of runs (and its place among them), and where a slot
  draws for some runs only (those that publish or sample there: bd, fast-w and rescuedp among
  others) with the other runs' decisions too, so changing one run's budget factor moves the
  other runs' releases. A run is reproducible on its own only when each run draws from a
  generator of its own (as tests/test_batch_streamdp.py does to compare every lane with the
  exact run of its seed); the batch's statistics do not depend on this.
* **Allocators and variants.** The built-in central allocators whose data path is PWSM's
  (`PwsmPath`: publish iff ``dis > sqrt(err)``) or Kellaris's (`KellarisPath`, also bd-shift's
  and ba-shift's: publish iff ``dis > scale``), in the variants `wevent gate` proves sound only
  (`SOUND_VARIANTS`): ``sound`` for every one; ``published`` for uniform, sample, bd, ba, pbd,
  pba and adapub, and ``du-code`` for bd and pbd (`wevent gate NAME --variant V` says PROVED for
  each: exact arithmetic, up to 2 classes, w <= 6, 18 slots, and a search up to w = 64 without a
  violation). A batch has no guard, so a variant that can overspend (du-code ba and pba, which
  the gate refutes and whose exact run the guard refuses at slot 2 or 3; the published dpbd
  and dpba, and DynamicWEventCode's (du-code dpbd and dpba), after a requirement change)
  would run on unchecked: it is refused before any slot,
  with the variants accepted. So are an unknown name (the registry's error, with its "did you
  mean"), a third-party ``module:attribute`` or entry point
  (`wevent.experiments.harness.execute_many` runs many seeds of it exactly), and another model.
* **Mechanisms with data paths of their own.** dsat, adapub, pegasus, fast-w and rescuedp (the
  streamdp mechanisms, `LANE_PATHS`) run their own kernels on `BatchAlgebra` as above and their
  own data paths restated over lanes in `wevent.mechanisms.batch_streamdp` (DSAT's threshold
  and its feedback, AdaPub's deviation and release, PeGaSus's perturber with the registered
  path's new group at every slot, FAST's and RescueDP's Kalman filters and PID schedules,
  RescueDP's grouping of cells, each per lane), in the variants the gate proves: ``sound``, and
  ``published`` for adapub (dsat's ``streamdp-code`` is refuted; rescuedp's ``published`` is
  not gated here). A batch of one run draws exactly what `run_mechanism` draws, and each lane of a
  batch is the exact run of its seed and budget factor when it draws from that run's generator
  (tests/test_batch_streamdp.py).
* **Sampling.** Every class with users and a positive budget has the same budget in every slot
  of every run: SM then keeps every user and OBS's threshold is that budget (001 Algorithm 1
  with one distinct budget), so no keep probability is ever computed from a double. This holds
  for every allocator on one requirement class, and for the non-personalized allocators
  (uniform, sample, bd, ba, bd-shift, ba-shift: every class served with one budget) on any
  population. A personalized allocator (pbd, pba, dpbd, dpba) on two or more requirement
  classes is refused before any slot: their budgets differ, and SM's sampling needs the exact
  budgets (`execute_many` runs such sweeps exactly).
* **Comparisons.** The exact kernel meets exact ties (an absorption count ``eps_l / share - 1``
  that is an integer; a window's remaining budget that is 0). In doubles those come out a few
  units in the last place off, so `BatchAlgebra` rounds a ratio within ``2^-24`` of an integer
  to it, and compares budgets with a tolerance of ``2^-36`` times the batch's largest budget:
  a value within that of 0 counts as 0 (tests/test_batch.py holds batch plans to the exact
  kernel's within 1e-12 relative on random decisions over up to 16 slots).
* **The limit of the tolerance.** A budget that is positive in exact arithmetic but at most the
  tolerance counts as 0 too: where every class's publication budget is that small the sound
  variant nullifies the slot (the exact kernel plans the tiny budget, and the data path then
  publishes or skips), and a dissimilarity or publication budget that small gives its run no
  estimate or no release. The distribution kernels (bd, pbd, dpbd, bd-shift) halve the
  remaining publication budget at each publication: a run that publishes at slots 1..k of a
  window plans ``eps / 2^(k+2)`` at slot k+1 (the window's publication budget ``eps/2`` halved
  k+1 times), 2^-36 of eps at about k = 35, which needs a window of w >= 36
  (tests/test_batch.py: w = 40, eps = 3/10, every slot published: the batch nullifies slot 36,
  where the exact run publishes; with w <= 35 the budget comes back up first). The tolerance is
  relative to the batch's largest budget, so with budget factors a run whose budgets are 2^-j
  of the largest gets there j publications sooner (factors 1/4 and 4: the first run from
  w = 33 on). RescueDP publishing at every slot spends ``p(1) ~ 0.139`` of the room each
  time, so the room shrinks about geometrically: with counts swinging between 0 and 10^12 and
  w = 400, a batch of one equals the exact run up to slot 155 and takes slot 156's budget
  for 0, and `near_zero` counts that slot (240 of the 400 in all;
  tests/test_batch_streamdp.py). Its kernel rounds the room comparing budgets with budgets
  (`RescueKernel._round_room`), so no comparison of a unitless share meets the tolerance
  first (it did at slot 113 there, unflagged, when the kernel rounded ``room / eps``: the
  share was snapped to 0 within ``2^-24``). PWSM's and Kellaris's rules publish only when the noisy
  dissimilarity exceeds ``sqrt(2) / theta`` or ``1 / theta``, which such budgets make all but
  impossible (500 runs x 1,000 slots of bd, w = 200, never reached it). ``BatchResult.
  near_zero`` counts, per run, the slots where some budget came out within the tolerance of 0
  but above what the doubles make of an exact 0 (`near_zero`, `near_zero_floor`: 2^-44 of the
  largest budget, growing with the slot number after slot 1,024): a positive count marks a run
  where the batch may differ from the exact run (rerun that seed exactly). A halving budget
  always lands in that band on its way down, so the count sees the case above; it does not see
  a positive budget below the floor that was not in the band at an earlier slot.
* **Length.** At most `MAX_SLOTS` (100,000) slots: `Prefix` keeps running sums from slot 1,
  and a window's sum is a difference of two of them, so its rounding grows with the slot
  number (about 0.08 times the tolerance at 100,000 slots on w = 3, eps = 3/10; more than the
  tolerance at 1,000,000). A longer stream is refused: split it into batches.
* **Negative budgets.** A budget below 0 that would be spent raises `InvalidAllocation`, as
  the exact run does, one within the tolerance of 0 too (the accepted variants clip at 0 or
  never plan one).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from wevent.accounting.population import Population
from wevent.errors import InputError
from wevent.mechanisms.allocators.kernel import (
    ClassReq,
    Decl,
    DynamicClass,
    FixedClass,
    Kernel,
    classes_of,
    published_now,
)
from wevent.mechanisms.allocators.registry import (
    BUILTIN,
    available_entry_points,
    builtin_spec,
    data_path_for,
    kernel_for,
    model_of,
)
from wevent.mechanisms.batch_core import (
    BATCH_LABEL,
    LANE_PATHS,
    NOISES,
    BatchAlgebra,
    BatchResult,
    BatchUnsupported,
    Budgets,
    batch_result,
    check_signs,
    laplace,
    near_zero,
)
from wevent.mechanisms.batch_streamdp import run_lanes
from wevent.mechanisms.datapath import DataPath, KellarisPath, PwsmPath
from wevent.mechanisms.streams import Stream

__all__ = [
    "BATCH_LABEL",
    "LANE_PATHS",
    "MAX_SLOTS",
    "SOUND_VARIANTS",
    "BatchAlgebra",
    "BatchResult",
    "BatchUnsupported",
    "batch_classes",
    "batch_histograms",
    "batch_result",
    "batch_variants",
    "near_zero",
    "run_batch",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


# The longest batch: window sums are differences of running sums from slot 1 (`Prefix`), whose
# rounding grows with the slot number; at 100,000 slots it stays below a tenth of the budget
# tolerance (module docstring, "Comparisons").
MAX_SLOTS: Final = 100_000


# The variants `wevent gate ALLOCATOR --variant V` proves (PROVED, exact arithmetic) besides
# ``sound`` (module docstring, "Allocators and variants"); every other allocator runs its
# ``sound`` variant only. Refuted: du-code ba and pba (window [1, 2] holds 5/4 of eps = 1), the
# published and the du-code dpbd and dpba (after a requirement change), dsat's streamdp-code.
SOUND_VARIANTS: Final[dict[str, tuple[str, ...]]] = {
    "uniform": ("sound", "published"),
    "sample": ("sound", "published"),
    "bd": ("sound", "published", "du-code"),
    "ba": ("sound", "published"),
    "pbd": ("sound", "published", "du-code"),
    "pba": ("sound", "published"),
    "adapub": ("sound", "published"),
}


def _lane_budget(alg: BatchAlgebra, eps: Fraction, factors: Sequence[Fraction] | None) -> Any:
    if factors is None:
        return alg.const(eps)
    return alg._frozen(alg.lanes_of([float(eps * f) for f in factors]))


def batch_classes(
    alg: BatchAlgebra,
    classes: Sequence[ClassReq[Fraction]],
    factors: Sequence[Fraction] | None = None,
) -> list[ClassReq[FloatArray]]:
    """Exact requirement classes as lane classes; ``factors[r]`` (one per run) multiplies every
    budget of run r (each product exact, then rounded once to a double): an eps sweep in one
    batch. Windows and declaration slots are Python integers, the same in every run."""
    if factors is not None:
        if len(factors) != alg.runs:
            raise InputError(f"factors: one per run ({alg.runs}), got {len(factors)}")
        if any(Fraction(f) <= 0 for f in factors):
            raise InputError("factors must be positive")
    out: list[ClassReq[FloatArray]] = []
    for c in classes:
        if isinstance(c, FixedClass):
            out.append(FixedClass(c.w, _lane_budget(alg, c.eps, factors)))
        else:
            out.append(
                DynamicClass(
                    tuple(
                        Decl(
                            d.slot,
                            d.w_back,
                            _lane_budget(alg, d.eps_back, factors),
                            d.w_fwd,
                            _lane_budget(alg, d.eps_fwd, factors),
                        )
                        for d in c.decls
                    )
                )
            )
    return out


def _largest_budget(
    classes: Sequence[ClassReq[Fraction]], factors: Sequence[Fraction] | None
) -> float:
    eps: list[Fraction] = []
    for c in classes:
        if isinstance(c, FixedClass):
            eps.append(c.eps)
        else:
            eps.extend(x for d in c.decls for x in (d.eps_back, d.eps_fwd))
    top = max(eps) * (max(Fraction(f) for f in factors) if factors else 1)
    return float(top) if top > 0 else 1.0


def batch_histograms(stream: Stream, slots: int, seed: int) -> IntArray:
    """The stream's histograms of slots 1..slots, shape (slots, classes, d), drawn from the data
    generator `run_mechanism` uses at ``seed``: one stream for every run of a batch, reusable
    across the batches of a sweep."""
    if slots > stream.slots:
        raise InputError(f"slots: {slots} is more than the stream's {stream.slots} slots")
    data_seed = np.random.SeedSequence(seed).spawn(4)[0]
    rng = np.random.default_rng(data_seed)
    out: IntArray = np.stack([stream.histograms(t, rng) for t in range(1, slots + 1)])
    return out


def _rule_of(path: DataPath | None, allocator: str) -> str:
    """ "pwsm" or "kellaris": the decision rule of a data path the batch reproduces."""
    if path is None:
        return "pwsm"
    cls = type(path)
    same = all(
        getattr(cls, m) is getattr(PwsmPath, m) for m in ("dissimilarity", "publish", "approximate")
    )
    if isinstance(path, PwsmPath) and same:
        if cls.decide is PwsmPath.decide:
            return "pwsm"
        if cls.decide is KellarisPath.decide:
            return "kellaris"
    raise BatchUnsupported(
        f"{allocator}: its data path ({cls.__name__}) is not PWSM's or Kellaris's, nor one of "
        f"the lane paths of wevent.mechanisms.batch_streamdp ({', '.join(LANE_PATHS)}); a batch "
        "vectorizes those only (run it with `wevent run` or execute_many)"
    )


def batch_variants(allocator: str) -> tuple[str, ...]:
    """The variants a batch runs ``allocator`` with: those `wevent gate` proves sound
    (`SOUND_VARIANTS`); every other variant is refused (module docstring, "Allocators and
    variants")."""
    return SOUND_VARIANTS.get(allocator, ("sound",))


def _check_allocator(allocator: str, variant: str, population: Population) -> None:
    """Refuse, before any slot, what a batch does not run: a third-party allocator, an unknown
    name (the registry's error), another model, a variant the gate does not prove sound, and a
    personalized allocator on two or more requirement classes."""
    if ":" in allocator or (allocator not in BUILTIN and allocator in available_entry_points()):
        raise BatchUnsupported(
            f"{allocator}: a third-party allocator; a batch runs the built-in central "
            "allocators only (run many seeds of it exactly with "
            "wevent.experiments.harness.execute_many)"
        )
    model = model_of(allocator)
    if model is None:
        builtin_spec(allocator)  # the registry's unknown-allocator error, with "did you mean"
    if model != "central":
        raise BatchUnsupported(
            f"{allocator}: a batch runs the built-in central allocators ({allocator} is "
            f"{model}; run it with `wevent run` or execute_many)"
        )
    accepted = batch_variants(allocator)
    if variant not in accepted:
        raise BatchUnsupported(
            f"{allocator}: a batch runs only the variants `wevent gate` proves sound, for "
            f"{allocator}: {', '.join(accepted)} (got {variant!r}; a batch has no guard, so "
            "an overspending variant would run on unchecked: run it exactly with `wevent run "
            "--variant`, whose guard refuses an overspend)"
        )
    classes = population.classes
    if BUILTIN[allocator].scaling == "per-class" and len(classes) > 1:
        raise BatchUnsupported(
            f"{allocator} is personalized and the population has {len(classes)} requirement "
            "classes: their budgets differ, and SM would sample users with keep probabilities "
            "computed from exact budgets, which a batch does not hold (run such sweeps exactly "
            "with execute_many; a batch runs it on one requirement class)"
        )


def run_batch(
    allocator: str,
    population: Population,
    stream: Stream | IntArray,
    *,
    slots: int,
    runs: int,
    seed: int = 1,
    variant: str = "sound",
    factors: Sequence[Fraction] | None = None,
    keep_releases: bool = False,
    noise: str = "fast",
    noise_rng: np.random.Generator | None = None,
) -> BatchResult:
    """``runs`` runs of the central ``allocator`` on ``population`` over ``slots`` slots of
    ``stream`` in one vectorized pass (module docstring: double precision, no guard, no ledger).

    ``stream``: a `Stream` (its histograms drawn with ``seed``'s data generator) or the
    histograms themselves, shape (slots, classes, d) (`batch_histograms`, reused across the
    batches of a sweep). ``factors``: per run, a factor on every budget (an eps sweep in one
    batch). ``noise``: ``fast`` or ``numpy`` (`batch_core.laplace`); ``noise_rng``: the noise generator
    (default: ``seed``'s noise generator, as `run_mechanism` builds it). dsat, adapub, pegasus
    fast-w and rescuedp run their own data paths over lanes (`wevent.mechanisms.batch_streamdp`)."""
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise InputError(f"slots: a positive number of slots, got {slots!r}")
    if slots > MAX_SLOTS:
        raise BatchUnsupported(
            f"slots: {slots} is more than a batch's {MAX_SLOTS:,} (its window sums are "
            "differences of running sums from slot 1, whose rounding grows with the slot "
            "number; module docstring, 'Comparisons'): split the stream into batches of at most "
            f"{MAX_SLOTS:,} slots, or run it exactly with `wevent run`"
        )
    if noise not in NOISES:
        raise InputError(f"noise: expected one of {', '.join(NOISES)}, got {noise!r}")
    _check_allocator(allocator, variant, population)
    if isinstance(stream, np.ndarray):
        hists = np.asarray(stream, dtype=np.int64)
        if hists.ndim != 3 or hists.shape[0] < slots:
            raise InputError(
                f"histograms: expected shape (>= {slots} slots, classes, d), got {hists.shape}"
            )
        hists = hists[:slots]
        origin = "given histograms"
    else:
        hists = batch_histograms(stream, slots, seed)
        origin = f"seed {seed}"
    d = int(hists.shape[2])
    sizes_list = [c.count for c in population.classes]
    if hists.shape[1] != len(sizes_list):
        raise InputError(
            f"histograms: {hists.shape[1]} classes for a population of {len(sizes_list)}"
        )
    exact = classes_of(population, allocator)
    alg = BatchAlgebra(runs, _largest_budget(exact, factors))
    kernel: Kernel[Any, Any, Any] = kernel_for(
        allocator, alg, batch_classes(alg, exact, factors), variant
    )
    rng = (
        noise_rng
        if noise_rng is not None
        else np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[1])
    )
    noise_origin = "given generator" if noise_rng is not None else f"seed {seed}"
    if allocator in LANE_PATHS:  # a data path of its own, over lanes (batch_streamdp)
        fields = run_lanes(
            allocator, alg, kernel, hists, sizes_list, noise=noise, rng=rng, keep=keep_releases
        )
        return batch_result(
            allocator, variant, runs, slots, seed, origin, noise_origin, sum(sizes_list), fields
        )
    rule = _rule_of(data_path_for(allocator, d), allocator)
    has_users = np.array([n > 0 for n in sizes_list], dtype=np.bool_)
    users = sum(sizes_list)

    # Cells first: (d, runs), so a sum over cells adds d rows of the runs.
    last = np.zeros((d, runs))
    sq_err = np.zeros(runs)
    abs_err = np.zeros(runs)
    published = np.zeros(runs, dtype=np.int64)
    nullified_n = np.zeros(runs, dtype=np.int64)
    near_n = np.zeros(runs, dtype=np.int64)
    releases = np.empty((slots, d, runs)) if keep_releases else None
    truth = hists.sum(axis=1)
    inv_d = 1.0 / d
    block = min(slots, 32)
    kept = np.empty((block, d, runs))  # the releases of the current block of slots
    state = kernel.start()
    for t in range(1, slots + 1):
        hist = hists[t - 1]
        plan = kernel.plan(state, t)
        check_signs(alg, t, allocator, plan)
        near_n += near_zero(alg, plan, t)
        forced = alg.runs_of(plan.forced)
        nullified = alg.runs_of(plan.nullified)
        # 001 Algorithm 3 (DC): the mean absolute difference to the last release, Laplace noise
        # of scale (1/d) / theta (sensitivity 1/d), for every run with a dissimilarity budget.
        dis_b = Budgets(alg, plan.dissimilarity, has_users, t, "dissimilarity")
        if dis_b.all:
            diff = np.abs(dis_b.counts(hist, None) - last).sum(axis=0) / d
            dis = diff + laplace(rng, noise, inv_d / dis_b.theta, (runs,))
        else:
            dis = np.full(runs, np.nan)
            rows = np.flatnonzero(dis_b.any)
            if len(rows):
                diff = np.abs(dis_b.counts(hist, rows) - last[:, rows]).sum(axis=0) / d
                dis[rows] = diff + laplace(rng, noise, inv_d / dis_b.theta[rows], (len(rows),))
        # the decision (001 Algorithm 4 line 7, or Kellaris's rule) at the publication budget
        pub_b = Budgets(alg, plan.publication, has_users, t, "publication")
        scale = 1.0 / pub_b.theta
        # (NaN, where a run has no budget, compares False without a warning)
        if rule == "pwsm":  # err = 2 / theta^2: SM keeps every user, no sampling error
            decision = dis > np.sqrt(2.0 / (pub_b.theta * pub_b.theta))
        else:
            decision = dis > scale
        if not pub_b.all:
            decision &= pub_b.any
        publish = alg.runs_of(published_now(alg, plan, alg.lanes_of(decision, np.bool_)))
        # 001 Algorithm 2: Laplace noise of scale 1/theta on every cell of the runs that publish
        # with a positive budget; the others repeat their last release.
        out = publish if pub_b.all else publish & pub_b.any
        if out.all():
            last = pub_b.counts(hist, None) + laplace(rng, noise, scale, (d, runs))
        else:
            rows = np.flatnonzero(out)
            if len(rows):
                last[:, rows] = pub_b.counts(hist, rows) + laplace(
                    rng, noise, scale[rows], (d, len(rows))
                )
        state = kernel.step(state, t, plan, alg.lanes_of(publish, np.bool_))
        published += publish  # status_of's "published": forced, or decided and not nullified
        nullified_n += nullified & ~forced
        k = (t - 1) % block
        kept[k] = last
        if k == block - 1 or t == slots:  # the errors of a block of slots at once
            diff = kept[: k + 1] - truth[t - k - 1 : t, :, None]
            abs_err += np.abs(diff).sum(axis=(0, 1))
            diff *= diff
            sq_err += diff.sum(axis=(0, 1))
            if releases is not None:
                releases[t - k - 1 : t] = kept[: k + 1]
    return batch_result(
        allocator,
        variant,
        runs,
        slots,
        seed,
        origin,
        noise_origin,
        users,
        {
            "sq_err": sq_err,
            "abs_err": abs_err,
            "truth": truth,
            "published": published,
            "nullified": nullified_n,
            "near_zero": near_n,
            "releases": releases,
        },
    )
