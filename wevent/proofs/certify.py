"""Regenerate the allocator proof certificates: ``python -m wevent.proofs.certify [--quick]``.

Writes one JSON file per allocator x variant x arithmetic x method into
``wevent/proofs/certificates/`` (allocator, variant, arithmetic, scope, horizon or "unbounded", result,
solver version, time and, for a refutation, the counterexample) and prints the Markdown table
of `wevent/proofs/README.md`. The scopes are larger than the test suite's; ``--quick`` uses the test
suite's scopes (minutes instead of an hour); ``--table`` only prints the table of every
certificate on disk.
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from pathlib import Path

from wevent.mechanisms.allocators.registry import CENTRAL, takes_dynamic
from wevent.proofs.central import ALLOCATORS, AllocatorProof, Scope, prove_allocator

__all__ = ["PLAN", "certify", "main", "recorded", "table"]

CERTIFICATES = Path(__file__).with_name("certificates")
# The central built-ins by requirement kind (the local budget-division ones spend through the
# same fixed kernel, so their certificates are those of their central namesakes).
FIXED = tuple(m for m in CENTRAL if not takes_dynamic(m))
DYNAMIC = tuple(m for m in CENTRAL if takes_dynamic(m))

# (mechanism, variant, arithmetic, unbounded, full scope, quick scope)
PLAN: list[tuple[str, str, str, bool, Scope, Scope]] = []
for _m in FIXED:
    PLAN.append((_m, "sound", "exact", False, Scope(2, 7), Scope(2, 6)))
    PLAN.append((_m, "sound", "exact", True, Scope(3, 6), Scope(2, 6)))
    PLAN.append((_m, "published", "exact", False, Scope(2, 6), Scope(2, 3)))
    PLAN.append((_m, "sound", "float", False, Scope(1, 4), Scope(1, 3)))
    PLAN.append((_m, "published", "float", False, Scope(1, 4), Scope(1, 3)))
_grid = (Fraction(1, 2), Fraction(1))
PLAN.append(("dpbd", "sound", "exact", False, Scope(2, 2, decl_slots=(1, 3)), Scope(1, 2)))
PLAN.append(("dpba", "sound", "exact", False, Scope(1, 2, decl_slots=(1, 3)), Scope(1, 2)))
for _m in DYNAMIC:
    PLAN.append((_m, "sound", "exact", True, Scope(2, 6), Scope(2, 4)))
    PLAN.append((_m, "published", "exact", False, Scope(1, 2), Scope(1, 2)))
    PLAN.append((_m, "published", "float", False, Scope(1, 2, grid=_grid), Scope(1, 2, grid=_grid)))


def _filename(p: AllocatorProof, scope: Scope) -> str:
    method = "unbounded" if p.method in ("k-induction", "induction") else "bounded"
    extra = f"-k{scope.classes}-w{scope.w_max}"
    if ALLOCATORS[p.mechanism].requirement == "dynamic":
        extra += "-d" + "_".join(str(s) for s in scope.decl_slots)
    return f"{p.mechanism}-{p.variant}-{p.arithmetic}-{method}{extra}.json"


def certify(
    quick: bool = False,
    only: str | None = None,
    workers: int = 1,
    arithmetic_only: str | None = None,
) -> list[tuple[AllocatorProof, Path]]:
    CERTIFICATES.mkdir(exist_ok=True)
    out = []
    for mechanism, variant, arithmetic, unbounded, full, small in PLAN:
        if only is not None and mechanism not in only.split(","):
            continue
        if arithmetic_only is not None and arithmetic != arithmetic_only:
            continue
        scope = small if quick else full
        proof = prove_allocator(
            mechanism,
            variant=variant,
            arithmetic=arithmetic,
            scope=scope,
            unbounded=unbounded,
            workers=workers,
        )
        data = proof.to_json()
        data["allocator"] = data.pop("mechanism")
        path = CERTIFICATES / _filename(proof, scope)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        print(f"{path.name}: {proof.status} ({proof.seconds:.1f} s)", file=sys.stderr, flush=True)
        out.append((proof, path))
    return out


def table(paths: list[Path]) -> str:
    """The Markdown table of the certificates at ``paths``."""
    rows = [
        "| allocator | variant | arithmetic | method | scope | status | time |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        d = json.loads(path.read_text(encoding="utf-8"))
        s = d["scope"]
        scope = f"classes {s['classes']}, w {s['w']}, horizon {s['horizon']}"
        if "declaration_slots" in s:
            scope += f", declarations at {s['declaration_slots']}"
        if isinstance(s["budgets"], list):
            scope += f", budgets {{{', '.join(s['budgets'])}}}"
        elif s["budgets"] != "positive reals":  # a restriction in words (DPBA's E_F ratios)
            scope += f", budgets: {s['budgets']}"
        status = d["result"]
        if status == "counterexample":
            status += f": {d['violation']['message']} (decisions {d['decisions']})"
        rows.append(
            f"| {d['allocator']} | {d['variant']} | {d['arithmetic']} | {d['method']} | {scope} "
            f"| {status} | {d['seconds']:.1f} s |"
        )
    return "\n".join(rows)


def recorded() -> list[Path]:
    """Every allocator certificate on disk (not the population ones), in the PLAN's allocator
    order, then by file name."""
    order = {m: i for i, m in enumerate(dict.fromkeys(m for m, *_ in PLAN))}
    paths = [p for p in CERTIFICATES.glob("*.json") if p.name.split("-")[0] in order]
    return sorted(paths, key=lambda p: (order[p.name.split("-")[0]], p.name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the test suite's scopes")
    parser.add_argument(
        "--table",
        action="store_true",
        help="prove nothing: print the table of every recorded certificate",
    )
    parser.add_argument("--only", default=None, help="only these allocators (comma-separated)")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the dynamic induction")
    parser.add_argument(
        "--arithmetic", choices=("exact", "float"), default=None, help="only this arithmetic"
    )
    args = parser.parse_args(argv)
    if args.table:
        print(table(recorded()))
        return 0
    results = certify(args.quick, args.only, args.jobs, args.arithmetic)
    print(table([p for _, p in results]))
    bad = [p for p, _ in results if p.status == "unknown"]
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
