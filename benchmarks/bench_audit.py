"""Audit throughput of the numpy, DuckDB and Spark engines on one generated Parquet ledger.

    python benchmarks/bench_audit.py --charges 10000000            # numpy, duckdb, spark
    python benchmarks/bench_audit.py --charges 100000000 --engines duckdb,numpy
    python benchmarks/bench_audit.py --groups 1000 --users 100000     # group-heavy (PLPA+-like)
    python benchmarks/bench_audit.py --ledger L.parquet --requirements R.csv --engines duckdb

The ledger: ``--users`` users charged directly at every slot (charges / users slots), amounts
1/100, 1/50 or 3/100 drawn with a fixed seed, in fixed requirement classes (windows 10-80:
4 windows x 2 budgets; one user in 10,000 gets a bound below its spending, so every engine reports real violations.
``--groups SLOTS`` generates a group-heavy ledger instead (`generate_groups`: population
division, each user in about 0.1 x SLOTS sampled groups); ``--ledger``/``--requirements`` audit
an existing ledger. Each engine runs in a fresh process (peak resident memory of that process is reported; Spark's
JVM is a separate process capped by its 3 GB driver heap). The engines' verdicts are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

_AMOUNTS = ("1/100", "1/50", "3/100")
_WINDOWS = (10, 20, 40, 80)


def generate(path: Path, requirements: Path, charges: int, users: int, seed: int = 1) -> None:
    """Write the ledger in row groups of whole slots (never the whole table in memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    slots = charges // users
    ids = [f"u{i}" for i in range(users)]
    with requirements.open("w") as fh:
        fh.write("user,w,epsilon\n")
        for i, u in enumerate(ids):
            w = _WINDOWS[i % 4]
            # every slot costs at most 3/100, so w * 3/100 always holds; 1 user in 10,000 gets
            # w/100, below the average spend of 2/100 per slot
            num = w * 3 if i % 10_000 else w
            eps = f"{num}/100"
            fh.write(f"{u},{w},{eps}\n")
    rng = np.random.default_rng(seed)
    user_dict = pa.array(ids, type=pa.string())
    eps_dict = pa.array(_AMOUNTS, type=pa.string())
    empty = pa.array([""], type=pa.string())
    per_group = max(1, 10_000_000 // users)  # slots per row group
    schema = pa.schema(
        [
            ("slot", pa.int64()),
            ("user", pa.dictionary(pa.int32(), pa.string())),
            ("group", pa.dictionary(pa.int32(), pa.string())),
            ("epsilon", pa.dictionary(pa.int32(), pa.string())),
            ("part", pa.dictionary(pa.int32(), pa.string())),
            ("mechanism", pa.dictionary(pa.int32(), pa.string())),
            ("evidence", pa.dictionary(pa.int32(), pa.string())),
        ]
    )
    tmp = path.with_name(path.name + ".tmp")
    # Dictionary-encoded on disk; without the stored Arrow schema it reads back as plain strings.
    with pq.ParquetWriter(tmp, schema, store_schema=False) as writer:
        for first in range(1, slots + 1, per_group):
            n_slots = min(per_group, slots - first + 1)
            n = n_slots * users
            slot = np.repeat(np.arange(first, first + n_slots, dtype=np.int64), users)
            user_codes = np.tile(np.arange(users, dtype=np.int32), n_slots)
            eps_codes = rng.integers(0, 3, n, dtype=np.int32)
            zeros = pa.array(np.zeros(n, np.int32))
            writer.write_table(
                pa.table(
                    {
                        "slot": slot,
                        "user": pa.DictionaryArray.from_arrays(pa.array(user_codes), user_dict),
                        "group": pa.DictionaryArray.from_arrays(zeros, empty),
                        "epsilon": pa.DictionaryArray.from_arrays(pa.array(eps_codes), eps_dict),
                        "part": pa.DictionaryArray.from_arrays(zeros, empty),
                        "mechanism": pa.DictionaryArray.from_arrays(zeros, empty),
                        "evidence": pa.DictionaryArray.from_arrays(zeros, empty),
                    },
                    schema=schema,
                )
            )
    tmp.replace(path)


_CLASS_REQS = tuple((w, eps) for w in _WINDOWS for eps in (1, 2, 3, 4))  # eps in halves


def generate_groups(
    path: Path, requirements: Path, users: int, slots: int, sample: float = 0.05, seed: int = 1
) -> None:
    """A group-heavy ledger shaped like population division (PLPA+): ``users`` users in 16 fixed
    classes (windows 10-80, budgets 1/2-2; users u1, u2, ... in class order); at every slot
    each class charges two groups, each a fresh random ``sample`` of the class. A group charge
    is eps / (2w), so two per slot never exceed a window's bound: every user is compliant except
    one in 10,000, whose bound is a single charge (violated by any two in one window). Each user
    is in about 2 x sample x slots groups; rows are written in chunks of slots."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    per_class = users // len(_CLASS_REQS)
    with requirements.open("w") as fh:
        fh.write("user,w,epsilon\n")
        for c, (w, half) in enumerate(_CLASS_REQS):
            for i in range(c * per_class + 1, (c + 1) * per_class + 1):
                bound = f"{half}/{4 * w}" if i % 10_000 == 0 else f"{half}/2"
                fh.write(f"u{i},{w},{bound}\n")
    rng = np.random.default_rng(seed)
    schema = pa.schema(
        [
            (n, pa.int64() if n == "slot" else pa.string())
            for n in ("slot", "user", "group", "epsilon")
        ]
    )
    tmp = path.with_name(path.name + ".tmp")
    chunk = max(1, 2_000_000 // max(1, users))  # slots per chunk: about 2 x 10^6 draws
    with pq.ParquetWriter(tmp, schema) as writer:
        for first in range(1, slots + 1, chunk):
            chunk_slots = range(first, min(first + chunk, slots + 1))
            m_user: list[Any] = []
            m_group: list[str] = []
            c_slot: list[int] = []
            c_group: list[str] = []
            c_eps: list[str] = []
            for c, (w, half) in enumerate(_CLASS_REQS):
                draws = rng.random((len(chunk_slots) * 2, per_class)) < sample
                counts = draws.sum(axis=1)
                cols = np.nonzero(draws)[1] + c * per_class + 1
                names = [f"sample-slot{t}-class{c}-draw{g}" for t in chunk_slots for g in (0, 1)]
                m_user.append(cols)
                m_group.extend(np.repeat(np.array(names, dtype=object), counts).tolist())
                c_slot.extend(t for t in chunk_slots for _ in (0, 1))
                c_group.extend(names)
                c_eps.extend([f"{half}/{4 * w}"] * len(names))
            members = np.concatenate(m_user)
            n_m, n_c = len(members), len(c_slot)
            writer.write_table(
                pa.table(
                    {
                        "slot": pa.array([None] * n_m + c_slot, pa.int64()),
                        "user": pa.array([f"u{u}" for u in members.tolist()] + [""] * n_c),
                        "group": pa.array(m_group + c_group),
                        "epsilon": pa.array([""] * n_m + c_eps),
                    },
                    schema=schema,
                )
            )
    tmp.replace(path)


def _child(engine: str, ledger: str, requirements: str, memory_limit: str) -> None:
    """Run one audit and print JSON: seconds, verdict summary, peak RSS."""
    import resource

    from wevent.accounting.formats import read_requirements
    from wevent.verifier.audit import run_audit

    population = read_requirements([Path(requirements)])
    start = time.perf_counter()

    def step(name: str) -> None:  # the step reached, for a run stopped by the timeout
        print(f"step {time.perf_counter() - start:.0f} s: {name}", file=sys.stderr, flush=True)

    result = run_audit(
        [Path(ledger)], population, engine=engine, memory_limit=memory_limit, progress=step
    )
    seconds = time.perf_counter() - start
    v = result.verdict
    print(
        json.dumps(
            {
                "engine": engine,
                "seconds": seconds,
                "violations": len(v.violations),
                "classes": {k: str(x) for k, x in sorted(v.class_utilization.items())},
                "per_user_charges": v.per_user_charges,
                "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            }
        )
    )


def _watch_rss(limit_gib: float) -> None:
    """Stop this process (exit 3, with a message) when its resident memory passes the limit, so
    a benchmark never pushes a shared machine into swapping or the OOM killer."""
    import threading

    page = os.sysconf("SC_PAGE_SIZE")

    def watch() -> None:
        while True:
            with open("/proc/self/statm") as fh:
                rss = int(fh.read().split()[1]) * page / 2**30
            if rss > limit_gib:
                print(f"stopped: resident memory passed {limit_gib:.0f} GiB", file=sys.stderr)
                sys.stderr.flush()
                os._exit(3)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--charges", type=int, default=10_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--engines", default="numpy,duckdb,spark")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/wevent-bench-audit"))
    parser.add_argument("--memory-limit", default="4GB")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per engine")
    parser.add_argument(
        "--rss-limit-gib", type=float, default=14.0, help="stop an engine's process above this"
    )
    parser.add_argument(
        "--groups", type=int, default=0, help="group-heavy ledger of this many slots"
    )
    parser.add_argument("--ledger", type=Path, help="audit this ledger (with --requirements)")
    parser.add_argument("--requirements", type=Path)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _watch_rss(args.rss_limit_gib)
        _child(args.child[0], args.child[1], args.child[2], args.memory_limit)
        return
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.ledger:
        ledger, reqs = args.ledger, args.requirements
        what = f"{ledger.name}"
    elif args.groups:
        ledger = args.dir / f"groups-{args.users}-{args.groups}.parquet"
        reqs = args.dir / f"groups-requirements-{args.users}.csv"
        what = f"group-heavy, {args.users:,} users, {args.groups:,} slots"
        if not ledger.exists() or not reqs.exists():
            start = time.perf_counter()
            generate_groups(ledger, reqs, args.users, args.groups)
            print(f"generated {ledger} in {time.perf_counter() - start:.1f} s", flush=True)
    else:
        ledger = args.dir / f"ledger-{args.charges}-{args.users}.parquet"
        reqs = args.dir / f"requirements-{args.users}.csv"
        what = f"{args.charges:,} charges, {args.users:,} users"
        if not ledger.exists() or not reqs.exists():
            start = time.perf_counter()
            generate(ledger, reqs, args.charges, args.users)
            print(f"generated {ledger} in {time.perf_counter() - start:.1f} s", flush=True)
    size = ledger.stat().st_size / 2**20
    print(f"ledger: {what}, {size:.0f} MiB Parquet")
    results = []
    for engine in args.engines.split(","):
        cmd = [
            sys.executable,
            __file__,
            "--memory-limit",
            args.memory_limit,
            "--rss-limit-gib",
            str(args.rss_limit_gib),
            "--child",
            engine,
            str(ledger),
            str(reqs),
        ]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        # A session of its own, so a timeout also stops Spark's JVM.
        child = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            stdout, stderr = child.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            _, err = child.communicate()
            steps = [x for x in err.splitlines() if x.startswith("step ")]
            reached = f" (last {steps[-1]})" if steps else ""
            print(
                f"| {engine} | {what} | stopped after {args.timeout:.0f} s{reached} |", flush=True
            )
            continue
        proc = subprocess.CompletedProcess(cmd, child.returncode, stdout, stderr)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            print(f"| {engine} | failed: {tail} |", flush=True)
            continue
        r = json.loads(lines[-1])
        results.append(r)
        rate = r["per_user_charges"] / r["seconds"] / 1e6
        print(
            f"| {engine} | {r['per_user_charges']:,} per-user charges | {r['seconds']:.1f} s | "
            f"{rate:.2f} M/s | "
            f"{r['violations']} violations | peak RSS {r['peak_rss_gib']:.1f} GiB |",
            flush=True,
        )
    same = {json.dumps([r["violations"], r["classes"], r["per_user_charges"]]) for r in results}
    print("engines agree" if len(same) <= 1 else f"ENGINES DISAGREE: {same}")


if __name__ == "__main__":
    main()
