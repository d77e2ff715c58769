"""wevent's local allocators against the peers' implementations: AMSE on one workload.

The workload is `benchmarks/peer/make_user_stream.py`'s: wevent's Sin stream with n = 10,000
users, d = 2, T = 200 slots as a per-user CSV, and three requirement files (everyone (3, 1),
everyone (20, 1), and a personalized mix of budgets {1, 1.5, 2, 2.5} and windows {5, 10, 15,
20}). Every local allocator runs on it through `wevent.experiments.running.run_mechanism` (the
guard in the loop, as `wevent run` does) with seeds 1..``--seeds``; AMSE (000 Section VI-B,
`wevent.experiments.metrics.amse`) on frequencies. The peers' figures are read from
``benchmarks/peer/peer_utility.json`` (written by ``benchmarks/peer/utility/run_peers.py``, which
drives the peers' own code; see ``benchmarks/peer/utility/README.md``).

The table: allocator and setting, wevent's mean AMSE [95% interval], each peer's, the ratio of
wevent's mean to the best peer's mean, and whether wevent is within 10% of it (ratio <= 1.1).
Lower is better.

``--wevent-option KEY=VALUE`` (repeatable) is passed to `run_mechanism` as the keyword argument
``KEY`` (VALUE read as an integer, a float, true/false, or else text). The local allocators'
release options (`wevent.mechanisms.local.ReleaseOptions`) have flags of their own (``--post``,
``--project-test``, ``--pool``, ``--first-publication``), which take precedence over a
``--wevent-option release=...``.

Usage (from the repository root)::

    python benchmarks/bench_utility_parity.py [--data DIR] [--seeds 5] [--only lpd,plpd+]
        [--settings w3,w20,personalized] [--post none|clip|simplex] [--project-test] [--pool]
        [--first-publication] [--wevent-option KEY=VALUE ...] [--json OUT]
    python benchmarks/bench_utility_parity.py --table-from OUT   # the table of a saved run

Without ``--data`` the workload is generated into a temporary folder first (a few seconds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np

from wevent.accounting.formats import read_requirements
from wevent.experiments import metrics
from wevent.experiments.running import open_stream, run_mechanism
from wevent.experiments.stats import Interval, interval
from wevent.mechanisms.local import POST_PROCESSING, ReleaseOptions

ROOT: Final = Path(__file__).resolve().parent.parent
PEER_JSON: Final = ROOT / "benchmarks" / "peer" / "peer_utility.json"
PEERS: Final = ("LDP-IDS", "WEventPLDPCode")
WITHIN: Final = 1.10  # "within 10% of the best peer"
# (allocator, setting): the settings name make_user_stream.py's requirement files.
CASES: Final = (
    ("lbu", "w3"),
    ("lsp", "w3"),
    ("lbd", "w3"),
    ("lba", "w3"),
    ("lpu", "w3"),
    ("lpd", "w3"),
    ("lpa", "w3"),
    ("lbu", "w20"),
    ("lsp", "w20"),
    ("lbd", "w20"),
    ("lba", "w20"),
    ("lpu", "w20"),
    ("lpd", "w20"),
    ("lpa", "w20"),
    ("plbu", "personalized"),
    ("plpd", "personalized"),
    ("plpa", "personalized"),
    ("plpd+", "personalized"),
    ("plpa+", "personalized"),
)
REQUIREMENTS: Final = {
    "w3": "uniform_w3.csv",
    "w20": "uniform_w20.csv",
    "personalized": "personalized.csv",
}


@dataclass(frozen=True)
class Row:
    """One line of the table: an allocator in a setting, wevent's and each peer's AMSE."""

    allocator: str
    setting: str
    wevent: Interval
    peers: dict[str, Interval]

    @property
    def best_peer(self) -> tuple[str, Interval] | None:
        if not self.peers:
            return None
        return min(self.peers.items(), key=lambda kv: kv[1].mean)

    @property
    def ratio(self) -> float:
        best = self.best_peer
        if best is None or not best[1].mean > 0:
            return math.nan
        return self.wevent.mean / best[1].mean

    @property
    def within(self) -> bool | None:
        r = self.ratio
        return None if math.isnan(r) else r <= WITHIN


def build_rows(
    wevent: Mapping[tuple[str, str], Sequence[float]],
    peers: Mapping[tuple[str, str], Mapping[str, Sequence[float]]],
) -> list[Row]:
    """One `Row` per (allocator, setting) of ``wevent`` (per-seed AMSE lists), in its order,
    with the peers' per-seed lists of the same key."""
    return [
        Row(
            allocator,
            setting,
            interval(list(values)),
            {p: interval(list(v)) for p, v in sorted(peers.get((allocator, setting), {}).items())},
        )
        for (allocator, setting), values in wevent.items()
    ]


def _cell(iv: Interval | None) -> str:
    if iv is None:
        return "-"
    if iv.n < 2 or math.isnan(iv.low):
        return f"{iv.mean:.3g}"
    return f"{iv.mean:.3g} [{iv.low:.3g}, {iv.high:.3g}]"


def markdown(rows: Sequence[Row], peer_names: Sequence[str] = PEERS) -> str:
    """The Markdown table of ``rows``: allocator, setting, wevent, each peer, ratio, within."""
    head = ["allocator", "setting", "wevent AMSE", *peer_names, "wevent / best peer", "within 10%"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = r.ratio
        within = r.within
        cells = [
            r.allocator,
            r.setting,
            _cell(r.wevent),
            *(_cell(r.peers.get(p)) for p in peer_names),
            "-" if math.isnan(ratio) else f"{ratio:.2f}",
            "-" if within is None else ("yes" if within else "no"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` with VALUE an int, a float, true/false, or text."""
    key, sep, raw = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    value: object = raw
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        for kind in (int, float):
            try:
                value = kind(raw)
                break
            except ValueError:
                continue
    return key, value


def read_peers(path: Path) -> tuple[dict[tuple[str, str], dict[str, list[float]]], dict[str, Any]]:
    """The peers' per-seed AMSE by (allocator, setting) and peer, and the file's provenance
    (nothing when the file does not exist)."""
    if not path.exists():
        print(f"no peer figures: {path} does not exist", file=sys.stderr)
        return {}, {}
    doc = json.loads(path.read_text())
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for run in doc["runs"]:
        key = (run["allocator"], run["setting"])
        out.setdefault(key, {})[run["peer"]] = [float(x) for x in run["amse"]]
    return out, doc.get("provenance", {})


def run_wevent(
    allocator: str, setting: str, data: Path, seed: int, options: Mapping[str, Any]
) -> tuple[float, int]:
    """(AMSE, publications) of one wevent run."""
    population = read_requirements(data / REQUIREMENTS[setting])
    stream = open_stream(str(data / "stream.csv"), population, None, seed, None)
    summary = run_mechanism(
        allocator, population, stream, slots=stream.slots, seed=seed, **dict(options)
    )
    if not summary.ok:
        raise RuntimeError(f"{allocator} ({setting}, seed {seed}): {summary.refusal}")
    rel = np.stack([r.release for r in summary.records]).astype(np.float64) / summary.users
    tru = np.stack([r.truth for r in summary.records]).astype(np.float64) / summary.users
    return metrics.amse(rel, tru), summary.count("published")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, help="make_user_stream.py's output (default: generate)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--only", help="comma-separated allocators")
    ap.add_argument("--settings", help="comma-separated settings (w3, w20, personalized)")
    ap.add_argument("--peers", type=Path, default=PEER_JSON)
    ap.add_argument("--wevent-option", type=parse_option, action="append", default=[])
    ap.add_argument(
        "--post",
        choices=POST_PROCESSING,
        default="none",
        help="wevent's release post-processing (ReleaseOptions.post; default: the papers')",
    )
    ap.add_argument(
        "--project-test",
        action="store_true",
        help="post-process the test's estimate too (ReleaseOptions.project_test)",
    )
    ap.add_argument(
        "--pool", action="store_true", help="pool dissimilarity reports (ReleaseOptions)"
    )
    ap.add_argument(
        "--first-publication", action="store_true", help="publish slot 1 (ReleaseOptions.first)"
    )
    ap.add_argument("--json", type=Path, help="also write the per-seed figures here")
    ap.add_argument(
        "--table-from", type=Path, help="print the table of a saved --json instead of running"
    )
    args = ap.parse_args(argv)
    if args.table_from is not None:
        saved = json.loads(args.table_from.read_text())
        figures: dict[tuple[str, str], list[float]] = {}
        for key, values in saved["amse"].items():
            allocator, _, setting = key.partition("/")
            figures[(allocator, setting)] = [float(v) for v in values]
        print(markdown(build_rows(figures, read_peers(args.peers)[0])))
        return 0
    options = dict(args.wevent_option)
    release = ReleaseOptions(
        post=args.post,
        pool=args.pool,
        first=args.first_publication,
        project_test=args.project_test,
    )
    if not release.default:
        options["release"] = release
    only = None if args.only is None else set(args.only.split(","))
    settings = None if args.settings is None else set(args.settings.split(","))
    cases = [
        c
        for c in CASES
        if (only is None or c[0] in only) and (settings is None or c[1] in settings)
    ]
    peers, peer_provenance = read_peers(args.peers)
    with tempfile.TemporaryDirectory() as tmp:
        data: Path = args.data
        if data is None:
            data = Path(tmp)
            maker = ROOT / "benchmarks" / "peer" / "make_user_stream.py"
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            subprocess.run([sys.executable, str(maker), str(data)], check=True, env=env)
        load_before = os.getloadavg()
        t0 = time.perf_counter()
        results: dict[tuple[str, str], list[float]] = {}
        publications: dict[str, list[int]] = {}
        for allocator, setting in cases:
            values, pubs = [], []
            for seed in range(1, args.seeds + 1):
                value, published = run_wevent(allocator, setting, data, seed, options)
                values.append(value)
                pubs.append(published)
            results[(allocator, setting)] = values
            publications[f"{allocator}/{setting}"] = pubs
            print(f"  {allocator:6} {setting:12} {np.mean(values):.4g}", file=sys.stderr)
        seconds = time.perf_counter() - t0
        load_after = os.getloadavg()
    rows = build_rows(results, peers)
    print(markdown(rows))
    print()
    print(
        f"wevent: {args.seeds} seeds per row, release options {release.describe()}, "
        f"other options {args.wevent_option or 'none'}, {seconds:.0f} s, "
        f"load {load_before[0]:.2f} -> {load_after[0]:.2f} (1-min averages); peers: "
        f"{args.peers.name}, measured {peer_provenance.get('started', '?')}"
    )
    if args.json is not None:
        doc = {
            "measured": datetime.now(UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "options": {
                k: v.describe() if isinstance(v, ReleaseOptions) else str(v)
                for k, v in options.items()
            },
            "loadavg_before": list(load_before),
            "loadavg_after": list(load_after),
            "amse": {f"{a}/{s}": v for (a, s), v in results.items()},
            "publications": publications,
        }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
