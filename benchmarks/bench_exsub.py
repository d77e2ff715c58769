"""Cost of ExSub (run on demand: `make bench`): the exact online client per user and the
vectorized simulation the experiments use. Measurements, not tests.

The exact client (`wevent.mechanisms.exsub_stream`) draws the subgroup with big-integer weights and runs
Algorithm S in Python: its cost per user is O(d T_h + s) steps. The vectorized simulation
(`wevent.mechanisms.exsub_baselines.exsub_estimates`) is numpy over all users of a level at once.
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction

import numpy as np

from wevent.experiments.exsub_experiment import padded_residues
from wevent.mechanisms.exsub import RandomChooser
from wevent.mechanisms.exsub_baselines import exsub_estimates
from wevent.mechanisms.exsub_stream import ExSubClient, ExSubProtocol, sparse_streams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer users")
    args = parser.parse_args()
    T, d, s = 128, 8, 8
    users = 200 if args.quick else 2000
    x = sparse_streams(users, T, d, s, np.random.default_rng(0))
    protocol = ExSubProtocol(T=T, d=d, s=s)
    chooser = RandomChooser(0)
    start = time.perf_counter()
    for i in range(users):
        client = ExSubClient(protocol, Fraction(1), chooser, level=0)
        client.start()
        for t in range(T):
            client.observe(x[i, t])
        client.finish()
    exact = (time.perf_counter() - start) / users
    n = 10_000 if args.quick else 100_000
    big = sparse_streams(n, T, d, s, np.random.default_rng(1))
    R = padded_residues(big, 2, 0, s)
    start = time.perf_counter()
    exsub_estimates(R, s, Fraction(1), np.random.default_rng(2))
    vec = time.perf_counter() - start
    print("| path | size | time |")
    print("|---|---|---|")
    print(f"| exact online client, level 0 | d' = {d * T + s}, one user | {exact * 1e3:.2f} ms |")
    print(f"| vectorized simulation, level 0 | d' = {d * T + s}, {n:,} users | {vec:.2f} s |")


if __name__ == "__main__":
    main()
