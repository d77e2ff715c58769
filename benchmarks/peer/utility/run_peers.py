"""Run every local mechanism of the two peers on the comparison's workload; write
``benchmarks/peer/peer_utility.json`` (README.md beside this file says how to build the peers).

For each peer mechanism and seed the peer's driver writes its per-slot released frequencies;
AMSE is computed here, on frequencies, with `wevent.experiments.metrics.amse` against the stream's
true counts divided by n (``truth.csv`` of `benchmarks/peer/make_user_stream.py`), as
`benchmarks/bench_utility_parity.py` computes wevent's.

Usage (from the repository root)::

    python benchmarks/peer/utility/run_peers.py --data DIR --du-classpath CP --ldp-ids DIR \\
        [--seeds 5] [--out benchmarks/peer/peer_utility.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from wevent.experiments.metrics import amse
from wevent.experiments.stats import interval

HERE: Final = Path(__file__).resolve().parent
DU: Final = {
    "name": "WEventPLDPCode",
    "repo": "github.com/dulei715/WEventPLDPCode",
    "commit": "1da1f528064ca4b1973c3afba3e27b84af264b73",
    "library": "github.com/dulei715/java-tools-version-2.0 at "
    "47bb6ad8928c4f6c8c447b3b4fe50a54c77479e7 (org.edu.hnu:java-tools:2.01.02, the pom's)",
}
LDP_IDS: Final = {
    "name": "LDP-IDS",
    "repo": "github.com/pumpkinbo/LDP-IDS",
    "commit": "b2081145fd3fb74ebd470189f9bc5a0a17622590",
}
# (peer, peer's mechanism, wevent allocator, setting): the setting names the requirements file
# of make_user_stream.py (uniform_w3.csv, uniform_w20.csv, personalized.csv).
RUNS: Final = (
    ("LDP-IDS", "LBD", "lbd", "w3"),
    ("LDP-IDS", "LPD", "lpd", "w3"),
    ("WEventPLDPCode", "LPD", "lpd", "w3"),
    ("WEventPLDPCode", "LPA", "lpa", "w3"),
    ("LDP-IDS", "LBD", "lbd", "w20"),
    ("LDP-IDS", "LPD", "lpd", "w20"),
    ("WEventPLDPCode", "LPD", "lpd", "w20"),
    ("WEventPLDPCode", "LPA", "lpa", "w20"),
    ("WEventPLDPCode", "PLPD", "plpd", "personalized"),
    ("WEventPLDPCode", "PLPA", "plpa", "personalized"),
    ("WEventPLDPCode", "PLPD+", "plpd+", "personalized"),
    ("WEventPLDPCode", "PLPA+", "plpa+", "personalized"),
)
REQUIREMENTS: Final = {
    "w3": "uniform_w3.csv",
    "w20": "uniform_w20.csv",
    "personalized": "personalized.csv",
}


def truth_frequencies(data: Path) -> npt.NDArray[np.float64]:
    counts = np.loadtxt(data / "truth.csv", delimiter=",", skiprows=1, ndmin=2)[:, 1:]
    out: npt.NDArray[np.float64] = counts / counts.sum(axis=1, keepdims=True)
    return out


def read_release(path: Path) -> tuple[npt.NDArray[np.float64], int]:
    """(frequencies per slot, publications) of a driver's output ``slot,published,f0,...``."""
    arr = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return arr[:, 2:], int(arr[:, 1].sum())


def _version(cmd: Sequence[str]) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (done.stderr or done.stdout).splitlines()[0].strip()


def _loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def run_one(
    peer: str,
    mech: str,
    setting: str,
    seed: int,
    args: argparse.Namespace,
    out: Path,
    mse_file: Path,
) -> None:
    req = args.data / REQUIREMENTS[setting]
    stream = args.data / "stream.csv"
    if peer == "WEventPLDPCode":
        cmd = ["java", "-cp", args.du_classpath, "PeerUtility", str(stream), str(req), mech]
        cmd += [str(seed), str(out)]
    else:
        w = {"w3": "3", "w20": "20"}[setting]
        cmd = [sys.executable, str(HERE / "ldp_ids_driver.py"), str(args.ldp_ids), str(stream)]
        cmd += [w, "1", mech, str(seed), str(out), "--peer-mse", str(mse_file)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="make_user_stream.py's output")
    ap.add_argument("--du-classpath", required=True, help="PeerUtility and the peer's classes")
    ap.add_argument("--ldp-ids", type=Path, required=True, help="a checkout of LDP-IDS")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 1..N per mechanism")
    ap.add_argument("--out", type=Path, default=HERE.parent / "peer_utility.json")
    ap.add_argument("--keep", type=Path, help="keep the per-run release CSVs here")
    args = ap.parse_args(argv)
    truth = truth_frequencies(args.data)
    seeds = list(range(1, args.seeds + 1))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = _loadavg()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep if args.keep is not None else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for peer, mech, allocator, setting in RUNS:
            values: list[float] = []
            pubs: list[int] = []
            own: list[float] = []
            seconds: list[float] = []
            for seed in seeds:
                out = where / f"{peer}_{mech}_{setting}_s{seed}.csv".replace("+", "plus")
                mse_file = Path(tmp) / f"mse_{peer}_{mech}_{setting}_{seed}.csv"
                t0 = time.perf_counter()
                run_one(peer, mech, setting, seed, args, out, mse_file)
                seconds.append(round(time.perf_counter() - t0, 2))
                freq, published = read_release(out)
                values.append(amse(freq, truth))
                pubs.append(published)
                if mse_file.exists():
                    own.append(float(mse_file.read_text().strip().split(",")[-1]))
            iv = interval(values)
            row: dict[str, Any] = {
                "peer": peer,
                "mechanism": mech,
                "allocator": allocator,
                "setting": setting,
                "seeds": seeds,
                "amse": values,
                "mean": iv.mean,
                "low": iv.low,
                "high": iv.high,
                "publications": pubs,
                "seconds": seconds,
            }
            if own:
                row["peer_own_mse"] = own
            results.append(row)
            print(
                f"{peer:15} {mech:6} {setting:12} AMSE {iv.mean:.4g} [{iv.low:.4g}, {iv.high:.4g}]"
            )
    doc = {
        "what": "AMSE (000 Section VI-B, frequencies) of the peers' local mechanisms on "
        "make_user_stream.py's workload; see benchmarks/peer/utility/README.md",
        "workload": {
            "stream": "sin, n = 10000 users, d = 2, T = 200 slots, make_user_stream.py seed 0",
            "settings": {
                "w3": "everyone (w = 3, eps = 1)",
                "w20": "everyone (w = 20, eps = 1)",
                "personalized": "budgets {1, 1.5, 2, 2.5} x windows {5, 10, 15, 20}, "
                "uniform per user (personalized_population, seed 0)",
            },
        },
        "peers": [DU, LDP_IDS],
        "provenance": {
            "started": started,
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            "java": _version(["java", "-version"]),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "loadavg_before": load_before,
            "loadavg_after": _loadavg(),
        },
        "runs": results,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
