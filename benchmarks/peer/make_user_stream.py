"""The per-user stream and requirement files of the peer utility comparison (README: utility/).

Stream: n users, d = 2, T slots of wevent's synthetic ``sin`` stream (001 Section 6.1,
p_t = 0.05 sin(0.01 t) + 0.075). Slot t's histogram is `SyntheticStream.total` drawn from
``numpy.random.default_rng(seed)`` (slot after slot, as a run of wevent on ``--stream sin``
draws it); the users holding value 1 are the first k of a permutation of the users drawn from
``default_rng([seed, t])``, so every user has a value at every slot and each slot's values are a
uniform assignment of that slot's histogram. Written as ``user,slot,value`` (users ``u0 ..
u{n-1}``, slots 1..T), with ``truth.csv`` (``slot,c0,c1``: the per-slot counts).

Requirements (``user,w,epsilon``):

* ``uniform_w{W}.csv`` for each W of ``--windows``: everyone (W, eps = 1), the setting of 002
  Section 7 (LDP-IDS);
* ``personalized.csv``: 000 Table IV's mix scaled to a short stream. 000 draws each user's budget
  uniformly from {eps, eps + 0.5, ..., 2.5} and window from {40, 80, ..., w}; here budgets
  {1, 1.5, 2, 2.5} and windows {5, 10, 15, 20} (step 5 instead of 40, so that n / (2 w_max) =
  250 users serve the largest window in 200 slots), drawn by
  `wevent.experiments.populations.personalized_population` with the same seed.

Usage (from the repository root)::

    python benchmarks/peer/make_user_stream.py OUT_DIR [--users 10000] [--slots 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Final

import numpy as np

from wevent.accounting.population import Population
from wevent.accounting.requirements import Fixed
from wevent.experiments.populations import (
    PLDP_STEP,
    PLDP_TOP,
    budget_grid,
    personalized_population,
    uniform_population,
)
from wevent.mechanisms.streams import SyntheticStream

KIND: Final = "sin"
D: Final = 2
EPS: Final = Fraction(1)
WINDOWS: Final = (3, 20)
PERSONALIZED_WINDOWS: Final = (5, 10, 15, 20)


def user_values(n: int, slots: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, truth): values[t - 1, i] is user i's value at slot t; truth[t - 1] the counts."""
    stream = SyntheticStream(KIND, slots, [n], seed, D)
    rng = np.random.default_rng(seed)
    values = np.zeros((slots, n), dtype=np.int64)
    truth = np.zeros((slots, D), dtype=np.int64)
    for t in range(1, slots + 1):
        hist = stream.total(t, rng)
        ones = int(hist[1])
        order = np.random.default_rng([seed, t]).permutation(n)
        values[t - 1, order[:ones]] = 1
        truth[t - 1] = hist
    return values, truth


def write_stream(path: Path, values: np.ndarray) -> None:
    slots, n = values.shape
    with path.open("w", newline="") as f:
        f.write("user,slot,value\n")
        for t in range(slots):
            row = values[t]
            f.write("".join(f"u{i},{t + 1},{int(row[i])}\n" for i in range(n)))


def write_truth(path: Path, truth: np.ndarray) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["slot", *(f"c{j}" for j in range(truth.shape[1]))])
        for t, row in enumerate(truth.tolist(), start=1):
            w.writerow([t, *row])


def write_requirements(path: Path, population: Population) -> None:
    rows: list[tuple[int, str, int, str]] = []
    for cls in population.classes:
        req = cls.requirement
        assert isinstance(req, Fixed)
        for user in cls.members:
            rows.append((int(user[1:]), user, req.w, str(Fraction(req.eps))))
    rows.sort()
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["user", "w", "epsilon"])
        w.writerows((u, win, e) for _, u, win, e in rows)


def personalized(n: int, seed: int) -> Population:
    budgets = budget_grid(EPS, PLDP_TOP, PLDP_STEP)
    return personalized_population(n, budgets, list(PERSONALIZED_WINDOWS), seed)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--slots", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    values, truth = user_values(args.users, args.slots, args.seed)
    write_stream(out / "stream.csv", values)
    write_truth(out / "truth.csv", truth)
    for w in WINDOWS:
        write_requirements(out / f"uniform_w{w}.csv", uniform_population(args.users, w, EPS))
    write_requirements(out / "personalized.csv", personalized(args.users, args.seed))
    print(f"wrote {out}: {args.users} users x {args.slots} slots, d = {D}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
