"""wevent's driver of LDP-IDS's local mechanisms (github.com/pumpkinbo/LDP-IDS; README.md here).

The peer's `LBD(u, d, w, e, rounds, c, beta)` and `LPD(...)` (files ``budget_division/LBD.py``
and ``budget_division/LPD.py`` of its checkout) take the whole stream as an (N, T) array of
values 1..d and the true counts c (d, T), and return only their own error averages. The per-slot
release is their local array ``cbd`` (estimated counts, d x T); this driver reads it when the
function returns (a trace function on that one frame: the peer's code runs unchanged) and writes
it as frequencies (``cbd / N``): ``slot,published,f0,...,f(d-1)``, ``published`` 1 where the
release changed from the slot before or at slot 1 (the code keeps no flag; a publication that
reproduces the last release exactly has probability 0).

One round (``rounds = 1``) per run, seeded by ``numpy.random.seed(SEED)`` (the peer draws from
numpy's global generator). ``beta = 1/2``: the dissimilarity step of LBD spends eps / (2w) and
LPD's samples floor(N / (2w)) users, 002's setting and wevent's.

Usage::

    python ldp_ids_driver.py PEER_DIR STREAM_CSV W EPSILON MECHANISM SEED OUT_CSV [--peer-mse FILE]

``MECHANISM`` is LBD or LPD; ``--peer-mse`` appends the peer's own MSE (its counts divided by
N^2, on the frequency scale of AMSE) to FILE as ``mechanism,w,seed,mse``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import numpy.typing as npt

BETA = 0.5
MECHANISMS = {"LBD": "budget_division.LBD", "LPD": "budget_division.LPD"}


def read_stream(path: Path) -> npt.NDArray[np.int64]:
    """values[i, t - 1]: the value (0-based) at slot t of the i-th user of the file."""
    users: dict[str, int] = {}
    rows: list[tuple[int, int, int]] = []
    with path.open() as f:
        if f.readline().strip() != "user,slot,value":
            raise SystemExit(f"{path}: expected the header user,slot,value")
        for line in f:
            user, slot, value = line.rstrip("\n").split(",")
            rows.append((users.setdefault(user, len(users)), int(slot), int(value)))
    arr = np.array(rows, dtype=np.int64)
    out = np.full((len(users), int(arr[:, 1].max())), -1, dtype=np.int64)
    out[arr[:, 0], arr[:, 1] - 1] = arr[:, 2]
    if (out < 0).any():
        raise SystemExit(f"{path}: every user needs a value at every slot")
    return out


def capture_release(func: Any, *args: Any) -> tuple[Any, npt.NDArray[np.float64]]:
    """Call ``func(*args)`` and return its result and its local ``cbd`` when it returns."""
    code = func.__code__
    seen: dict[str, Any] = {}

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            seen["cbd"] = np.array(frame.f_locals["cbd"], dtype=np.float64)
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code is code:
            frame.f_trace_lines = False
            return local
        return None

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = func(*args)
    finally:
        sys.settrace(old)
    if "cbd" not in seen:
        raise RuntimeError(f"{func.__name__} returned without a cbd array")
    return result, seen["cbd"]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("peer_dir", type=Path)
    ap.add_argument("stream", type=Path)
    ap.add_argument("w", type=int)
    ap.add_argument("epsilon", type=float)
    ap.add_argument("mechanism", choices=sorted(MECHANISMS))
    ap.add_argument("seed", type=int)
    ap.add_argument("out", type=Path)
    ap.add_argument("--peer-mse", type=Path)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.peer_dir.resolve()))
    module = importlib.import_module(MECHANISMS[args.mechanism])
    func = getattr(module, args.mechanism)

    values = read_stream(args.stream)
    n, slots = values.shape
    d = int(values.max()) + 1
    truth = np.zeros((d, slots), dtype=np.float64)
    for t in range(slots):
        truth[:, t] = np.bincount(values[:, t], minlength=d)
    np.random.seed(args.seed)
    errors, cbd = capture_release(func, values + 1, d, args.w, args.epsilon, 1, truth, BETA)
    freq = cbd / n
    with args.out.open("w") as f:
        f.write("slot,published," + ",".join(f"f{j}" for j in range(d)) + "\n")
        for t in range(slots):
            changed = t == 0 or bool(np.any(cbd[:, t] != cbd[:, t - 1]))
            cells = ",".join(repr(float(x)) for x in freq[:, t])
            f.write(f"{t + 1},{int(changed)},{cells}\n")
    if args.peer_mse is not None:
        with args.peer_mse.open("a") as f:
            f.write(f"{args.mechanism},{args.w},{args.seed},{float(errors[2]) / n**2!r}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
