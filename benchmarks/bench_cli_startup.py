"""The command line's start-up: how long a fresh `wevent` process takes before it does any work
(run on demand; the figures are in docs/development.md, "The command line's start-up").

Each case is a fresh process, timed ``--runs`` times: `import wevent.cli`; `wevent --help`,
`wevent check --help` and `wevent run --help` through the console script; and two documented
commands as tests/test_docs.py runs them (`python -m wevent check` on the bundled compliant
example, `python -m wevent trace dpba` on 001's Table 3). The table gives the median wall time
and the median CPU time (user + system of the child: on this shared 2-core machine the wall time
follows the load, printed before and after, the CPU time much less).

Each ``--tree DIR`` is a source tree run with ``PYTHONPATH=DIR`` from that directory (this
repository when none is given); with several, their runs interleave, so they share the load.
Comparing with an earlier commit: ``git archive COMMIT | tar -x -C /tmp/base``, then ``--tree
/tmp/base --tree .``. ``--bytecode`` caches the compiled modules (``PYTHONPYCACHEPREFIX`` in a
temporary directory, one per tree, warmed by one run of each case) where the environment would
otherwise decide (``PYTHONDONTWRITEBYTECODE=1`` compiles wevent's modules in every process).

    .venv/bin/python benchmarks/bench_cli_startup.py --runs 5 --tree /tmp/base --tree .
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
EXAMPLES = "wevent/examples"
CASES: list[tuple[str, list[str]]] = [
    ("python -c 'import wevent.cli'", [sys.executable, "-c", "import wevent.cli"]),
    ("wevent --help", [str(BIN / "wevent"), "--help"]),
    ("wevent check --help", [str(BIN / "wevent"), "check", "--help"]),
    ("wevent run --help", [str(BIN / "wevent"), "run", "--help"]),
    (
        "python -m wevent check (the README's compliant example)",
        [
            *(sys.executable, "-m", "wevent", "check", f"{EXAMPLES}/compliant.jsonl"),
            *("-r", f"{EXAMPLES}/requirements.csv", "-r", f"{EXAMPLES}/requirements.dynamic.csv"),
        ],
    ),
    (
        "python -m wevent trace dpba (001 Table 3, as in the README)",
        [
            *(sys.executable, "-m", "wevent", "trace", "dpba"),
            *("-r", f"{EXAMPLES}/001-table3.csv", "--decisions", "1,0,1,0,1"),
        ],
    ),
]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def environment(tree: Path, cache: Path | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def run_once(argv: list[str], tree: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process; it must exit 0."""
    cpu, wall = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {tree}: exit {done.returncode}\n{done.stderr}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="processes per case and tree")
    parser.add_argument("--tree", type=Path, action="append", help="a source tree (repeatable)")
    parser.add_argument("--bytecode", action="store_true", help="cache the compiled modules")
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [Path(__file__).resolve().parents[1]])]
    with tempfile.TemporaryDirectory() as tmp:
        envs = [
            environment(tree, Path(tmp) / str(k) if args.bytecode else None)
            for k, tree in enumerate(trees)
        ]
        if args.bytecode:
            for _, argv in CASES:
                for tree, env in zip(trees, envs, strict=True):
                    run_once(argv, tree, env)
        bytecode = os.environ.get("PYTHONDONTWRITEBYTECODE", "")
        mode = (
            "bytecode cached (PYTHONPYCACHEPREFIX per tree, PYTHONDONTWRITEBYTECODE lifted)"
            if args.bytecode
            else f"the environment as it is (PYTHONDONTWRITEBYTECODE={bytecode!r})"
        )
        print(f"{mode}; {args.runs} runs per case")
        print(f"load averages before: {load()}")
        for k, tree in enumerate(trees, 1):
            print(f"tree {k}: {tree}")
        numbers = range(1, len(trees) + 1)
        heads = [f"wall, tree {k}" for k in numbers] + [f"CPU, tree {k}" for k in numbers]
        print(f"\n| command | {' | '.join(heads)} |")
        print("|---|" + "---:|" * (2 * len(trees)))
        for label, argv in CASES:
            times: list[list[tuple[float, float]]] = [[] for _ in trees]
            for _ in range(args.runs):
                for k, (tree, env) in enumerate(zip(trees, envs, strict=True)):
                    times[k].append(run_once(argv, tree, env))
            wall = " | ".join(f"{statistics.median(w for w, _ in t):.2f} s" for t in times)
            cpu = " | ".join(f"{statistics.median(c for _, c in t):.2f} s" for t in times)
            print(f"| `{label}` | {wall} | {cpu} |")
        print(f"\nload averages after: {load()}")


if __name__ == "__main__":
    main()
