"""PeGaSus's grouping against the path streamdp-benchmark runs (docs/allocators.md, "PeGaSus").

The registered `pegasus` path opens a new group at every slot, as streamdp-benchmark's code does
(``DEBUG_FORCE_NEW_GROUP_EACH_TIMESTAMP = true``): its release is the perturbed count. The same
kernel with `PegasusPath(d)` (grouping, median smoother) is run beside it on the same streams and
seeds; the script prints the mean absolute error per cell (the benchmark's MAE) of each run and
their mean per stream. Both spend the same budgets (the kernel is the same); only the release
differs. ``python analysis/pegasus_grouping.py`` (5 seeds, 20,000 users, 200 slots, w = 10,
eps = 1; about half a minute).
"""

from __future__ import annotations

import argparse
import dataclasses
from fractions import Fraction

import numpy as np

from wevent.experiments import metrics
from wevent.experiments.populations import uniform_population
from wevent.experiments.running import run_mechanism
from wevent.mechanisms.allocators.registry import BUILTIN
from wevent.mechanisms.streamdp.pegasus import PegasusPath
from wevent.mechanisms.streams import SyntheticStream

# `pegasus` with the grouping path, run as a third-party allocator (``pegasus_grouping:GROUPING``)
GROUPING = dataclasses.replace(BUILTIN["pegasus"], data_path=PegasusPath)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--slots", type=int, default=200)
    args = parser.parse_args()
    pop = uniform_population(args.users, 10, Fraction(1))
    sizes = [c.count for c in pop.classes]
    print("| stream | path | mean absolute error per seed | mean |")
    print("|---|---|---|---:|")
    for kind in ("lns", "sin", "log"):
        for label, target in (
            ("no grouping (registered)", "pegasus"),
            ("grouping", "pegasus_grouping:GROUPING"),
        ):
            errors = []
            for seed in range(args.seeds):
                stream = SyntheticStream(kind, args.slots, sizes, seed=seed)
                run = run_mechanism(target, pop, stream, slots=args.slots, seed=seed)
                release = np.array([r.release for r in run.records])
                truth = np.array([r.truth for r in run.records])
                errors.append(metrics.mean_abs_error(release, truth))
            shown = ", ".join(f"{e:.1f}" for e in errors)
            print(f"| {kind} | {label} | {shown} | {float(np.mean(errors)):.1f} |")


if __name__ == "__main__":
    main()
