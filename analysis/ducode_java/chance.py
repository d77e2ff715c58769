"""How often a mean of 10 runs of the authors' BD reaches 001's printed BD.

001 reports "the average result" of 10 runs per experiment (001 Section 6.2, paper line 809).
The authors' BD (their `BudgetDistribution`, run by `RunDuCode fast`, see README.md here) is
heavy-tailed, so a few runs say little about where a 10-run mean falls. This script reads many
runs per cell and prints, per stream, order and cell:

* runs, their mean, median, minimum and maximum;
* the means of disjoint groups of 10 runs, taken in run order (runs 1-10, 11-20, ...; a last
  group of fewer than 10 is dropped): their quantiles, the share of them at or above the printed
  BD with a 95% Clopper-Pearson interval, and the printed value's percentile among them (the
  share of group means below it);
* a bootstrap of 10-run means (10 runs drawn with replacement from all of the cell's runs,
  `--bootstrap` times, `random.Random(--seed)`): the share at or above the printed BD and the
  printed value's percentile;
* the share of 10-run means above 001's printed PLBU of the cell (disjoint groups with the
  interval, and the bootstrap).

It runs no Java; its output is fixed by the raw files and the seed.

    .venv/bin/python analysis/ducode_java/chance.py          # a few seconds

Input lines (`results/chance_runs.txt.gz`, gzipped or plain): `STREAM order=O E=e w=w BD x1 ..
xk | BA y1 .. yk`, STREAM one of tlns, sin, log (the output of `RunDuCode fast` with the stream
put in front); lines starting with `#` are comments. Lines of the same stream, order and cell
add their runs in file order.
"""

from __future__ import annotations

import argparse
import gzip
import math
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # analysis/, for pwsm_absolute

import pwsm_absolute as pa  # noqa: E402

KINDS = {"tlns": "lns", "sin": "sin", "log": "log"}
GROUP = 10  # 001: "Each experiment is run 10 times, and we report the average result"
DEFAULT_RAW = HERE / "results" / "chance_runs.txt.gz"
QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
TAIL = 0.025  # a printed value below the 2.5th or above the 97.5th percentile is "outside"


class InputError(ValueError):
    """A raw file that cannot be read: the message names its file and line."""


def printed(stream: str, mechanism: str, e: float, w: int) -> float:
    """001's printed AMRE (Table 5 at w = 120, Table 6 at E = 0.6)."""
    kind = KINDS[stream]
    if w == pa.TABLE5_W and e in pa.EPSILONS:
        return float(pa.TABLE5[kind][mechanism][pa.EPSILONS.index(e)])
    if e == pa.TABLE6_E and w in pa.WINDOWS:
        return float(pa.TABLE6[kind][mechanism][pa.WINDOWS.index(w)])
    raise ValueError(f"E = {e:g}, w = {w} is in neither 001 Table 5 nor Table 6")


def where(stream: str, e: float, w: int) -> str:
    """The paper table and row a cell's printed values come from."""
    name = {"tlns": "TLNS", "sin": "Sin", "log": "Log"}[stream]
    if w == pa.TABLE5_W and e == pa.TABLE6_E:
        return f"Tables 5-6, {name}, E = {e:g}, w = {w}"
    if w == pa.TABLE5_W:
        return f"Table 5, {name}, E = {e:g}"
    return f"Table 6, {name}, w = {w}"


@dataclass
class Cell:
    stream: str
    order: str
    e: float
    w: int
    bd: list[float]


def _parse(line: str, origin: str) -> tuple[tuple[str, str, float, int], list[float]]:
    parts = line.split()
    try:
        stream = parts[0]
        if stream not in KINDS:
            raise ValueError(f"stream {stream!r} is not one of tlns, sin, log")
        if not (
            parts[1].startswith("order=")
            and parts[2].startswith("E=")
            and parts[3].startswith("w=")
            and parts[4] == "BD"
        ):
            raise ValueError("expected 'STREAM order=O E=e w=w BD ...'")
        order = parts[1].removeprefix("order=")
        e = float(parts[2].removeprefix("E="))
        w = int(parts[3].removeprefix("w="))
        end = parts.index("|") if "|" in parts else len(parts)
        bd = [float(x) for x in parts[5:end]]
        if not bd:
            raise ValueError("no BD runs")
        printed(stream, "bd", e, w)
    except (IndexError, ValueError) as err:
        raise InputError(f"{origin}: not a run line ({err})") from None
    return (stream, order, e, w), bd


def read_runs(paths: Sequence[Path]) -> list[Cell]:
    """The cells of the raw files, runs in file order, cells in order of first appearance."""
    cells: dict[tuple[str, str, float, int], Cell] = {}
    for path in paths:
        try:
            raw = path.read_bytes()
        except OSError as err:
            raise InputError(f"{path}: cannot read ({err.strerror})") from None
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.startswith("#"):
                continue
            key, bd = _parse(line, f"{path}:{number}")
            if key not in cells:
                cells[key] = Cell(*key, bd=[])
            cells[key].bd.extend(bd)
    return list(cells.values())


def group_means(runs: Sequence[float], size: int = GROUP) -> list[float]:
    """Means of runs 1-size, size+1-2*size, ...; a last short group is dropped."""
    return [statistics.fmean(runs[i : i + size]) for i in range(0, len(runs) - size + 1, size)]


def bootstrap_means(runs: Sequence[float], draws: int, seed: int, size: int = GROUP) -> list[float]:
    """`draws` means of `size` runs drawn with replacement, from random.Random(seed)."""
    rng = random.Random(seed)
    return [statistics.fmean(rng.choices(runs, k=size)) for _ in range(draws)]


def share_at_least(values: Sequence[float], threshold: float) -> tuple[int, int]:
    """How many of `values` are >= threshold, and how many values there are."""
    return sum(v >= threshold for v in values), len(values)


def share_above(values: Sequence[float], threshold: float) -> tuple[int, int]:
    """How many of `values` are > threshold, and how many values there are."""
    return sum(v > threshold for v in values), len(values)


def _binom_tail_ge(x: int, n: int, p: float) -> float:
    """P(X >= x) for X ~ Binomial(n, p)."""
    return math.fsum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(x, n + 1))


def _bisect(f: Callable[[float], float], target: float) -> float:
    """The p in [0, 1] where the increasing f reaches target."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(x: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval for a binomial proportion x / n."""
    if n <= 0 or not 0 <= x <= n:
        raise ValueError(f"need 0 <= x <= n and n > 0, got x = {x}, n = {n}")
    tail = (1 - level) / 2
    # lower: P(X >= x; p) = tail (increasing in p); upper: P(X <= x; p) = tail, i.e.
    # P(X >= x + 1; p) = 1 - tail (also increasing in p)
    lower = 0.0 if x == 0 else _bisect(lambda p: _binom_tail_ge(x, n, p), tail)
    upper = 1.0 if x == n else _bisect(lambda p: _binom_tail_ge(x + 1, n, p), 1 - tail)
    return lower, upper


def percentile_of(values: Sequence[float], threshold: float) -> float:
    """The share of `values` below threshold, in percent."""
    return 100 * sum(v < threshold for v in values) / len(values)


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of values (nearest rank, q = 0 the minimum, q = 1 the maximum)."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] if q > 0 else s[0]


def m(x: float) -> str:
    """Millions, three significant digits."""
    return f"{x / 1e6:.3g}"


def pct(x: int, n: int) -> str:
    return f"{x}/{n} = {100 * x / n:.2f}%"


def interval(x: int, n: int) -> str:
    lo, hi = clopper_pearson(x, n)
    return f"[{100 * lo:.1f}%, {100 * hi:.1f}%]"


def report(cells: Sequence[Cell], draws: int, seed: int) -> None:
    print(
        f"10-run means of the authors' BD (RunDuCode fast), disjoint groups of {GROUP} in run "
        f"order and a bootstrap of {draws} means of {GROUP} runs drawn with replacement "
        f"(random.Random({seed})); AMRE in millions; 95% Clopper-Pearson intervals over the "
        "disjoint groups"
    )
    boots = {id(c): bootstrap_means(c.bd, draws, seed) for c in cells}
    for order in dict.fromkeys(c.order for c in cells):
        print(f"\n## order = {order}")
        print(
            "| cell (001) | runs | mean | median | min-max | 3 largest | printed BD | groups "
            "| 10-run means "
            "q0/5/25/50/75/95/100 | groups >= printed [95% CI] | printed's percentile, "
            "groups | bootstrap >= printed | printed's percentile, bootstrap |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in (c for c in cells if c.order == order):
            p = printed(c.stream, "bd", c.e, c.w)
            groups = group_means(c.bd)
            boot = boots[id(c)]
            bx, bn = share_at_least(boot, p)
            if groups:
                gx, gn = share_at_least(groups, p)
                gq = "/".join(m(quantile(groups, q)) for q in QUANTILES)
                gshare = f"{pct(gx, gn)} {interval(gx, gn)}"
                gperc = f"{percentile_of(groups, p):.1f}"
            else:
                gq = gshare = gperc = "(fewer than 10 runs)"
            print(
                f"| {where(c.stream, c.e, c.w)} | {len(c.bd)} | {m(statistics.fmean(c.bd))} "
                f"| {m(statistics.median(c.bd))} | {m(min(c.bd))}-{m(max(c.bd))} "
                f"| {', '.join(m(x) for x in sorted(c.bd)[-3:])} | {m(p)} "
                f"| {len(groups)} | {gq} | {gshare} | {gperc} | {pct(bx, bn)} "
                f"| {percentile_of(boot, p):.1f} |"
            )
    print(
        "\n## Printed BD inside the central 95% of the bootstrap's 10-run means "
        f"(percentile {100 * TAIL:g}-{100 * (1 - TAIL):g})"
    )
    for order in dict.fromkeys(c.order for c in cells):
        inside: list[str] = []
        outside: list[str] = []
        for c in (c for c in cells if c.order == order):
            perc = percentile_of(boots[id(c)], printed(c.stream, "bd", c.e, c.w))
            label = f"{where(c.stream, c.e, c.w)} ({perc:.1f})"
            (inside if 100 * TAIL <= perc <= 100 * (1 - TAIL) else outside).append(label)
        print(
            f"order = {order}: inside in {len(inside)} of {len(inside) + len(outside)} cells; "
            f"outside: {'; '.join(outside) or 'none'}"
        )
    print("\n## 10-run means of BD above 001's printed PLBU of the same cell")
    print("| cell (001) | order | printed PLBU | groups > PLBU [95% CI] | bootstrap > PLBU |")
    print("|---|---|---|---|---|")
    for c in cells:
        plbu = printed(c.stream, "plbu", c.e, c.w)
        groups = group_means(c.bd)
        bx, bn = share_above(boots[id(c)], plbu)
        if groups:
            gx, gn = share_above(groups, plbu)
            gshare = f"{pct(gx, gn)} {interval(gx, gn)}"
        else:
            gshare = "(fewer than 10 runs)"
        print(f"| {where(c.stream, c.e, c.w)} | {c.order} | {m(plbu)} | {gshare} | {pct(bx, bn)} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("raw", nargs="*", type=Path, help=f"raw files (default {DEFAULT_RAW})")
    parser.add_argument("--bootstrap", type=int, default=20_000, help="bootstrap means per cell")
    parser.add_argument("--seed", type=int, default=1, help="the bootstrap's random.Random seed")
    args = parser.parse_args(argv)
    if args.bootstrap < 1:
        parser.error("--bootstrap must be at least 1")
    try:
        cells = read_runs(args.raw or [DEFAULT_RAW])
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not cells:
        print("error: no run lines", file=sys.stderr)
        return 2
    report(cells, args.bootstrap, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
