"""The disk's sync latency, the floor under a write-ahead commit (run on demand:
``python benchmarks/bench_fsync.py [--count 1000] [--dir DIR]``).

A chained JSONL commit appends its lines and fsyncs the ledger, then writes its checkpoint slot
in place and fdatasyncs it: two syncs. This measures each kind ``--count`` times in a temporary
directory (on the disk under test) and prints the mean per sync, so the write-ahead benchmark's
overhead can be set against what no implementation can avoid: syncs per commit x commits per
slot x this latency.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    sync = getattr(os, "fdatasync", os.fsync)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        log = os.open(Path(tmp) / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        start = time.perf_counter()
        for _ in range(args.count):
            os.write(log, b"x" * 200 + b"\n")
            os.fsync(log)
        append = (time.perf_counter() - start) / args.count
        os.close(log)
        mark = os.open(Path(tmp) / "mark", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(mark, b" " * 8192)
        os.fsync(mark)
        start = time.perf_counter()
        for i in range(args.count):
            os.pwrite(mark, b"y" * 200, (i % 2) * 4096)
            sync(mark)
        in_place = (time.perf_counter() - start) / args.count
        os.close(mark)
    print(
        f"append + fsync: {append * 1e3:.3f} ms; in-place write + fdatasync: {in_place * 1e3:.3f} ms"
    )
    print(f"one commit (both): {(append + in_place) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
