"""Every figure docs/reproduction.md quotes from the runs of the authors' Java code.

The raw outputs of `RunDuCode` (see README.md here; the commands that made them are listed
there) are committed in `results/`; this script reads them and prints the figures, so that each
one has a command. It runs nothing in Java and draws no random numbers.

    .venv/bin/python analysis/ducode_java/summarize.py            # a few seconds

Inputs (`results/`): `fast_tlns.txt` (fast mode, 10 runs per cell, orders fs, sorted,
shuffle1-3), `fast_sinlog.txt` (Sin and Log, fs and sorted), `pubs.txt` (pubs mode, 2 runs per
cell), `run_fs.log` / `run_sorted.log` and their `.time` (one full run each, every file read by
the authors' classes; the driver was then called RunTlns), `counts_*_fs.txt.gz` (each slot
file's counts in this machine's listing order), `walk_tlns.txt.gz` (the walk mode's output),
`py_shuffle1.txt` (`pwsm_tlns_java.py --shuffle 1 --seeds 5`), `dpbx.txt` (dpbx mode: the authors'
DPBD and DPBA in their runner's loop, one line a segment of 250 slots; `#` lines give the clock
and the machine's load when each stream, order and cell started).
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # analysis/, for pwsm_absolute and pwsm_tlns_java

import pwsm_absolute as pa  # noqa: E402
import pwsm_tlns_java as tj  # noqa: E402

KINDS = {"tlns": "lns", "sin": "sin", "log": "log"}
SEGMENT = 250  # the authors' SegmentUnitSize
USERS = 10_000


@dataclass(frozen=True)
class Cell:
    stream: str
    order: str
    e: float
    w: int
    bd: list[float]
    ba: list[float]

    @property
    def label(self) -> str:
        return f"E = {self.e:g}" if self.w == pa.TABLE5_W else f"w = {self.w}"

    def printed(self, mechanism: str) -> float:
        kind = KINDS[self.stream]
        if self.w == pa.TABLE5_W:
            return float(pa.TABLE5[kind][mechanism][pa.EPSILONS.index(self.e)])
        return float(pa.TABLE6[kind][mechanism][pa.WINDOWS.index(self.w)])


def read_fast(path: Path) -> list[Cell]:
    """Lines `[sin|log] order=O E=e w=w BD x1 .. xk | BA y1 .. yk` (no prefix: TLNS)."""
    cells = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if not parts or parts[0] == "finished":
            continue
        stream = parts.pop(0) if parts[0] in ("sin", "log") else "tlns"
        order = parts[0].removeprefix("order=")
        e, w = float(parts[1].removeprefix("E=")), int(parts[2].removeprefix("w="))
        i, j = parts.index("BD"), parts.index("|")
        bd = [float(x) for x in parts[i + 1 : j]]
        ba = [float(x) for x in parts[j + 2 :]]
        cells.append(Cell(stream, order, e, w, bd, ba))
    return cells


def m(x: float) -> str:
    """Millions, three significant digits."""
    return f"{x / 1e6:.3g}"


def span(values: Sequence[float], digits: int = 2) -> str:
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def pick(cells: list[Cell], stream: str, order: str) -> list[Cell]:
    return [c for c in cells if c.stream == stream and c.order == order]


def above(c: Cell) -> int:
    return sum(b > c.printed("plbu") for b in c.bd)


def tlns_table(cells: list[Cell]) -> None:
    fs, so = pick(cells, "tlns", "fs"), pick(cells, "tlns", "sorted")
    print("## TLNS, 10 runs per cell (fast_tlns.txt): AMRE in millions for BD and PLBU")
    print(
        "| TLNS cell | printed BD | BD, files as listed: median [min-max] | BD as listed: mean "
        "| BD, files sorted: median | BD sorted: mean | printed BA | BA as listed: mean "
        "| BA sorted: mean | printed PLBU | runs with BD > printed PLBU, as listed / sorted |"
    )
    print("|---|" + "---:|" * 10)
    for a, b in zip(fs, so, strict=True):
        assert (a.e, a.w) == (b.e, b.w)
        print(
            f"| {a.label} | {m(a.printed('bd'))} | {m(statistics.median(a.bd))} "
            f"[{m(min(a.bd))}-{m(max(a.bd))}] | {m(statistics.mean(a.bd))} "
            f"| {m(statistics.median(b.bd))} | {m(statistics.mean(b.bd))} "
            f"| {a.printed('ba'):,.0f} | {statistics.mean(a.ba):,.0f} "
            f"| {statistics.mean(b.ba):,.0f} | {m(a.printed('plbu'))} "
            f"| {above(a)} / {above(b)} of {len(a.bd)} |"
        )
    for name, group in (("as listed", fs), ("sorted", so)):
        med = [statistics.median(c.bd) / c.printed("bd") for c in group]
        mean = [statistics.mean(c.bd) / c.printed("bd") for c in group]
        ba = [statistics.mean(c.ba) / c.printed("ba") for c in group]
        runs = sum(above(c) for c in group)
        total = sum(len(c.bd) for c in group)
        mean_above = [c.label for c in group if statistics.mean(c.bd) > c.printed("plbu")]
        print(
            f"{name}: BD median / printed BD {span(med)}; BD mean / printed BD {span(mean)}; "
            f"BA mean / printed BA {span(ba)}; runs with BD > printed PLBU {runs} of {total}; "
            f"BD mean > printed PLBU in {len(mean_above)} of {len(group)} cells"
        )
    w40 = next(c for c in fs if c.w == 40)
    print(
        f"as listed, w = 40: BD mean {m(statistics.mean(w40.bd))} against printed PLBU "
        f"{m(w40.printed('plbu'))} million; printed BD / printed PLBU "
        f"{w40.printed('bd') / w40.printed('plbu'):.2f}"
    )
    shuffles = [c for c in cells if c.stream == "tlns" and c.order.startswith("shuffle")]
    med = [statistics.median(c.bd) / c.printed("bd") for c in shuffles]
    ba = [statistics.mean(c.ba) / c.printed("ba") for c in shuffles]
    mean = [statistics.mean(c.bd) / c.printed("bd") for c in shuffles]
    orders = sorted({c.order for c in shuffles})
    print(
        f"{', '.join(orders)} ({len(shuffles)} cell-orders, 10 runs each): BD median / printed "
        f"{span(med)}; BD mean / printed {span(mean)}; BA mean / printed {span(ba)}; runs with "
        f"BD > printed PLBU {sum(above(c) for c in shuffles)} of "
        f"{sum(len(c.bd) for c in shuffles)}"
    )


def read_counts(path: Path) -> list[tuple[str, int, int]]:
    with gzip.open(path, "rt") as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    return [(r[0], int(r[1]), int(r[2])) for r in rows]


def segment_spans(ones: list[int]) -> list[int]:
    return [
        max(ones[s : s + SEGMENT]) - min(ones[s : s + SEGMENT])
        for s in range(0, len(ones), SEGMENT)
    ]


def counts_and_zero(cells: list[Cell], results: Path) -> None:
    rows = read_counts(results / "counts_tlns_fs.txt.gz")
    print("\n## TLNS counts (counts_tlns_fs.txt.gz, 10,000 users)")
    print("first files as listed: " + ", ".join(r[0] for r in rows[:3]))
    for name, order in (("as listed", rows), ("sorted", sorted(rows))):
        spans = segment_spans([r[2] for r in order])
        print(
            f"{name}: the count of ones within a segment of {SEGMENT} spans "
            f"{statistics.mean(spans):,.0f} on average (segments' spans {min(spans):,}-"
            f"{max(spans):,})"
        )
    # a release stuck at zero errs (c0^2 + c1^2) / 2 at a slot (their per-slot error averages the
    # d = 2 states' squared errors), N^2/4 + (N/2 - c1)^2
    zero = statistics.mean((c0 * c0 + c1 * c1) / 2 for _, c0, c1 in rows)
    print(f"a release stuck at zero: AMRE {zero:,.2f}")
    fs = pick(cells, "tlns", "fs")
    ratio = [statistics.median(c.bd) / zero for c in fs]
    print(f"as listed, BD median / that: {span(ratio)}")
    walk_path = results / "walk_tlns.txt.gz"
    with gzip.open(walk_path, "rt") as f:
        java = [float(line.split(",")[1]) for line in f if line.strip()]
    py = tj.walk("rounded", len(java) - 1).p.tolist()
    equal = sum(a == b for a, b in zip(java[1:], py, strict=True))
    print(
        f"walk (walk_tlns.txt.gz, their TLNSFunction with p_0 = {java[0]} and Random(1)) against "
        f"pwsm_tlns_java.py's rounded walk: {equal} of {len(py)} steps equal"
    )
    p_by_file = {f"timestamp_{t:04d}.txt": p for t, p in enumerate(java)}
    zeros = [c1 for n, _, c1 in rows if p_by_file[n] == 0.0]
    z = [
        abs(c1 - USERS * p) / (USERS * p * (1 - p)) ** 0.5
        for n, _, c1 in rows
        for p in [p_by_file[n]]
        if 0.0 < p < 1.0
    ]
    print(
        f"the counts against that walk: {len(zeros)} slot files where p_t = 0, with ones in "
        f"{sum(c1 > 0 for c1 in zeros)} of them; over the other {len(z):,}, the largest "
        f"|c1 - N p_t| is {max(z):.2f} binomial standard deviations"
    )


def full_runs(cells: list[Cell], results: Path) -> None:
    print("\n## One full run per order (run_*.log, every file read by their classes)")
    pattern = re.compile(r"E=([\d.]+) w=(\d+)\s+BD AMRE=([\d.]+)\s+BA AMRE=([\d.]+)")
    for order, name in (("fs", "as listed"), ("sorted", "sorted")):
        log = (results / f"run_{order}.log").read_text()
        bd, ba, notes = [], [], []
        for e_s, w_s, bd_s, ba_s in pattern.findall(log):
            e, w, b = float(e_s), int(w_s), float(bd_s)
            bd.append(m(b))
            ba.append(f"{float(ba_s):,.0f}")
            fast = next(c for c in pick(cells, "tlns", order) if (c.e, c.w) == (e, w))
            lo, hi = min(fast.bd), max(fast.bd)
            if not lo <= b <= hi:
                edge = lo if b < lo else hi
                notes.append(
                    f"E={e:g} w={w}: {m(b)} outside [{m(lo)}, {m(hi)}] by {abs(b / edge - 1):.1%}"
                )
        wall = re.search(
            r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)",
            (results / f"run_{order}.time").read_text(),
        )
        print(
            f"{name} (wall {wall.group(1) if wall else '?'}): BD {', '.join(bd)} million; "
            f"BA {', '.join(ba)}; against the 10 fast runs: "
            + ("; ".join(notes) if notes else "all within the range")
        )


def pubs(results: Path) -> None:
    print("\n## BD's publications (pubs.txt, 2 runs per cell)")
    pattern = re.compile(
        r"order=(\w+) E=([\d.]+) w=(\d+) publications=(\d+) of \d+ slots, median \S+, 90th "
        r"percentile (\S+), max \S+; AMRE \S+ = stale (\S+) \+ noise (\S+) \+ cross"
    )
    rows = pattern.findall((results / "pubs.txt").read_text())
    totals: dict[tuple[str, str, str], int] = {}
    for r in rows:
        totals[(r[0], r[1], r[2])] = totals.get((r[0], r[1], r[2]), 0) + int(r[3])
    for order, name in (("fs", "as listed"), ("sorted", "sorted")):
        mine = [r for r in rows if r[0] == order]
        n = [int(r[3]) for r in mine]
        p90 = [float(r[4]) for r in mine]
        stale = [float(r[5]) / 1e6 for r in mine]
        noise = [float(r[6]) / 1e6 for r in mine]
        print(
            f"{name} ({len(mine)} runs): publications {min(n):,}-{max(n):,} of 10,000 slots; "
            f"noise part {min(noise):.3g}-{max(noise):.3g} million; staleness part "
            f"{min(stale):.3g}-{max(stale):.3g} million; 90th percentile of the noise scale "
            f"{min(p90):,.0f}-{max(p90):,.0f}"
        )
        by_cell: dict[tuple[str, str], list[int]] = {}
        for r in mine:
            by_cell.setdefault((r[1], r[2]), []).append(int(r[3]))
        print(
            "  per cell (E, w): "
            + "; ".join(
                f"{e}, {w}: {' and '.join(f'{x:,}' for x in v)}" for (e, w), v in by_cell.items()
            )
        )
    print(
        "as listed / sorted, publications per cell (E, w): "
        + "; ".join(
            f"{e}, {w}: {totals[('fs', e, w)] / totals[('sorted', e, w)]:.2f}"
            for (o, e, w) in totals
            if o == "fs"
        )
    )


def sin_log(cells: list[Cell]) -> None:
    print("\n## Sin and Log, 10 runs per cell (fast_sinlog.txt)")
    for stream in ("sin", "log"):
        for order, name in (("fs", "as listed"), ("sorted", "sorted")):
            group = pick(cells, stream, order)
            med = [statistics.median(c.bd) / c.printed("bd") for c in group]
            ba = [statistics.mean(c.ba) / c.printed("ba") for c in group]
            print(
                f"{stream} {name}: BA mean / printed {span(ba)}; BD median / printed {span(med)}; "
                f"runs with BD > printed PLBU {sum(above(c) for c in group)} of "
                f"{sum(len(c.bd) for c in group)}"
            )
    listed = [c for c in cells if c.order == "fs"]
    med = [statistics.median(c.bd) / c.printed("bd") for c in listed]
    ba = [statistics.mean(c.ba) / c.printed("ba") for c in listed]
    print(
        f"TLNS, Sin and Log as listed ({len(listed)} cells): BD median / printed {span(med)}; "
        f"BA mean / printed {span(ba)}"
    )
    for order in ("fs", "sorted"):
        for c in pick(cells, "log", order):
            if (c.e, c.w) in ((0.2, 120), (0.6, 200)):
                print(
                    f"log {order} {c.label}: BD > printed PLBU in {above(c)} of {len(c.bd)}; BD "
                    f"median {m(statistics.median(c.bd))} [{m(min(c.bd))}-{m(max(c.bd))}] against "
                    f"printed {m(c.printed('bd'))} million"
                )


def py_shuffle(results: Path) -> None:
    print("\n## Our simulator on the shuffled walk (py_shuffle1.txt)")
    bd5, ba5, s0, seeds, wins = [], [], [], 0, 0
    w40 = ""
    for line in (results / "py_shuffle1.txt").read_text().splitlines():
        if not line.startswith("| T"):
            continue
        c = [x.strip() for x in line.strip("|").split("|")]
        if c[0] == "T6 w=120":
            continue  # the same cell as T5 E=0.6
        bd5.append(float(c[11]))
        ba5.append(float(c[5]) / float(c[9]))
        s0.append(float(c[2]))
        won, of = (int(x) for x in c[13].split(" of "))
        wins, seeds = wins + won, seeds + of
        if c[0] == "T6 w=40":
            w40 = c[13]
    print(
        f"{len(bd5)} distinct cells: BD S5 / printed BD {span(bd5)}; BA S5 / printed BA "
        f"{span(ba5)}; BD S5 > undebiased PLBU in {wins} of {seeds} seed-cells (w = 40: {w40}); "
        f"BD S0 {min(s0):.2g}-{max(s0):.2g} million"
    )


BAND = (0.7, 1.4)  # the ratio band within which a figure is said to match 001's printed one


@dataclass(frozen=True)
class DpbxSegment:
    """One line of `dpbx.txt`: one segment (new mechanisms, as in the authors' runner)."""

    stream: str
    order: str
    e: float
    w: int
    run: int
    segment: int
    slots: int
    dpbd: float
    dpba: float
    seconds: float


DPBX_LINE = re.compile(
    r"(\w+) order=(\w+) E=([\d.]+) w=(\d+) run=(\d+) segment=(\d+) slots=(\d+) "
    r"DPBD ([\d.]+) DPBA ([\d.]+) seconds ([\d.]+)"
)


def read_dpbx(path: Path) -> list[DpbxSegment]:
    """The segment lines of a dpbx output (`#` lines and blank lines are skipped)."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        hit = DPBX_LINE.fullmatch(line.strip())
        if hit is None:
            raise ValueError(f"{path}:{number}: not a dpbx segment line: {line!r}")
        g = hit.groups()
        out.append(
            DpbxSegment(
                g[0],
                g[1],
                float(g[2]),
                int(g[3]),
                int(g[4]),
                int(g[5]),
                int(g[6]),
                float(g[7]),
                float(g[8]),
                float(g[9]),
            )
        )
    return out


def printed_value(stream: str, mechanism: str, e: float, w: int) -> float:
    """001's printed AMRE of a cell (Table 5 at w = 120, else Table 6 at E = 0.6)."""
    kind = KINDS[stream]
    if w == pa.TABLE5_W:
        return float(pa.TABLE5[kind][mechanism][pa.EPSILONS.index(e)])
    if e != pa.TABLE6_E:
        raise ValueError(f"E = {e:g}, w = {w} is in neither 001 Table 5 nor Table 6")
    return float(pa.TABLE6[kind][mechanism][pa.WINDOWS.index(w)])


@dataclass(frozen=True)
class DpbxCell:
    stream: str
    order: str
    e: float
    w: int
    segments: tuple[int, ...]
    runs: int
    dpbd: float  # slot-weighted mean over the segments run
    dpba: float
    seconds: float  # per segment, mean

    def ratio(self, mechanism: str) -> float:
        value = self.dpbd if mechanism == "dpbd" else self.dpba
        return value / printed_value(self.stream, mechanism, self.e, self.w)


def dpbx_cells(segments: list[DpbxSegment]) -> list[DpbxCell]:
    """Each stream, order and cell of the segment lines, in the order first seen."""
    groups: dict[tuple[str, str, float, int], list[DpbxSegment]] = {}
    for g in segments:
        groups.setdefault((g.stream, g.order, g.e, g.w), []).append(g)
    cells = []
    for (stream, order, e, w), group in groups.items():
        slots = sum(g.slots for g in group)
        cells.append(
            DpbxCell(
                stream,
                order,
                e,
                w,
                tuple(sorted({g.segment for g in group})),
                len({g.run for g in group}),
                sum(g.dpbd * g.slots for g in group) / slots,
                sum(g.dpba * g.slots for g in group) / slots,
                statistics.mean(g.seconds for g in group),
            )
        )
    return cells


def in_band(ratio: float) -> str:
    return "yes" if BAND[0] <= ratio <= BAND[1] else "no"


def dpbx_table(results: Path) -> None:
    path = results / "dpbx.txt"
    print("\n## The authors' DPBD and DPBA in their runner's loop (dpbx.txt)")
    if not path.exists():
        print("dpbx.txt absent: not run")
        return
    cells = dpbx_cells(read_dpbx(path))
    print(
        "| stream | cell | order | segments (of 40), runs | DPBD | printed DPBD | ratio | in "
        f"{BAND[0]}-{BAND[1]} | DPBA | printed DPBA | ratio | in {BAND[0]}-{BAND[1]} "
        "| s a segment (a full run: x40) |"
    )
    print("|---|---|---|---|" + "---:|" * 9)
    for c in cells:
        label = f"E = {c.e:g}" if c.w == pa.TABLE5_W else f"w = {c.w}"
        bd, ba = c.ratio("dpbd"), c.ratio("dpba")
        print(
            f"| {c.stream} | {label} | {'as listed' if c.order == 'fs' else c.order} "
            f"| {','.join(map(str, c.segments))}; {c.runs} | {c.dpbd:,.0f} "
            f"| {printed_value(c.stream, 'dpbd', c.e, c.w):,.0f} | {bd:.2f} | {in_band(bd)} "
            f"| {c.dpba:,.0f} | {printed_value(c.stream, 'dpba', c.e, c.w):,.0f} | {ba:.2f} "
            f"| {in_band(ba)} | {c.seconds:.0f} ({c.seconds * 40 / 60:.0f} min) |"
        )
    for order in ("fs", "sorted"):
        mine = [c for c in cells if c.order == order]
        if mine:
            bds = [c.ratio("dpbd") for c in mine]
            bas = [c.ratio("dpba") for c in mine]
            print(
                f"{'as listed' if order == 'fs' else order} ({len(mine)} cells): DPBD / printed "
                f"{span(bds)}, in band in {sum(in_band(r) == 'yes' for r in bds)}; DPBA / "
                f"printed {span(bas)}, in band in {sum(in_band(r) == 'yes' for r in bas)}"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=HERE / "results", help="raw outputs")
    args = parser.parse_args(argv)
    cells = read_fast(args.results / "fast_tlns.txt") + read_fast(args.results / "fast_sinlog.txt")
    tlns_table(cells)
    counts_and_zero(cells, args.results)
    full_runs(cells, args.results)
    pubs(args.results)
    sin_log(cells)
    py_shuffle(args.results)
    dpbx_table(args.results)


if __name__ == "__main__":
    main()
