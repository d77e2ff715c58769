"""001 Section 6.5, Figure 12 (window sweep w:o): can 001's PBA drop at o = 0.9 with 10,000 users?

Claim. 001 Section 6.5: every user has E = 0.6, a share o has w = 40 and the rest w = 120; "when
the users' quantity ratio of ... w_k = 40 exceeds 0.8, we can see a significant decrease in AMRE
for PBD and PBA", because OBS (001 Algorithm 1) then picks the higher budget. wevent's PBA has
the same AMRE at every o at N = 10,000 (`wevent reproduce pwsm-ratio`; `pwsm_ratio_ducode.py`,
four kernel/runner settings, 10,000 slots).

The calculation (this script, from wevent's `obs`, 001 Algorithm 1 with 001 Definitions 12-13):

(a) OBS's choice per o at N = 10,000. The dissimilarity step (001 Algorithm 5 line 2, Algorithm
    3) offers the budgets E / (2w): 0.6/240 (w = 120) and 0.6/80 (w = 40). The publication step
    (Algorithm 5 line 13) offers (E / (2w)) min(t_A, w) after t_A absorbed slots: the same 1 : 3
    ratio for t_A <= 40, then 3 : 3 at t_A = 120. The table gives, per step, the largest number
    n_lo of w = 120 users for which OBS leaves their budget (a switch), for t_A = 1..120: 798 in
    the dissimilarity step, at most 798 in the publication step (largest at t_A = 1). At
    N = 10,000 n_lo = (1 - o) N >= 1,000 for o <= 0.9, so OBS picks the w = 120 budget in every
    step at every o of the sweep.
(b) What follows (001 Algorithm 5 as printed): with the lowest budget as threshold, SM keeps every
    user (the w = 40 users' budgets are above it: keep probability 1), the Laplace scale is that
    of the w = 120 budget, and err_opt (line 15) is 2 / theta^2 with no sampling term, none of
    which depends on o; the nullification bound max_i t_{i,N} (line 7) is the w = 120 class's,
    present at every o < 1. Given the same data and seeds, PBA's releases are identical at
    every o: its AMRE cannot drop. The script measures it: wevent's PBA (`pwsm_ratio_ducode.run`,
    sound setting, guard in the loop) at o = 0.1, 0.5, 0.9.
(c) What would move the switch into (0.7, 0.9] (the printed drop happens at o = 0.9 only):
    N in (n*/0.3, n*/0.1] for the switch point n* (both sweeps at once); at N = 10,000, a factor
    I^2 on err_dp (a sensitivity I in 001 Lemma 1's 2 I^2 / eps^2; Definition 13 and the authors'
    `MechanismErrorUtils.getDPError` use 1); a larger E for the w = 40 users; and 001 Section
    6.2's other statement of this sweep (budgets {0.5, 1.0}, windows {10, 20}, o the share of
    w = 10), whose switch points are printed too.
(d) With ``--simulate``: the I = 2 what-if (OBS weighs 2 I^2 / theta^2, the mechanism unchanged,
    every charge still checked by wevent's guard) at N = 10,000, o = 0.7 and 0.9, Sin and Log:
    does PBA drop?

Commands (from the repository root; wall times on the shared 2-core machine):

    .venv/bin/python analysis/pwsm_window_obs.py               # (a)-(c) and (b)'s runs: 17 s
    .venv/bin/python analysis/pwsm_window_obs.py --quick       # 300 slots, 1 seed: 3 s
    .venv/bin/python analysis/pwsm_window_obs.py --simulate    # + (d), 2,000 slots, seeds 0-1: 71 s
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction

import pwsm_ratio_ducode as ducode  # run from analysis/ (it imports its sibling pwsm_absolute)

import wevent.mechanisms.central as central
import wevent.mechanisms.sampling as sampling
from wevent.accounting.budget import Budget
from wevent.experiments.populations import window_ratio_population
from wevent.experiments.stats import interval

E = Fraction(3, 5)
W_LO, W_HI = 120, 40  # the default window and the swept one
RATIOS = tuple(Fraction(k, 10) for k in (1, 3, 5, 7, 9))


def switch_point(lo: Fraction, hi: Fraction) -> int:
    """Largest n_lo for which OBS, offered n_lo users at budget ``lo`` and one at ``hi``, picks
    ``hi`` (0 if it never does). OBS's choice depends on n_lo only, not on the hi users'
    count (they are not sampled)."""
    if obs_pick(lo, hi, 1) != hi:
        return 0
    low, high = 1, 1
    while obs_pick(lo, hi, high) == hi:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if obs_pick(lo, hi, mid) == hi else (low, mid)
    return low


def obs_pick(lo: Fraction, hi: Fraction, n_lo: int) -> Fraction:
    return Fraction(sampling.obs({Budget(lo): n_lo, Budget(hi): 1})[0])


def step_points(e_lo: Fraction, w_lo: int, e_hi: Fraction, w_hi: int) -> tuple[int, int, int]:
    """(dissimilarity step's n*, the publication step's largest n* over t_A = 1..max w, the t_A
    where it is largest) for classes (w_lo, e_lo) (the n_lo users) and (w_hi, e_hi)."""
    share_lo, share_hi = e_lo / (2 * w_lo), e_hi / (2 * w_hi)
    dc = switch_point(share_lo, share_hi) if share_hi > share_lo else 0
    best, at = 0, 0
    for t_a in range(1, max(w_lo, w_hi) + 1):
        lo, hi = share_lo * min(t_a, w_lo), share_hi * min(t_a, w_hi)
        n = switch_point(lo, hi) if hi > lo else 0
        if n > best:
            best, at = n, t_a
    return dc, best, at


def n_range(point: int) -> str:
    """Users N for which the switch (n_lo = (1 - o) N <= point) happens at o = 0.9, not 0.7."""
    if point == 0:
        return "none"
    return f"{math.floor(point / Fraction(3, 10)) + 1:,}-{math.floor(point / Fraction(1, 10)):,}"


@contextmanager
def sensitivity(i: Fraction) -> Iterator[None]:
    """OBS weighs the noise error as 2 I^2 / theta^2 (the mechanism itself is unchanged)."""
    original = sampling.noise_error

    def weighted(theta: float) -> float:
        return float(i * i) * original(theta)

    sampling.noise_error = weighted
    central._SM_CACHE.clear()
    try:
        yield
    finally:
        sampling.noise_error = original
        central._SM_CACHE.clear()


def switch_table(users: int) -> None:
    print(
        "\n### (a) Where OBS leaves the lowest budget (wevent's `obs`): the largest n_lo "
        "(users of the lower-share class) for which it switches"
    )
    print(
        "| setting | classes (w, E): n_lo users / the others | dissimilarity step n* | "
        "publication step n* (t_A) | switches at o (N = 10,000) | N for a switch at o = 0.9 "
        "only |"
    )
    print("|---|---|---:|---:|---|---|")
    rows = [
        ("001 Sec. 6.5, window sweep", (E, W_LO), (E, W_HI)),
        ("001 Sec. 6.5, budget sweep", (E, 120), (Fraction(1), 120)),
        ("001 Sec. 6.2, windows, E = 0.5", (Fraction(1, 2), 20), (Fraction(1, 2), 10)),
        ("001 Sec. 6.2, windows, E = 1.0", (Fraction(1), 20), (Fraction(1), 10)),
    ]
    for e_hi in (Fraction(4, 5), Fraction(1), Fraction(3, 2), Fraction(2)):
        rows.append((f"window sweep, w = 40 users at E = {float(e_hi):g}", (E, W_LO), (e_hi, W_HI)))
    for name, (e_lo, w_lo), (e_hi, w_hi) in rows:
        dc, pub, at = step_points(e_lo, w_lo, e_hi, w_hi)
        point = max(dc, pub)
        at_o = [f"{float(o):g}" for o in RATIOS if (1 - o) * users <= point]
        print(
            f"| {name} | ({w_lo}, {float(e_lo):g}) / ({w_hi}, {float(e_hi):g}) | {dc:,} | "
            f"{pub:,} ({at}) | {', '.join(at_o) or 'none'} | {n_range(point)} |"
        )
    print(
        "\nAt N = 10,000, the OBS factor I^2 on err_dp for which the window sweep's dissimilarity "
        "step switches at o = 0.9 (n_lo = 1,000) but not at o = 0.7 (n_lo = 3,000):"
    )
    found = []
    for tenth in range(10, 41):
        i = Fraction(tenth, 10)
        with sensitivity(i):
            n = switch_point(E / (2 * W_LO), E / (2 * W_HI))
        if 1_000 <= n < 3_000:
            found.append((i, n))
    if found:
        (i0, n0), (i1, n1) = found[0], found[-1]
        print(
            f"I = {float(i0):g} to {float(i1):g} in steps of 0.1 (n* = {n0:,} to {n1:,}); "
            "I = 1 gives 798"
        )
    else:
        print("none in I = 1.0-4.0")
    with sensitivity(Fraction(2)):
        budget = switch_point(E / 240, Fraction(1) / 240)
    print(f"With I = 2 the budget sweep's dissimilarity step switches for n_lo <= {budget:,}.")


def choices(users: int) -> None:
    print(
        f"\n### (b) OBS's choice at N = {users:,} per o: dissimilarity step, and publication "
        "step for t_A = 1..120 absorbed slots (the threshold as a multiple of the w = 120 share)"
    )
    print("| o | n_lo | dissimilarity: theta / share | publication: thresholds over t_A |")
    print("|---:|---:|---:|---|")
    share_lo, share_hi = E / (2 * W_LO), E / (2 * W_HI)
    for o in RATIOS:
        n_hi = round(o * users)
        n_lo = users - n_hi
        dc = Fraction(sampling.obs({Budget(share_lo): n_lo, Budget(share_hi): n_hi})[0])
        lowest = True
        for t_a in range(1, 121):
            lo, hi = share_lo * min(t_a, W_LO), share_hi * min(t_a, W_HI)
            theta = Fraction(sampling.obs({Budget(lo): n_lo, Budget(hi): n_hi})[0])
            lowest = lowest and theta == min(lo, hi)
        pub = "the lowest budget at every t_A" if lowest else "switches at some t_A"
        print(f"| {float(o):g} | {n_lo:,} | {dc / share_lo} | {pub} |")


def measured(users: int, slots: int, seeds: int, kinds: Sequence[str]) -> None:
    start = time.monotonic()
    print(
        f"\n### (b) Measured: wevent's PBA (sound setting, guard in the loop), {users:,} users, "
        f"{slots:,} slots, seeds 0-{seeds - 1}: AMRE [publications] per o"
    )
    head = " | ".join(f"o = {float(o):g}" for o in (RATIOS[0], RATIOS[2], RATIOS[4]))
    print(f"| data | seed | {head} | identical |")
    print("|---|---:|---:|---:|---:|---|")
    for kind in kinds:
        for seed in range(seeds):
            runs = [
                ducode.run(
                    window_ratio_population(users, o, seed), kind, slots, seed, ducode.SETTINGS[0]
                )
                for o in (RATIOS[0], RATIOS[2], RATIOS[4])
            ]
            same = all(
                r.amre == runs[0].amre and r.publications == runs[0].publications for r in runs
            )
            cells = " | ".join(f"{r.amre:,.1f} [{r.publications}]" for r in runs)
            print(f"| {ducode.NAMES[kind]} | {seed} | {cells} | {'yes' if same else 'NO'} |")
    print(f"({time.monotonic() - start:.0f} s)")


def what_if(users: int, slots: int, seeds: int, kinds: Sequence[str]) -> None:
    start = time.monotonic()
    print(
        f"\n### (d) OBS with I = 2 (err_dp = 8 / theta^2), {users:,} users, {slots:,} slots, "
        f"seeds 0-{seeds - 1}, wevent's PBA (sound, guard in the loop): AMRE [publications]"
    )
    print("| data | I | o = 0.7 | o = 0.9 | 1 - PBA(0.9)/PBA(0.7): mean [95% interval] |")
    print("|---|---:|---:|---:|---|")
    for kind in kinds:
        for i in (Fraction(1), Fraction(2)):
            by_o: dict[Fraction, list[ducode.Run]] = {}
            with sensitivity(i):
                for o in (RATIOS[3], RATIOS[4]):
                    by_o[o] = [
                        ducode.run(
                            window_ratio_population(users, o, s), kind, slots, s, ducode.SETTINGS[0]
                        )
                        for s in range(seeds)
                    ]
            drop = [
                1 - a.amre / b.amre for a, b in zip(by_o[RATIOS[4]], by_o[RATIOS[3]], strict=True)
            ]
            iv = interval(drop)
            bounds = f" [{iv.low:.1%}, {iv.high:.1%}]" if iv.n > 1 else ""
            cells = " | ".join(
                f"{statistics.mean(r.amre for r in by_o[o]):,.0f} "
                f"[{statistics.mean(r.publications for r in by_o[o]):.0f}]"
                for o in (RATIOS[3], RATIOS[4])
            )
            print(f"| {ducode.NAMES[kind]} | {i} | {cells} | {iv.mean:.1%}{bounds} |")
    print(f"({time.monotonic() - start:.0f} s)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=(
            "001 Figure 12 (w:o): where OBS switches, OBS's choice per o at N = 10,000, PBA's "
            "AMRE at o = 0.1, 0.5, 0.9 (identical), and with --simulate the I = 2 what-if."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--users", type=int, default=10_000, help="N")
    parser.add_argument("--quick", action="store_true", help="300 slots, seed 0, Sin only")
    parser.add_argument("--simulate", action="store_true", help="also run the I = 2 what-if")
    parser.add_argument("--slots", type=int, default=2_000, help="slots of the what-if runs")
    parser.add_argument("--seeds", type=int, default=2, help="seeds of the what-if runs")
    args = parser.parse_args(argv)
    if args.users < 10 or args.slots < 1 or args.seeds < 1:
        parser.error("need users >= 10, slots >= 1 and seeds >= 1")
    switch_table(args.users)
    choices(args.users)
    if args.quick:
        measured(args.users, 300, 1, ("sin",))
    else:
        measured(args.users, 1_000, 2, ("sin", "log"))
    if args.simulate:
        kinds = ("sin",) if args.quick else ("sin", "log")
        slots, seeds = (300, 1) if args.quick else (args.slots, args.seeds)
        what_if(args.users, slots, seeds, kinds)


if __name__ == "__main__":
    main()
