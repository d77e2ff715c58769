"""001 Tables 5-6: why our absolute AMRE differs from the printed BD/BA/PLBU values.

Claim. 001 Section 6.3 prints AMRE (001 Eq. 5, (1/T) sum_t (1/d) ||r_t - c_t||^2 on counts) for
the synthetic streams TLNS, Sin and Log (001 Section 6.1, T = 10,000 slots): "001 Table 5"
(E = 0.2..1.0 at w = 120) and "001 Table 6" (w = 40..200 at E = 0.6). The number of users is not
stated. Our BA is 3-19 times above the printed BA and our BD far below the printed BD. This
script shows that the gap comes from settings the paper does not state, taken from the authors'
public code for 003/001 (https://github.com/dulei715/DynamicWEventCode, 2024 snapshot), and
from a defect of the authors' BA baseline:

* N = 10,000 users per synthetic stream (the repository's parameter configuration);
* BD and BA publish when the dissimilarity exceeds 1/eps_pub (Kellaris et al.'s rule), while
  wevent publishes when it exceeds the standard deviation of the publication noise,
  sqrt(2)/eps_pub for one class;
* the stream is cut into segments of 250 slots and every segment starts fresh mechanisms
  (release reset to 0, no budget history);
* p_t is rounded to two decimals (for TLNS at every step of the random walk);
* their BA stores its "last publication" once, when it is constructed, and never updates it:
  no slot is ever nullified and every publication absorbs min(t + 1, w) shares, so after w
  slots BA publishes with E/2 at every slot. That spends more than E per window (it is not
  w-event private) and gives a much lower error than a correct BA.

What it runs, all central (d = 2, binary values, counts c_t = (N - ones_t, ones_t) with ones_t
drawn Binomial(N, p_t)):

1. An independent simulator of Kellaris et al.'s BD and BA written here (it uses no wevent code)
   with each of those settings switchable, run over every cell of 001 Tables 5-6 for six
   cumulative settings S0..S5 (S0 = our rules; S5 = the authors' settings). It prints
   simulated / printed AMRE per cell and the range over the ten cells.
2. A check that the simulator in setting S0 agrees with wevent's own `ba` and `bd`
   (`wevent.experiments.harness.execute`, `wevent.experiments.metrics.amre`) on Sin and Log.
3. The PLBU fingerprint: 001's PLBU rows barely move with E and equal the error of a release
   stuck at the uniform histogram (N/2, N/2), i.e. the mean over t of
   E[(N/2 - c_t)^2] = (N/2 - N p_t)^2 + N p_t (1 - p_t). That matches only N = 10,000 and shows
   that 001's PLBU releases un-debiased GRR counts (a fair coin at eps_i / w_i ~ 0.005). PLBU is
   not in the public repository; this is inferred from the printed numbers alone.

4. With ``--ordering`` (instead of 1-3): 001's ordering of PLBU against BD (PLBU worst on Sin and
   Log, BD worse on TLNS; 001 Tables 5-6). First, from the printed numbers alone, each BD cell
   against a release stuck at zero, whose error ((N - c)^2 + c^2) / 2 = N^2 / 4 + (N/2 - c)^2 is
   N^2 / 4 plus the uniform release's (the PLBU rows); then, on the simulator's counts, PLBU
   through wevent's GRR at eps = E / w (`GRR.perturb_counts`) released undebiased (the report
   histogram, as 001's rows fit) and debiased (`GRR.estimate`, as wevent's plbu) beside BD and BA
   in S0 and S5, with the number of seeds in which BD (S5) is above the undebiased PLBU, and
   TLNS's per-seed walk level. Measured at 10,000 users, 10,000 slots, seeds 0-9: the
   undebiased PLBU equals the printed Sin and Log rows to three digits, and BD (S5, mean over
   seeds) falls on the printed side of it in 9 of the 10 Sin and Log cells shown: below it in 8,
   above it at Log E = 0.2 (in 8 of 10 seeds; printed 12.6 against 6.33 million); at Log
   w = 200 the printed BD is above (8.66 million) and ours below (4.31, 1 of 10 seeds). On TLNS
   PLBU is 11.5-19.9 million (by walk) and BD (S5) 0.8-3.3 million at E = 0.6, so BD above PLBU
   does not follow (0 of 10 seeds; 2 of 10 at E = 0.2). 001's TLNS BD row is 0.30-1.01 times
   the error of a release stuck at zero (Sin and Log 0.004-0.40). The undebiased PLBU is above
   BD and BA in S0 in all 15 cells, so debiasing alone changes PLBU's level, not its rank; of
   the 12 cells where 001 has BD above PLBU (all of TLNS, Log E = 0.2, Log w = 200) only Log
   E = 0.2 takes 001's order, and only with both the undebiased PLBU and BD in S5.

5. With ``--shuffle SEED`` the grid (1.) runs twice, with the slots in order and in
   `slot_order(slots, SEED)`: the authors' runner hands its mechanisms the per-slot files in
   `File.listFiles` order, unsorted, which on Linux is not the slots' order
   (`analysis/ducode_java/README.md`); `--settings 0,5` keeps S0 and S5, `--plbu` adds the
   undebiased PLBU row, `--tlns java` uses 001's TLNS walk (regenerated from Java's Random(1) by
   `pwsm_tlns_java.py`) instead of numpy walks. Each grid ends with the range of simulated /
   printed per setting and the number of the ten cells within x0.7-1.4 (`BAND`). ``--ordering``
   takes ``--shuffle`` too. ``--personal`` (with ``--shuffle``) runs wevent's PBD and PBA kernels
   in the variant ``du-code`` (the authors' rules) with the authors' runner (restarts every 250
   slots, p_t rounded), in order and shuffled, against 001's printed PBD and PBA cells
   (``--cells``; about 14 s per run at 10,000 users and slots on an idle core). DPBD and DPBA
   are not run: wevent's ``du-code`` variant of dpbd and dpba restates the five-argument step
   of the authors' code, which only their JUnit test calls; their runners call another step,
   which never nullifies (``wevent/mechanisms/allocators/dynamic_du_code.py``).

Expected outcome (default run, seeds 0-2): in S0 our BA is 3-19x the printed values. In S5
the Log BA column lands on the printed values in all ten cells (0.75-1.02x), Sin BA within
0.24-0.93x, TLNS BA within 0.26-1.7x, BD on Sin/Log within 0.05-1.2x (heavy-tailed: a few seeds
decide it); TLNS BD stays 5-250x below the printed values, and TLNS's PLBU row needs a walk higher
than most of ours (001 used a revised TLNS generator seeded with Java's Random(1);
`pwsm_tlns_java.py` regenerates that walk, which gives the printed PLBU row and leaves TLNS BD
below the printed values).

Commands (from the repository root):

    .venv/bin/python analysis/pwsm_absolute.py                       # 10,000 users x 10,000 slots, seeds 0-2
    .venv/bin/python analysis/pwsm_absolute.py --slots 2000 --seeds 1   # a quicker look
    .venv/bin/python analysis/pwsm_absolute.py --datasets log --no-check
    .venv/bin/python analysis/pwsm_absolute.py --ordering --seeds 10   # 4. only: 82 s
    .venv/bin/python analysis/pwsm_absolute.py --seeds 3 --no-check --settings 0,5 --plbu \
        --shuffle 1 --tlns java                                        # 5.: in order, shuffled
    .venv/bin/python analysis/pwsm_absolute.py --personal --shuffle 1 --seeds 1 \
        --datasets sin --cells "T5 E=0.2,T5 E=1.0,T6 w=200"            # PBD, PBA

The default is 001's full size (the simulator needs only a few hundredths of a second per run,
so all 1,080 runs take about a minute; the wevent check runs at 1,000 slots, seeds 0-2).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from wevent.accounting.budget import Budget
from wevent.experiments import metrics
from wevent.experiments.harness import execute
from wevent.experiments.populations import uniform_population

FloatArray = npt.NDArray[np.float64]

USERS: Final = 10_000  # the authors' configuration for tlns, sin and log
PAPER_SLOTS: Final = 10_000  # 001 Section 6.1
DATASETS: Final = ("lns", "sin", "log")  # lns is 001's TLNS
NAMES: Final = {"lns": "TLNS", "sin": "Sin", "log": "Log"}
EPSILONS: Final = (0.2, 0.4, 0.6, 0.8, 1.0)  # 001 Table 5 columns, w = 120
TABLE5_W: Final = 120
WINDOWS: Final = (40, 80, 120, 160, 200)  # 001 Table 6 columns, E = 0.6
TABLE6_E: Final = 0.6

# 001 Table 5 (E = 0.2, 0.4, 0.6, 0.8, 1.0 at w = 120), synthetic rows BD, BA, PLBU, PBD, PBA
# and DPBD, DPBA (printed "PDBD", "PDBA").
TABLE5: Final[dict[str, dict[str, tuple[float, ...]]]] = {
    "lns": {
        "bd": (35214891.91, 26932213.28, 21900899.91, 19202732.21, 19317360.81),
        "ba": (72479.55, 13456.32, 5228.94, 2583.01, 1447.21),
        "plbu": (9750998.15, 9732708.88, 9719230.14, 9705975.87, 9688944.63),
        "pbd": (5625685.13, 5708081.9, 5761339.31, 5761668.46, 6168585.37),
        "pba": (15734.77, 7593.93, 4031.24, 2415.89, 1449.54),
        "dpbd": (4108894.4, 4001623.91, 4254805.65, 4059568.08, 4156445.29),
        "dpba": (3249.53, 2096.95, 1309.7, 1097.65, 860.35),
    },
    "sin": {
        "bd": (14809297.94, 3868423.13, 2822001.85, 2166052.12, 2875381.82),
        "ba": (61604.76, 21010.09, 9193.50, 4678.60, 2659.74),
        "plbu": (18127404.96, 18103836.01, 18082416.37, 18052150.71, 18028552.72),
        "pbd": (1065153.09, 891132.17, 796008.09, 753028.43, 689846.46),
        "pba": (26390.31, 12807.53, 7805.06, 4123.15, 2661.26),
        "dpbd": (376035.19, 331161.83, 321423.27, 315928.35, 312774.69),
        "dpba": (8258.5, 4668.58, 3350.1, 2269.24, 1974.88),
    },
    "log": {
        "bd": (12598827.10, 3106749.11, 1520101.37, 1159412.40, 912889.07),
        "ba": (25313.21, 7067.12, 3701.09, 2351.14, 1763.29),
        "plbu": (6334895.72, 6323757.64, 6316533.20, 6306368.84, 6298869.11),
        "pbd": (580200.16, 438397.59, 438337.35, 362035.74, 320952.59),
        "pba": (9856.66, 4316.13, 3365.33, 2339.7, 1837.17),
        "dpbd": (75571.46, 59450.9, 50179.75, 51748.11, 46332.37),
        "dpba": (1788.03, 1415.64, 1405.98, 1174.66, 1178.1),
    },
}
# 001 Table 6 (w = 40, 80, 120, 160, 200 at E = 0.6), the same rows.
TABLE6: Final[dict[str, dict[str, tuple[float, ...]]]] = {
    "lns": {
        "bd": (10321505.61, 16427785.34, 21900899.91, 22192516.74, 22368956.59),
        "ba": (387.96, 1948.21, 5228.94, 9421.72, 16065.42),
        "plbu": (9629126.83, 9695808.71, 9719230.14, 9732079.75, 9741718.28),
        "pbd": (4177406.45, 4841586.74, 5761339.31, 5943316.0, 6268467.82),
        "pba": (381.45, 1835.74, 4031.24, 6285.94, 7870.36),
        "dpbd": (3579033.68, 3799459.12, 4254805.65, 4320520.18, 4344081.28),
        "dpba": (225.51, 846.94, 1309.7, 2073.61, 2985.93),
    },
    "sin": {
        "bd": (769929.84, 1285735.11, 2822001.85, 3444317.33, 6933306.34),
        "ba": (611.27, 3322.22, 9193.50, 16455.49, 25231.48),
        "plbu": (17907365.61, 18032304.84, 18082416.37, 18107904.18, 18118392.15),
        "pbd": (378448.77, 572317.51, 796008.09, 1144032.83, 1339405.34),
        "pba": (649.14, 3298.99, 7805.06, 13784.27, 17342.63),
        "dpbd": (260132.7, 300682.17, 321423.27, 345762.45, 365804.39),
        "dpba": (445.32, 1764.71, 3350.1, 5505.09, 7833.5),
    },
    "log": {
        "bd": (110158.58, 750581.32, 1520101.37, 3170285.91, 8658570.30),
        "ba": (770.17, 2006.90, 3701.09, 5943.62, 7973.24),
        "plbu": (6256580.11, 6298876.91, 6316533.20, 6325047.93, 6327726.59),
        "pbd": (47909.95, 207973.6, 438337.35, 582733.67, 759567.65),
        "pba": (820.44, 1946.36, 3365.33, 4270.21, 6007.43),
        "dpbd": (31028.42, 47844.35, 50179.75, 60542.04, 66902.55),
        "dpba": (633.3, 1162.11, 1405.98, 1617.49, 2122.58),
    },
}


@dataclass(frozen=True)
class Setting:
    """One combination of the switches of the simulator."""

    name: str
    kellaris_threshold: bool = False  # publish iff dis > 1/eps (else dis > sqrt(2)/eps)
    ba_forgets: bool = False  # BA never records its publications (the authors' BA)
    rounded: bool = False  # p_t rounded to two decimals
    segment: int | None = None  # restart the mechanisms every `segment` slots
    bd_last_w: bool = False  # BD subtracts the last w publications, not w - 1 (du-code's BD)


SETTINGS: Final = (
    Setting("S0 ours: sqrt(2)/eps threshold, correct BA"),
    Setting("S1 Kellaris 1/eps threshold", kellaris_threshold=True),
    Setting("S2 S1 + BA never records publications", True, ba_forgets=True),
    Setting("S3 S2 + p rounded to 0.01", True, True, rounded=True),
    Setting("S4 S3 + restart every 5,000 slots", True, True, True, segment=5000),
    Setting("S5 S3 + restart every 250 slots", True, True, True, segment=250),
)


# --- the streams of 001 Section 6.1 --------------------------------------------------------------


TLNS_WALK: FloatArray | None = None  # set by ``--tlns java``: 001's walk replaces the numpy walks


def probabilities(kind: str, slots: int, rng: np.random.Generator, rounded: bool) -> FloatArray:
    """p_1..p_T (with `TLNS_WALK` set, TLNS is that walk, which is on the 0.01 grid): TLNS is the random walk from 0.05 with N(0, 0.0025^2) steps clipped to [0, 1]
    (with ``rounded`` every step is rounded to 0.01, as the authors' generator does), Sin is
    0.05 sin(0.01 t) + 0.075 and Log is 0.25 / (1 + e^(-0.01 t))."""
    t = np.arange(1, slots + 1, dtype=np.float64)
    if kind == "sin":
        p = 0.05 * np.sin(0.01 * t) + 0.075
    elif kind == "log":
        p = 0.25 / (1.0 + np.exp(-0.01 * t))
    elif kind == "lns" and TLNS_WALK is not None:
        if len(TLNS_WALK) < slots:
            raise ValueError(f"the TLNS walk has {len(TLNS_WALK)} slots, {slots} asked")
        return np.asarray(TLNS_WALK[:slots], dtype=np.float64)
    elif kind == "lns":
        steps = rng.normal(0.0, 0.0025, size=slots).tolist()
        walk: list[float] = []
        cur = 0.05
        for step in steps:
            cur += step
            if rounded:
                cur = round(cur, 2)
            cur = min(1.0, max(0.0, cur))
            walk.append(cur)
        return np.array(walk, dtype=np.float64)
    else:
        raise ValueError(f"unknown stream {kind!r}")
    return np.asarray(np.round(p, 2) if rounded else p, dtype=np.float64)


def slot_order(slots: int, seed: int) -> npt.NDArray[np.int64]:
    """A random order of the slots 0..slots-1 (numpy, seeded): the stand-in for the order in
    which the authors' runner reads its per-slot input files. DynamicWEventCode's
    `DatasetSegmentRunUtils.basicDatasetRun` lists them with `File.listFiles`, which does not
    sort; on Linux (ext4 hashes the names) that is not the slots' order
    (`analysis/ducode_java/README.md`). The one shuffle of the analysis scripts
    (`pwsm_tlns_java.py --shuffle` uses it too)."""
    return np.asarray(np.random.default_rng([seed, 25]).permutation(slots), dtype=np.int64)


def stream_ones(
    kind: str, users: int, slots: int, seed: int, rounded: bool, shuffle: int | None = None
) -> npt.NDArray[np.int64]:
    """The counts of ones c_t,1 of the simulator's stream for ``seed`` (its data generator);
    with ``shuffle`` the p_t are first put in `slot_order(slots, shuffle)`."""
    data_rng = np.random.default_rng([seed, 0])
    p = probabilities(kind, slots, data_rng, rounded)
    if shuffle is not None:
        p = p[slot_order(slots, shuffle)]
    return np.asarray(data_rng.binomial(users, p), dtype=np.int64)


# --- the independent Kellaris BD/BA simulator ----------------------------------------------------


def simulate(
    mechanism: str,
    kind: str,
    users: int,
    slots: int,
    budget: float,
    w: int,
    seed: int,
    setting: Setting,
    trace: list[tuple[float, bool]] | None = None,
    shuffle: int | None = None,
) -> float:
    """AMRE of Kellaris et al.'s BD or BA (central, d = 2) under ``setting``.

    Every slot spends budget/(2w) on the dissimilarity (1/d) sum_j |c_j - r_j| + Lap(1/(d budget/(2w))).
    BD publishes with half of what the last w - 1 slots (w with ``setting.bd_last_w``, the
    authors' DynamicWEventCode) left of budget/2; BA publishes with the
    shares absorbed since its last publication (at most w) and then nullifies as many slots as it
    borrowed. A publication is c_t + Lap(1/eps_pub) per value. The data and the noise come from
    separate generators, so all mechanisms and settings see the same counts for a seed.
    ``trace``, if given, receives BD's (publication budget, published) per slot. ``shuffle``:
    the slots in `slot_order(slots, shuffle)` (the authors' runner's file order).
    """
    d = 2
    noise_rng = np.random.default_rng([seed, 1])
    ones = stream_ones(kind, users, slots, seed, setting.rounded, shuffle).tolist()
    dis_noise = noise_rng.laplace(0.0, 1.0, size=slots).tolist()
    pub_noise = noise_rng.laplace(0.0, 1.0, size=(slots, d)).tolist()
    unit = budget / (2 * w)  # one share: the per-slot dissimilarity budget
    dis_scale = 1.0 / (d * unit)
    factor = 1.0 if setting.kellaris_threshold else math.sqrt(2.0)
    segment = setting.segment or slots
    held = w if setting.bd_last_w else w - 1  # slots whose spends BD subtracts
    # BD keeps its spends as integers in units of (budget/2) / 2^(held + 67) and halves by a
    # shift. The halvings chain without end (each spend depends on earlier ones), so the shift
    # truncates; with 64 bits below the smallest share the truncation stays under float
    # resolution (the test checks the budgets against wevent's exact kernels at w = 2, 3, 5).
    whole = 1 << (held + 67)
    total_error = 0.0
    for start in range(0, slots, segment):
        r0 = r1 = 0.0  # a fresh mechanism releases zeros until it publishes
        spent: list[int] = []  # BD: spends of the segment's slots
        in_window = 0  # BD: sum of the spends of the last `held` slots
        last, last_shares = -1, 1  # BA: the last publication (local slot) and its shares
        for lt in range(min(segment, slots - start)):
            t = start + lt
            c1 = float(ones[t])
            c0 = users - c1
            dis = (abs(c0 - r0) + abs(c1 - r1)) / d + dis_scale * dis_noise[t]
            eps_pub = 0.0
            if mechanism == "bd":
                share = (whole - in_window) >> 1
                eps_pub = share / whole * budget / 2
                publish = dis > factor / eps_pub
                spend = share if publish else 0
                if trace is not None:
                    trace.append((eps_pub, publish))
                spent.append(spend)
                in_window += spend
                if lt - held >= 0:
                    in_window -= spent[lt - held]
            elif mechanism == "ba":
                if lt - last <= last_shares - 1:
                    publish = False  # nullified: its share was absorbed by the last publication
                else:
                    shares = min(lt - last - (last_shares - 1), w)
                    eps_pub = unit * shares
                    publish = dis > factor / eps_pub
                    if publish and not setting.ba_forgets:
                        last, last_shares = lt, shares
            else:
                raise ValueError(f"unknown mechanism {mechanism!r}")
            if publish:
                r0 = c0 + pub_noise[t][0] / eps_pub
                r1 = c1 + pub_noise[t][1] / eps_pub
            total_error += ((r0 - c0) ** 2 + (r1 - c1) ** 2) / d
    return total_error / slots


# --- the comparisons ------------------------------------------------------------------------------


def cells() -> list[tuple[str, float, int, int]]:
    """The ten cells of 001 Tables 5-6: (label, E, w, index into the printed row)."""
    out = [(f"T5 E={e}", e, TABLE5_W, i) for i, e in enumerate(EPSILONS)]
    out += [(f"T6 w={w}", TABLE6_E, w, i) for i, w in enumerate(WINDOWS)]
    return out


def printed(kind: str, mechanism: str, label: str, index: int) -> float:
    table = TABLE5 if label.startswith("T5") else TABLE6
    return table[kind][mechanism][index]


def fmt_ratio(x: float) -> str:
    return f"{x:7.3g}"


BAND: Final = (0.7, 1.4)  # "within about x0.7-1.4 of the printed value"


def plbu_undebiased(ones: Sequence[int], users: int, e: float, w: int, seed: int) -> float:
    """PLBU's report histogram through wevent's GRR at E / w (d = 2), released undebiased (what
    001's PLBU rows fit, `plbu_fingerprint`). Each slot's error depends on that slot's count only,
    so the order of the slots does not change its distribution."""
    from wevent.mechanisms.oracles import GRR

    oracle = GRR.for_budget(2, Budget(Fraction(e).limit_denominator(100) / w))
    rng = np.random.default_rng([seed, 2])
    total = 0.0
    for c1 in ones:
        truth = np.array([users - c1, c1], dtype=np.int64)
        reports = oracle.perturb_counts(truth, rng)
        total += float(np.mean((reports - truth) ** 2))
    return total / len(ones)


def grid(
    kinds: Sequence[str],
    users: int,
    slots: int,
    seeds: int,
    shuffle: int | None = None,
    settings: Sequence[Setting] = SETTINGS,
    plbu: bool = False,
) -> dict[tuple[str, str, str], list[float]]:
    """Simulated / printed AMRE for every setting, mechanism and cell (the slots in order, or in
    `slot_order(slots, shuffle)`); with ``plbu`` also the undebiased PLBU's. Returns the ratios
    by (setting name, stream, mechanism), in the order of `cells`."""
    labels = [c[0] for c in cells()]
    order = "slots in order" if shuffle is None else f"slots shuffled (seed {shuffle})"
    out: dict[tuple[str, str, str], list[float]] = {}
    start = time.time()
    for kind in kinds:
        print(
            f"\n## {NAMES[kind]}, {order}: simulated / printed AMRE (mean over seeds 0-{seeds - 1})"
        )
        print(f"{'setting':44s} mech " + " ".join(f"{x:>9s}" for x in labels))
        rows: list[tuple[str, str]] = [(s.name, m) for s in settings for m in ("ba", "bd")]
        if plbu:
            rows.append(("PLBU undebiased (wevent's GRR at E / w)", "plbu"))
        by_name = {s.name: s for s in settings}
        for name, mech in rows:
            ratios = []
            for label, e, w, i in cells():
                if mech == "plbu":
                    runs = [
                        plbu_undebiased(
                            stream_ones(kind, users, slots, s, True, shuffle).tolist(),
                            users,
                            e,
                            w,
                            s,
                        )
                        for s in range(seeds)
                    ]
                else:
                    runs = [
                        simulate(mech, kind, users, slots, e, w, s, by_name[name], None, shuffle)
                        for s in range(seeds)
                    ]
                ratios.append(float(np.mean(runs)) / printed(kind, mech, label, i))
            out[(name, kind, mech)] = ratios
            print(f"{name:44s} {mech:4s} " + " ".join(f"{fmt_ratio(x):>9s}" for x in ratios))
        print(f"[{time.time() - start:.0f} s]", flush=True)
    lo, hi = BAND
    print(
        f"\n## {order}: range of simulated / printed over the ten cells of 001 Tables 5-6 "
        f"[cells within x{lo}-{hi}]"
    )
    mechs = ("ba", "bd", "plbu") if plbu else ("ba", "bd")
    head = " | ".join(f"{NAMES[k]} {m.upper()}" for k in kinds for m in mechs)
    print(f"| setting | {head} |")
    print("|---" * (1 + len(mechs) * len(kinds)) + "|")
    for setting in settings:
        vals = []
        for k in kinds:
            for m in mechs:
                key = (setting.name, k, m) if m != "plbu" else (rows[-1][0], k, m)
                r = out[key]
                inside = sum(lo <= x <= hi for x in r)
                vals.append(f"{min(r):.2g}-{max(r):.2g} [{inside}]")
        print(f"| {setting.name} | {' | '.join(vals)} |")
    return out


def check_against_wevent(users: int, slots: int, seeds: int) -> None:
    """Setting S0 against wevent's own central BA and BD (uniform requirements (w, E))."""
    print(
        f"\n## Check: simulator (S0) vs wevent ba/bd, {users:,} users, {slots:,} slots, "
        f"w = {TABLE5_W}, seeds 0-{seeds - 1} (AMRE, thousands)"
    )
    print(f"{'data':5s} {'mech':4s} {'E':>4s}  {'wevent':>30s}  {'simulator':>30s}  ratio of means")
    for kind in ("log", "sin"):
        for mech in ("ba", "bd"):
            for e in (Fraction(1, 5), Fraction(3, 5)):
                pop = uniform_population(users, TABLE5_W, e)
                ours = []
                for s in range(seeds):
                    result = execute(mech, pop, kind, slots, s)
                    ours.append(metrics.amre(result.release, result.truth))
                sim = [
                    simulate(mech, kind, users, slots, float(e), TABLE5_W, s, SETTINGS[0])
                    for s in range(seeds)
                ]
                a = " ".join(f"{x / 1e3:9.1f}" for x in ours)
                b = " ".join(f"{x / 1e3:9.1f}" for x in sim)
                ratio = float(np.mean(sim)) / float(np.mean(ours))
                print(f"{kind:5s} {mech:4s} {float(e):4.1f}  {a:>30s}  {b:>30s}  {ratio:6.2f}")
    print("(BD is heavy-tailed: a cascade of halved budgets makes single runs differ by 10x.)")


def plbu_fingerprint() -> None:
    """001's PLBU rows against a release stuck at the uniform histogram (N/2, N/2)."""
    print("\n## PLBU fingerprint: mean_t E[(N/2 - c_t)^2] vs 001 Table 5 / Table 6 PLBU rows")
    print(
        f"{'data':5s} {'p_t':8s} {'N':>6s} {'predicted':>12s}   paper T5 (E=0.2..1.0), T6 (w=40..200)"
    )
    for kind in ("sin", "log"):
        t5, t6 = TABLE5[kind]["plbu"], TABLE6[kind]["plbu"]
        for rounded in (False, True):
            p = probabilities(kind, PAPER_SLOTS, np.random.default_rng(0), rounded)
            for n in (5000, 10000, 20000):
                pred = float(np.mean((n / 2 - n * p) ** 2 + n * p * (1 - p)))
                tag = "rounded" if rounded else "exact"
                print(
                    f"{NAMES[kind]:5s} {tag:8s} {n:6d} {pred:12,.0f}   "
                    f"T5 {min(t5) / pred:.4f}-{max(t5) / pred:.4f}x, "
                    f"T6 {min(t6) / pred:.4f}-{max(t6) / pred:.4f}x"
                )
    if TLNS_WALK is not None:
        print("TLNS: `--tlns java` replaces the walks below by 001's (pwsm_tlns_java.py (b)).")
    # TLNS: numpy walks; invert for the constant p that gives the printed value.
    v = TABLE5["lns"]["plbu"][0]
    n = USERS
    # (n/2 - n p)^2 + n p (1 - p) = v  <=>  (n^2 - n) p^2 - (n^2 - n) p + n^2/4 - v = 0
    a = n * n - n
    disc = a * a - 4 * a * (n * n / 4 - v)
    p_low = (a - math.sqrt(disc)) / (2 * a)
    print(
        f"TLNS: printed {v:,.0f} (T5, E=0.2) would need a constant p = {p_low:.3f} at "
        f"N = {n:,}. The walk is random (001 seeded Java's Random(1)); ours, seeds 0-4:"
    )
    for rounded in (False, True):
        for s in range(5):
            p = probabilities("lns", PAPER_SLOTS, np.random.default_rng([s, 0]), rounded)
            pred = float(np.mean((n / 2 - n * p) ** 2 + n * p * (1 - p)))
            tag = "rounded" if rounded else "exact"
            print(
                f"  {tag:8s} seed {s}: mean p {float(np.mean(p)):.3f}, predicted {pred:12,.0f} "
                f"(printed / predicted {v / pred:.2f})"
            )


def ordering(
    kinds: Sequence[str], users: int, slots: int, seeds: int, shuffle: int | None = None
) -> None:
    """001 Tables 5-6's ordering of PLBU against BD: PLBU worst on Sin and Log, BD worse on TLNS.

    PLBU (001 Section 6.2: every user reports with eps_i / w_i at every slot) through wevent's
    GRR (`GRR.perturb_counts`, d = 2), each cell's (E, w) for every user, on the simulator's
    counts: ``undebiased`` releases the report histogram as it is (what 001's PLBU rows fit),
    ``debiased`` the oracle's unbiased estimate (`GRR.estimate`, what wevent's plbu releases).
    BD and BA are the simulator's, in S0 (our rules) and S5 (the authors' settings); with
    ``shuffle`` every run has the slots in `slot_order(slots, shuffle)`."""
    from wevent.mechanisms.oracles import GRR

    # A release stuck at zero errs ((N - c)^2 + c^2) / 2 = N^2 / 4 + (N/2 - c)^2 per cell: the
    # uniform release's error plus N^2 / 4, whatever the data. With 001's PLBU rows as the
    # uniform release's error (plbu_fingerprint), N^2 / 4 + printed PLBU is what a BD that
    # never publishes would print.
    n = USERS
    print(
        f"\n## Printed BD / (N^2/4 + printed PLBU): BD against a release stuck at zero "
        f"(N = {n:,}; 1 = BD never published)"
    )
    print("| data | " + " | ".join(c[0] for c in cells()) + " |")
    print("|---|" + "---:|" * len(cells()))
    for kind in DATASETS:
        ratios = [
            printed(kind, "bd", label, i) / (n * n / 4 + printed(kind, "plbu", label, i))
            for label, _, _, i in cells()
        ]
        print(f"| {NAMES[kind]} | " + " | ".join(f"{r:.3f}" for r in ratios) + " |")
    if users != n:
        print(
            f"(the ratios use N = {n:,}, which 001's PLBU rows pin; the runs below use {users:,})"
        )

    print(
        f"\n## PLBU against BD and BA: AMRE at {users:,} users, {slots:,} slots, "
        f"seeds 0-{seeds - 1} (mean over seeds; millions); slots "
        + ("in order" if shuffle is None else f"shuffled (seed {shuffle})")
    )
    print(
        "| data | cell | PLBU undebiased | PLBU debiased | BD S0 | BA S0 | BD S5 | BA S5 | "
        "printed PLBU | printed BD | seeds with BD S5 > PLBU undebiased |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    per_seed: dict[str, list[tuple[int, float, float, float]]] = {}
    for kind in kinds:
        for label, e, w, i in cells():
            if label not in ("T5 E=0.2", "T5 E=0.6", "T5 E=1.0", "T6 w=40", "T6 w=200"):
                continue
            oracle = GRR.for_budget(2, Budget(Fraction(e).limit_denominator(100) / w))
            plbu_raw, plbu_est, bd0, ba0, bd5, ba5 = [], [], [], [], [], []
            wins = 0
            for s in range(seeds):
                ones = stream_ones(kind, users, slots, s, SETTINGS[5].rounded, shuffle)
                rng = np.random.default_rng([s, 2])
                raw = est = 0.0
                for c1 in ones.tolist():
                    truth = np.array([users - c1, c1], dtype=np.int64)
                    reports = oracle.perturb_counts(truth, rng)
                    raw += float(np.mean((reports - truth) ** 2))
                    debiased = oracle.estimate(reports, users) * users
                    est += float(np.mean((debiased - truth) ** 2))
                plbu_raw.append(raw / slots)
                plbu_est.append(est / slots)
                bd0.append(simulate("bd", kind, users, slots, e, w, s, SETTINGS[0], None, shuffle))
                ba0.append(simulate("ba", kind, users, slots, e, w, s, SETTINGS[0], None, shuffle))
                bd5.append(simulate("bd", kind, users, slots, e, w, s, SETTINGS[5], None, shuffle))
                ba5.append(simulate("ba", kind, users, slots, e, w, s, SETTINGS[5], None, shuffle))
                wins += bd5[-1] > plbu_raw[-1]
                if label == "T5 E=0.6" and kind == "lns":
                    mean_p = float(np.mean(ones)) / users
                    per_seed.setdefault(kind, []).append((s, mean_p, plbu_raw[-1], bd5[-1]))
            vals = (plbu_raw, plbu_est, bd0, ba0, bd5, ba5)
            row = " | ".join(f"{float(np.mean(v)) / 1e6:.3g}" for v in vals)
            plbu_p, bd_p = printed(kind, "plbu", label, i), printed(kind, "bd", label, i)
            paper = f"{plbu_p / 1e6:.3g} | {bd_p / 1e6:.3g}"
            print(f"| {NAMES[kind]} | {label} | {row} | {paper} | {wins} of {seeds} |", flush=True)
    for kind, rows in per_seed.items():
        print(f"\n{NAMES[kind]}, E = 0.6, w = 120, per seed (the walk depends on the seed):")
        print("| seed | mean p_t | PLBU undebiased | BD S5 | larger |")
        print("|---:|---:|---:|---:|---|")
        for s, mean_p, raw_s, bd_s in rows:
            larger = "BD" if bd_s > raw_s else "PLBU"
            print(f"| {s} | {mean_p:.3f} | {raw_s / 1e6:.3g} | {bd_s / 1e6:.3g} | {larger} |")


PERSONAL_CELLS: Final = ("T5 E=0.2", "T5 E=0.6", "T5 E=1.0", "T6 w=40", "T6 w=200")


def personal_run(
    mechanism: str,
    kind: str,
    users: int,
    slots: int,
    e: float,
    w: int,
    seed: int,
    shuffle: int | None,
) -> tuple[float, int]:
    """(AMRE, publications) of wevent's PBD or PBA kernel in the variant ``du-code`` (the rules
    of the authors' DynamicWEventCode, docs/peers.md) run as the authors' runner runs it: p_t
    rounded to 0.01 (TLNS: `probabilities`' walk), a fresh kernel every 250 slots (S5's
    segment), the slots in order or in `slot_order(slots, shuffle)`. Users: wevent's
    `pwsm_population` (001 Table 4's grids, each user's budget and window drawn uniformly). The
    du-code kernels overspend, so their charges go to a spender that accepts everything
    (`pwsm_ratio_ducode.Unchecked`). Data and noise generators as `pwsm_ratio_ducode.run`."""
    from pwsm_ratio_ducode import Unchecked, Window

    from wevent.experiments.populations import pwsm_population
    from wevent.mechanisms.allocators import algebra_for, classes_of
    from wevent.mechanisms.allocators.registry import kernel_for
    from wevent.mechanisms.central import CentralRunner, SlotRecord
    from wevent.mechanisms.streams import SyntheticStream
    from wevent.verifier.tracing import class_groups

    class Given(SyntheticStream):
        """wevent's synthetic stream on the p sequence given (rounded, maybe shuffled)."""

        def __init__(self, p: FloatArray, sizes: Sequence[int], seed: int) -> None:
            super().__init__("sin", len(p), sizes, seed)
            q = np.array(p, dtype=np.float64)
            q.setflags(write=False)
            self._p = q

    population = pwsm_population(users, Fraction(e).limit_denominator(100), w, seed)
    sizes = [c.count for c in population.classes]
    p = probabilities(kind, slots, np.random.default_rng([seed, 0]), True)
    if shuffle is not None:
        p = p[slot_order(slots, shuffle)]
    stream = Given(p, sizes, seed)
    data_seed, noise_seed, _, _ = np.random.SeedSequence(seed).spawn(4)
    data_rng = np.random.default_rng(data_seed)
    noise_rng = np.random.default_rng(noise_seed)
    classes = classes_of(population, mechanism)
    unchecked = Unchecked()
    groups = class_groups(population, unchecked)
    segment = SETTINGS[5].segment
    assert segment is not None
    records: list[SlotRecord] = []
    for start in range(0, slots, segment):
        length = min(segment, slots - start)
        runner = CentralRunner(
            kernel=kernel_for(mechanism, algebra_for("exact"), classes, "du-code"),
            spender=unchecked,
            groups=groups,
            sizes=sizes,
            stream=Window(stream, start, length),
            data_rng=data_rng,
            noise_rng=noise_rng,
            mechanism=mechanism,
        )
        for _ in range(length):
            records.append(runner.step())
    release = np.stack([r.release for r in records]).astype(np.float64)
    truth = np.stack([r.truth for r in records]).astype(np.int64)
    published = sum(1 for r in records if r.status == "published")
    return metrics.amre(release, truth), published


def personal(
    kinds: Sequence[str], users: int, slots: int, seeds: int, shuffle: int, labels: Sequence[str]
) -> None:
    """PBD and PBA (`personal_run`) in order and shuffled against 001's printed cells."""
    print(
        f"\n## PBD and PBA, the authors' rules (wevent's du-code kernels, restarts every 250 "
        f"slots, p_t rounded), {users:,} users, {slots:,} slots, seeds 0-{seeds - 1}: "
        f"AMRE mean / printed [mean publications], in order and shuffled (seed {shuffle})"
    )
    print("| data | mech | cell | printed | in order | shuffled |")
    print("|---|---|---|---:|---:|---:|")
    start = time.time()
    for kind in kinds:
        for mech in ("pbd", "pba"):
            for label, e, w, i in cells():
                if label not in labels:
                    continue
                paper = printed(kind, mech, label, i)
                vals = []
                for order in (None, shuffle):
                    runs = [
                        personal_run(mech, kind, users, slots, e, w, s, order) for s in range(seeds)
                    ]
                    amre = float(np.mean([r[0] for r in runs]))
                    pubs = float(np.mean([r[1] for r in runs]))
                    vals.append(f"{amre / paper:.3g} [{pubs:,.0f}]")
                print(
                    f"| {NAMES[kind]} | {mech.upper()} | {label} | {paper:,.0f} | "
                    + " | ".join(vals)
                    + " |",
                    flush=True,
                )
    print(f"({time.time() - start:.0f} s)")


def main() -> None:
    global TLNS_WALK
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=USERS)
    parser.add_argument("--slots", type=int, default=PAPER_SLOTS)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..SEEDS-1")
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--check-slots", type=int, default=1000)
    parser.add_argument("--check-seeds", type=int, default=3)
    parser.add_argument("--no-check", action="store_true", help="skip the wevent check")
    parser.add_argument(
        "--ordering",
        action="store_true",
        help="only PLBU (undebiased and debiased) against BD and BA (001 Tables 5-6's ordering)",
    )
    parser.add_argument(
        "--shuffle",
        type=int,
        metavar="SEED",
        help="also run the grid (and --personal, --ordering) with the slots in a random order "
        "(the authors' runner's file order; `slot_order`)",
    )
    parser.add_argument(
        "--tlns",
        choices=("numpy", "java"),
        default="numpy",
        help="TLNS walks: numpy's per seed, or 001's walk from java.util.Random(1) "
        "(`pwsm_tlns_java.walk('rounded')`) for every seed",
    )
    parser.add_argument(
        "--settings",
        default=",".join(str(i) for i in range(len(SETTINGS))),
        help="the grid's settings by number (0-5)",
    )
    parser.add_argument("--plbu", action="store_true", help="the grid also runs PLBU undebiased")
    parser.add_argument(
        "--cells",
        default=",".join(PERSONAL_CELLS),
        help="--personal's cells (labels of the grid: 'T5 E=0.2', ..., 'T6 w=200')",
    )
    parser.add_argument(
        "--personal",
        action="store_true",
        help="only PBD and PBA with the authors' rules (wevent's du-code kernels) in order and "
        "shuffled (needs --shuffle), in five cells per stream",
    )
    args = parser.parse_args()
    kinds = [k for k in args.datasets.split(",") if k]
    for k in kinds:
        if k not in DATASETS:
            parser.error(f"unknown dataset {k!r} (expected {', '.join(DATASETS)})")
    try:
        picked = [SETTINGS[int(x)] for x in args.settings.split(",") if x]
    except (ValueError, IndexError):
        parser.error(f"--settings: numbers 0-{len(SETTINGS) - 1}, got {args.settings!r}")
    if args.seeds < 1 or args.slots < 1 or args.users < 1:
        parser.error("--seeds, --slots and --users must be at least 1")
    if args.personal and args.shuffle is None:
        parser.error("--personal needs --shuffle SEED")
    if args.tlns == "java":
        from pwsm_tlns_java import walk  # run from analysis/

        TLNS_WALK = walk("rounded", max(args.slots, PAPER_SLOTS)).p
    start = time.time()
    walks = "001's walk (Java Random(1))" if args.tlns == "java" else "numpy walks per seed"
    print(
        f"# 001 Tables 5-6, absolute AMRE: {args.users:,} users, {args.slots:,} slots "
        f"(paper: {PAPER_SLOTS:,}), seeds 0-{args.seeds - 1}; TLNS: {walks}"
    )
    if args.ordering:
        ordering(kinds, args.users, args.slots, args.seeds, args.shuffle)
        print(f"\ntotal {time.time() - start:.0f} s")
        return
    if args.personal:
        labels = [x.strip() for x in args.cells.split(",") if x.strip()]
        known = [c[0] for c in cells()]
        for x in labels:
            if x not in known:
                parser.error(f"--cells: unknown cell {x!r} (expected {', '.join(known)})")
        personal(kinds, args.users, args.slots, args.seeds, args.shuffle, labels)
        print(f"\ntotal {time.time() - start:.0f} s")
        return
    plbu_fingerprint()
    if not args.no_check:
        check_against_wevent(args.users, args.check_slots, args.check_seeds)
    grid(kinds, args.users, args.slots, args.seeds, None, picked, args.plbu)
    if args.shuffle is not None:
        grid(kinds, args.users, args.slots, args.seeds, args.shuffle, picked, args.plbu)
    print(f"\ntotal {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
